"""The budgeted context assembler and the injection gate: pure functions, no database."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.context.assembler import (
    Assembly,
    Budgets,
    Item,
    MessageSlot,
    assemble,
    fit_window,
    lend_to_window,
    plan_window,
    should_inject,
)


def human(tokens: int = 10) -> MessageSlot:
    return MessageSlot("human", tokens)


def ai(tokens: int = 10) -> MessageSlot:
    return MessageSlot("ai", tokens)


def tool(tokens: int = 100, name: str = "web") -> MessageSlot:
    return MessageSlot("tool", tokens, cleared_tokens=5, name=name)


def items(*tokens: int, prefix: str = "f") -> list[Item]:
    return [Item(f"{prefix}{i}", t, score=1.0 - i / 10) for i, t in enumerate(tokens, 1)]


# -- the gate -------------------------------------------------------------------------------------


def test_the_gate_injects_only_when_the_history_does_not_fit_in_gated_mode() -> None:
    fits = should_inject(800, 1000, "gated")
    assert not fits.inject and "fits the window" in fits.reason
    over = should_inject(1001, 1000, "gated")
    assert over.inject and "does not fit" in over.reason
    assert should_inject(1000, 1000, "gated").inject is False  # exactly full still fits
    assert should_inject(10, 1000, "always").inject and not should_inject(10**6, 1, "never").inject
    assert over.describe() == {
        "mode": "gated",
        "inject": True,
        "reason": over.reason,
        "history_tokens": 1001,
        "window_tokens": 1000,
    }
    with pytest.raises(ValueError):
        should_inject(1, 1, "sometimes")  # type: ignore[arg-type]


# -- the window -----------------------------------------------------------------------------------


def test_a_message_window_is_the_last_n_messages_without_an_orphaned_tool_result() -> None:
    history = [human(), ai(), tool(), ai(), tool(), ai()]
    fit = fit_window(history, recent_messages=3)
    assert fit.kept == (3, 4, 5) and not fit.cleared
    assert [d.reason for d in fit.dropped] == ["older than the window of 3 messages"] * 3
    assert fit.history_tokens == 240 and fit.capacity == 120  # what the kept messages cost
    # the last 2 start on a tool result whose call is older: it goes too, as trim_window always did
    fit = fit_window(history, recent_messages=2)
    assert fit.kept == (5,)
    reasons = {d.key: d.reason for d in fit.dropped}
    assert reasons["message 5 (tool web)"] == "its tool call is older than the window"
    assert reasons["message 1 (human)"] == "older than the window of 2 messages"


def test_a_history_that_fits_the_token_window_is_shown_whole() -> None:
    history = [human(), ai(), tool(), ai(), tool(), ai()]
    fit = fit_window(history, recent_messages=2, window_tokens=240)
    assert fit.kept == tuple(range(6)) and not fit.cleared and not fit.dropped
    assert fit.capacity == 240


def test_old_tool_output_is_cleared_before_any_message_is_dropped() -> None:
    history = [human(), ai(), tool(), ai(), tool(), ai(), human(), ai()]
    # 10+10+100+10+100+10+10+10 = 260 tokens; the window holds 80: clearing the two old tool
    # results (to 5 each) brings the history to 70, so nothing needs dropping
    fit = fit_window(history, recent_messages=3, window_tokens=80)
    assert fit.kept == tuple(range(8))
    assert fit.cleared == {2, 4}
    assert not fit.dropped
    assert [c.reason for c in fit.clearings] == ["tool output older than the last 3 messages"] * 2
    assert [(c.tokens_before, c.tokens_after) for c in fit.clearings] == [(100, 5), (100, 5)]


def test_the_token_window_drops_oldest_first_and_never_strands_a_tool_result() -> None:
    history = [human(), ai(), tool(), ai(), tool(), ai(), human(), ai()]
    # cleared costs: 10,10,5,10,5,10,10,10; from the newest: 10+10+10+5+10 = 45 fits 45; the
    # next (tool at index 2, 5 tokens) would fit 50 but not 45
    fit = fit_window(history, recent_messages=3, window_tokens=45)
    assert fit.kept == (3, 4, 5, 6, 7)
    assert fit.cleared == {4}
    dropped = {d.key: d.reason for d in fit.dropped}
    assert set(dropped) == {"message 1 (human)", "message 2 (ai)", "message 3 (tool web)"}
    assert all("over the window budget of 45 tokens" in r for r in dropped.values())
    # a budget that would start the view on a tool result drops that result with its call
    fit = fit_window(history, recent_messages=3, window_tokens=50)
    assert fit.kept == (3, 4, 5, 6, 7)
    assert {d.key: d.reason for d in fit.dropped}["message 3 (tool web)"] == (
        "its tool call did not fit the window"
    )


def test_the_newest_message_always_stays_even_over_budget() -> None:
    fit = fit_window([human(5), human(500)], recent_messages=1, window_tokens=100)
    assert fit.kept == (1,)
    # a lone tool result keeps the call it answers rather than leaving an empty view
    fit = fit_window([human(5), ai(5), tool(500)], recent_messages=1, window_tokens=100)
    assert fit.kept == (1, 2)


# -- the tiers ------------------------------------------------------------------------------------


def test_pins_keep_a_prefix_and_ranked_facts_every_line_that_still_fits() -> None:
    history = [human()]
    fit = fit_window(history)
    result = assemble(
        pinned=items(30, 30, 5, prefix="p"),
        retrieved=items(20, 20, 20, 1, prefix="r"),
        history=history,
        window=fit,
        budgets=Budgets(pinned=70, retrieved=50),
        pinned_header_tokens=8,
        retrieved_header_tokens=9,
    )
    # pinned: 8 + 30 + 30 = 68 fits; the third (5) would make 73; truncation, not a knapsack
    assert result.pinned == ("p1", "p2")
    # retrieved: 9 + 20 + 20 = 49; r3 would make 69, so it is skipped and the 1-token r4 still fits:
    # a line too long for what is left leaves that room to the shorter ones ranked below it
    assert result.retrieved == ("r1", "r2", "r4")
    reasons = [(d.key, d.reason) for d in result.dropped]
    assert ("pinned #3 [p3]", "over the pinned budget of 70 tokens") in reasons
    assert ("retrieved #3 [r3]", "over the retrieved budget of 50 tokens") in reasons
    assert not any(key.startswith("retrieved #4") for key, _ in reasons)
    assert result.tier("pinned").tokens == 68 and result.tier("retrieved").tokens == 50
    assert result.tier("window").tokens == 10 and result.total_tokens == 128
    assert result.overflow == 0


def test_an_empty_tier_costs_nothing_not_even_its_header() -> None:
    history = [human()]
    result = assemble(
        pinned=[],
        retrieved=[],
        history=history,
        window=fit_window(history),
        budgets=Budgets(),
        pinned_header_tokens=8,
        retrieved_header_tokens=9,
    )
    assert result.tier("pinned").tokens == 0 and result.tier("retrieved").tokens == 0
    assert result.total_tokens == 10


# -- the context ----------------------------------------------------------------------------------


def _pressure(context: int) -> tuple[list[MessageSlot], Assembly]:
    history = [human(20), ai(10), tool(100), ai(10), tool(100), ai(10), human(20), ai(10), tool(50)]
    return history, assemble(
        pinned=items(20, 20, prefix="p"),
        retrieved=items(30, 30, 30, prefix="r"),
        history=history,
        window=fit_window(history, recent_messages=20),
        budgets=Budgets(context=context, reserve=50),
        fixed_tokens=40,
    )


def test_under_context_pressure_old_tool_output_goes_first() -> None:
    # total: 40 fixed + 40 pinned + 90 retrieved + 330 window = 500; the limit is 455 - 50 = 405
    _, result = _pressure(455)
    assert result.cleared == {2}  # one old tool result (100 -> 5) was enough
    assert result.retrieved == ("r1", "r2", "r3") and result.pinned == ("p1", "p2")
    assert result.window == tuple(range(9)) and result.total_tokens == 405
    [clearing] = result.clearings
    assert clearing.key == "message 3 (tool web)" and "old tool output goes first" in clearing.reason
    assert not result.dropped


def test_then_retrieved_facts_go_lowest_ranked_first_then_the_oldest_messages() -> None:
    # after clearing both old tool results: 40 + 40 + 90 + 140 = 310; the latest round's tool
    # result (message 9) is never cleared
    _, result = _pressure(280)  # limit 230
    assert result.cleared == {2, 4} and result.retrieved == ()
    assert [d.key for d in result.dropped] == ["retrieved #3 [r3]", "retrieved #2 [r2]", "retrieved #1 [r1]"]
    assert all("lowest-ranked first" in d.reason for d in result.dropped)
    assert result.window == tuple(range(9)) and result.pinned == ("p1", "p2")
    assert result.total_tokens == 220

    _, result = _pressure(250)  # limit 200: the oldest message goes, at a clean cut
    assert result.window == tuple(range(1, 9)) and result.pinned == ("p1", "p2")
    [window_drop] = [d for d in result.dropped if d.tier == "window"]
    assert window_drop.key == "message 1 (human)" and "oldest first" in window_drop.reason
    assert result.total_tokens == 200


def test_pinned_facts_go_last_newest_pin_first_and_overflow_is_reported() -> None:
    history, result = _pressure(180)  # limit 130
    assert result.window == (7, 8)  # the last clean cut: the final call and its result
    assert all(history[i].role != "tool" or i - 1 in result.window for i in result.window)
    assert result.pinned == ("p1",) and result.total_tokens == 120
    [pinned_drop] = [d for d in result.dropped if d.tier == "pinned"]
    assert pinned_drop.key == "pinned #2 [p2]" and "pinned facts go last" in pinned_drop.reason
    assert result.tier("window").dropped == 7

    history, result = _pressure(60)  # nothing droppable is left, and it still does not fit
    assert result.pinned == () and result.window == (7, 8)
    assert result.overflow == 90 and result.notes
    described = result.describe()
    assert described["overflow"] == 90 and described["total_tokens"] == 100
    assert [t["tier"] for t in described["tiers"]] == ["pinned", "retrieved", "window"]
    assert described["kept"]["window"] == [8, 9]  # 1-based, as the labels are
    assert {d["tier"] for d in described["dropped"]} == {"pinned", "retrieved", "window"}


# -- the plan: the window's share of a known context ------------------------------------------------


def test_without_a_context_the_plan_is_the_configured_window() -> None:
    history = [human(30) for _ in range(12)]
    plan = plan_window(history, Budgets(), "gated")
    assert plan.window == fit_window(history) and plan.budget is None
    assert plan.window.kept == tuple(range(2, 12))  # the last 10 messages
    assert plan.gate.inject  # 360 tokens of history, 300 in the window


def test_with_a_context_the_tiers_share_it_and_retrieved_facts_are_not_pushed_out() -> None:
    history = [human(30) for _ in range(12)]  # 360 tokens
    budgets = Budgets(pinned=50, retrieved=100, context=400, reserve=20)
    pinned = items(20, 20, 20, prefix="p")  # only two fit the pinned budget (with the 8-token header)
    plan = plan_window(history, budgets, "always", pinned=pinned, pinned_header_tokens=8, fixed_tokens=12)
    # 400 - 20 reserve - 12 fixed - 48 pinned - 100 retrieved
    assert plan.budget == 220 and plan.window.kept == tuple(range(5, 12))  # 7 x 30 = 210
    result = assemble(
        pinned=pinned,
        retrieved=items(30, 30, 30),
        history=history,
        window=plan.window,
        budgets=budgets,
        fixed_tokens=12,
        pinned_header_tokens=8,
        gate=plan.gate,
    )
    assert result.retrieved == ("f1", "f2", "f3") and result.pinned == ("p1", "p2")
    assert result.total_tokens == 12 + 48 + 90 + 210 <= 400 - 20 and result.overflow == 0
    assert {d.tier for d in result.dropped} == {"window", "pinned"}  # old messages and the third pin

    # given the whole context instead, the window would have pushed every retrieved fact out
    crowded = assemble(
        pinned=pinned,
        retrieved=items(30, 30, 30),
        history=history,
        window=fit_window(history, window_tokens=400),
        budgets=budgets,
        fixed_tokens=12,
        pinned_header_tokens=8,
    )
    assert crowded.retrieved == ()
    assert all(d.context_full for d in crowded.dropped if d.tier == "retrieved")
    assert not any(d.context_full for d in result.dropped)  # the tiers' own budgets dropped these


def test_a_gate_that_holds_back_leaves_the_retrieved_share_to_the_window() -> None:
    history = [human(30) for _ in range(10)]  # 300 tokens
    budgets = Budgets(pinned=None, retrieved=100, context=400, reserve=50)
    held = plan_window(history, budgets, "gated")
    assert not held.gate.inject and held.budget == 350 and held.window.kept == tuple(range(10))
    spent = plan_window(history, budgets, "always")
    assert spent.gate.inject and spent.budget == 250 and spent.window.kept == tuple(range(2, 10))
    # a window budget of its own caps the share, and is not cut by the retrieved tier's
    capped = plan_window(history, Budgets(pinned=None, retrieved=100, window=120, context=1000), "always")
    assert capped.budget == 120
    squeezed = plan_window(history, Budgets(pinned=None, retrieved=100, window=120, context=700), "always")
    assert squeezed.budget == 88  # 700 - 512 reserve - 100 retrieved


def test_with_clearing_off_old_tool_output_stays_whole_and_older_messages_go_instead() -> None:
    history, cleared = _pressure(455)
    kept = assemble(
        pinned=items(20, 20, prefix="p"),
        retrieved=items(30, 30, 30, prefix="r"),
        history=history,
        window=fit_window(history, recent_messages=20, clear_tool_output=False),
        budgets=Budgets(context=455, reserve=50, clear_tool_output=False),
        fixed_tokens=40,
    )
    assert cleared.cleared == {2} and not kept.cleared and not kept.clearings
    assert kept.retrieved == ()  # without a placeholder to fall back on, the facts went first
    tight = fit_window(history, recent_messages=3, window_tokens=200, clear_tool_output=False)
    assert not tight.cleared and fit_window(history, recent_messages=3, window_tokens=200).cleared


def test_no_context_means_no_pressure() -> None:
    history = [human(10_000)]
    result = assemble(
        pinned=items(10),
        retrieved=items(10),
        history=history,
        window=fit_window(history),
        budgets=Budgets(context=None),
    )
    assert result.overflow == 0 and not [d for d in result.dropped]


def test_budgets_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Budgets(recent_messages=0)
    with pytest.raises(ValueError):
        Budgets(pinned=-1)
    with pytest.raises(ValueError):
        Budgets(reserve=-5)


def test_with_a_share_what_one_side_cannot_use_goes_to_the_other() -> None:
    budgets = Budgets(pinned=0, context=400, reserve=0, retrieved_share=0.5)
    history = [human(50) for _ in range(10)] + [human(5)]  # 505 tokens: more than the context
    plan = plan_window(history, budgets, "always")
    # half of 400 each; whole messages fill 155 of the window's 200, and the 45 left go to the tier:
    # the window's budget is then what it holds, the two summing to the context
    assert sum(history[i].tokens for i in plan.window.kept) == 155
    assert plan.retrieved == 200 + 45 and plan.budget == 155
    assert plan_window(history, replace(budgets, retrieved_share=None), "always").retrieved == 1200
    # the window's leftover goes to the tier; with a short history, nearly everything does
    short = plan_window([human(30), human(5)], budgets, "always")
    assert short.window.kept == (0, 1) and short.retrieved == 400 - 35
    # a tier that stopped 100 tokens short (at the relevance floor, say): the window widens by them
    used = plan.retrieved - 100
    wider = lend_to_window(plan, history, used)
    assert wider.retrieved == used and wider.budget == plan.budget + 100
    assert len(wider.window.kept) == len(plan.window.kept) + 2
    assert wider.budget + wider.retrieved == 400  # lent once: the window never outgrows the context
    assert lend_to_window(plan, history, plan.retrieved) is plan  # nothing left: nothing lent
    # no share, no context: the budgets are what they say
    fixed = plan_window(history, Budgets(pinned=0, retrieved=300), "always")
    assert fixed.retrieved == 300 and lend_to_window(fixed, history, 10) is fixed


def test_a_tier_that_stops_short_widens_the_window_without_pushing_its_own_lines_out() -> None:
    # turns too long for the window's fifth of the context: the window holds only the newest message,
    # and its unused room goes to the tier. The tier then stops at 300 tokens (the relevance floor),
    # and lends the rest back: the wider window must leave room for the 300 it kept.
    budgets = Budgets(pinned=0, context=1000, reserve=0, retrieved_share=0.8)
    history = [human(300) for _ in range(10)] + [human(0)]
    plan = plan_window(history, budgets, "always")
    assert plan.window.kept == (10,) and plan.retrieved == 1000 and plan.budget == 0
    wider = lend_to_window(plan, history, 300)
    assert wider.budget == 700 and wider.window.kept == (8, 9, 10)
    result = assemble(
        pinned=[],
        retrieved=items(100, 100, 100),
        history=history,
        window=wider.window,
        budgets=wider.budgets,
        gate=wider.gate,
    )
    # lent twice, the window took 900 tokens and the tier lost lines to the context
    assert result.retrieved == ("f1", "f2", "f3") and result.total_tokens == 900
    assert not [d for d in result.dropped if d.tier == "retrieved"]
