"""Echoes are not evidence: what restates a user's claim is linked to it at capture and retired with it;
a sub-agent's task is the agent's words; failures and bare names are not memory; the block names no
ids when no tool can use them, and says who spoke where a session records speakers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import ConnectionPool

from memory.context.block import LineStyle, TierSettings, render_block
from memory.doors.capture import capture_answer
from memory.doors.middleware import BeadsMemoryMiddleware
from memory.doors.subagents import run_subagent
from memory.embedders import MiniLMEmbedder
from memory.graph.store import FactStore
from memory.model import Kind, Relation, Source, Status
from memory.rules.corrections import restates
from memory.scripted import ScriptedChatModel, calls, tool_call

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DEADLINE = "The launch deadline for the mobile app is March 14."
SLIPPED = "Bad news: the mobile app launch slipped to April 2."


@pytest.fixture
def real(pool: ConnectionPool, minilm: MiniLMEmbedder) -> FactStore:
    """A store with MiniLM: which claims are near each other is what capture's rules read."""
    store = FactStore(pool, minilm)
    store.setup()
    return store


@pytest.mark.parametrize(
    ("old", "new", "echo"),
    [
        (DEADLINE, "The mobile app launch deadline is March 14.", True),
        (DEADLINE, "Research review times and tell me whether a March 14 launch is realistic.", True),
        (DEADLINE, "Given the March 14 deadline, a two day review fits.", True),
        (DEADLINE, "The launch moved from March 14 to April 2.", False),  # a change, not an echo
        (DEADLINE, "My sister's birthday is March 14.", False),  # another slot
        ("Our weekly team sync is on Tuesdays at 10am.", "See you at the Tuesday sync!", True),
        (
            "Our weekly team sync is on Tuesdays at 10am.",
            "My brother's team sync is on Tuesdays at 10am.",
            False,
        ),
        ("Our weekly team sync is on Tuesdays at 10am.", "Dentist on Tuesday at 10am.", False),
        ("Our API runs in us-east-1.", "The API is hosted in us-east-1.", True),
        ("I take 500 mg of metformin daily.", "Ibuprofen 500 mg as needed.", False),  # a unit is no slot
        ("I used to live in Austin.", "We live in Austin.", False),  # history restates nothing
        # the person repeated, the date changed: a change, which an echo never is
        (
            "The grant report is due to the CTO on Friday, March 6.",
            "The CTO moved the grant report deadline up to Tuesday, March 3.",
            False,
        ),
        (
            "The grant report is due to the CTO on Friday, March 6.",
            "Send the CTO the grant report by March 6.",
            True,
        ),
        # "running" names what "run" does: a consonant doubled before -ing is the word's own
        (
            "I run 5 km every morning.",
            "The user's statement about running 5 km every morning is not relevant to this request.",
            True,
        ),
        ("I jog 3 miles a day.", "Jogging 3 miles a day is fine for your knees.", True),
    ],
)
def test_what_restates_a_claim(old: str, new: str, echo: bool) -> None:
    assert restates(old, new) is echo


def test_the_users_claim_that_adds_a_value_restates_nothing() -> None:
    # a name repeated with the user's own figure: linked as an echo, the figure would leave the block
    old = "To improve this, I want to write more unit tests for the Stripe integration."
    new = "I am trying to increase the unit test coverage for my Stripe integration, which is now at 78%."
    assert restates(old, new) and not restates(old, new, by_user=True)
    # the user's plain second mention is still an echo
    assert restates(DEADLINE, "The mobile app launch deadline is March 14.", by_user=True)


def test_a_sub_agents_echoes_retire_with_the_users_claim(real: FactStore) -> None:
    root = real.root("deadline")
    [claim] = real.capture_message(
        root, DEADLINE, acting_on_behalf_of="user", message_id="m1", valid_from=T0
    ).facts
    child = real.fork(root, "researcher")
    rollup = real.remember(
        root, "The mobile app launch deadline is March 14.", kind=Kind.SUMMARY, source=Source.CONCLUDE_TASK,
        agent_id="researcher", source_key="conclude", valid_from=T0 + timedelta(minutes=5),
    )  # fmt: skip
    note = real.remember(
        child, "Given the March 14 deadline, a two day review fits.", agent_id="researcher",
        valid_from=T0 + timedelta(minutes=4),
    )  # fmt: skip
    assert (rollup.id, Relation.RESTATES.value, claim.id) in real.audit.edges(rollup)
    assert (note.id, Relation.RESTATES.value, claim.id) in real.audit.edges(note)
    # before the correction the echo is one line with the claim, not a second one
    before = real.search(root, "When is the mobile app launch?")
    assert any(f"restates {claim.short_id}" in h.why for h in before.hits)
    assert render_block(before).count("March 14") == 1

    correction = real.capture_message(root, SLIPPED, message_id="m3", valid_from=T0 + timedelta(days=2))
    [(new, old)] = [(s.new, s.old) for s in correction.superseded]
    assert old.id == claim.id
    for echo in (rollup, note):
        retired = real.get(echo.id)
        assert retired.status is Status.SUPERSEDED and retired.head_id == new.id
    reasons = [
        e["reason"] for e in real.review.automatic_edges("deadline") if e["dst"] in (rollup.id, note.id)
    ]
    assert reasons and all(f"restated {claim.short_id}" in r for r in reasons)

    block = render_block(real.search(root, "When is the mobile app launch?"))
    assert "April 2" in block and "March 14" not in block, block

    # an echo of the replaced value that arrives later is retired at once, under the current value
    late = real.remember(
        root, DEADLINE, kind=Kind.CONCLUSION, source=Source.PASSIVE_CAPTURE, source_key="late"
    )
    assert real.get(late.id).head_id == new.id
    # and taking the correction back brings the claim and every echo back
    real.undo_supersede(new, claim)
    assert all(real.get(f.id).status is Status.ACTIVE for f in (claim, rollup, note, late))


def test_the_users_second_mention_goes_with_the_first(real: FactStore) -> None:
    root = real.root("standup")
    [first] = real.capture_message(root, "Our standup is at 9:30.", message_id="m1", valid_from=T0).facts
    [again] = real.capture_message(
        root, "See you all at the 9:30 standup tomorrow.", message_id="m2", valid_from=T0 + timedelta(days=1)
    ).facts
    real.capture_message(
        root, "The standup moved to 10:45.", message_id="m3", valid_from=T0 + timedelta(days=2)
    )
    assert {real.get(first.id).status, real.get(again.id).status} == {Status.SUPERSEDED}
    block = render_block(real.search(root, "What time is the standup?"))
    assert "9:30" not in block and "10:45" in block, block


def test_a_delegated_task_is_the_agents_instruction_not_the_users(real: FactStore) -> None:
    root = real.root("sync")
    real.capture_message(root, "Our weekly team sync is on Tuesdays at 10am.", message_id="m1", valid_from=T0)
    model = ScriptedChatModel(
        replies=[calls(tool_call("conclude_task", summary="Remote retros work best short.")), "Done."]
    )
    run_subagent(real, root, model, [], "search weekly team sync on Tuesdays at 10am", "researcher")
    task = [f for f in real.audit.session_facts("sync") if f.source is Source.DELEGATION]
    assert task and all(f.kind is Kind.DIRECTIVE for f in task)
    hits = real.search(root, "When is the weekly sync?").hits
    assert [h.fact.source for h in hits if "search weekly" in h.fact.body] == []


def test_failures_and_bare_names_are_no_conclusions(real: FactStore) -> None:
    root = real.root("junk")
    for answer in (
        "Mozilla",
        "launch_deadline",
        "The web search is unavailable right now due to a DNS error.",
    ):
        assert capture_answer(real, root, answer, key=f"k:{answer}") is None
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("conclude_task", summary="realistic_launch")),
            calls(tool_call("conclude_task", summary="Web search is unavailable right now (DNSError).")),
            "I could not finish.",
        ]
    )
    summary = run_subagent(real, root, model, [], "Find the review time", "researcher", max_reprompts=0)
    refusals = [str(m.content) for p in model.prompts for m in p if m.type == "tool"]
    assert any("is a name, not a finding" in r for r in refusals)
    assert any("a tool's failure is not a finding" in r for r in refusals)
    # the wrapper records that the delegation failed, for audit; no search brings it back
    assert summary.source is Source.FALLBACK_CONCLUDE
    found = real.search(root, "Did the researcher complete its task?", relevance_floor=-1.0)
    assert summary.id not in {h.fact.id for h in found.hits}
    assert (summary.short_id, "a failed delegation's notice") in found.dropped


def test_the_block_names_no_ids_without_memory_tools_and_says_who_spoke(real: FactStore) -> None:
    root = real.root("group")
    real.capture_message(root, "I painted that lake sunrise last year.", message_id="m1", speaker="Melanie")
    with_tools = BeadsMemoryMiddleware(real, root)
    without = BeadsMemoryMiddleware(real, root, bind_tools=False)
    assert with_tools.tier.style.ids and not without.tier.style.ids
    result = real.search(root, "When did Melanie paint a sunrise?")
    plain = render_block(result, style=without.tier.style)
    assert "Melanie: I painted that lake sunrise" in plain and "[" not in plain
    assert "(ids in brackets)" in render_block(result)
    anonymous = render_block(result, style=LineStyle(ids=False, speakers=False))
    assert "Melanie:" not in anonymous
    assert TierSettings().style == LineStyle()


def test_the_pinned_tier_names_no_ids_without_memory_tools(real: FactStore) -> None:
    """A pin's id costs a line about seven tokens and only a memory tool reads it: a model with none
    bound (the offline reader copied them into its answers) gets the pinned tier without them."""
    root = real.root("pins")
    [fact] = real.capture_message(root, "My sister lives in Lyon.", message_id="m1").facts
    real.pin(fact.id)
    with_tools = BeadsMemoryMiddleware(real, root).plan_call(
        [], [], "Where does my sister live?", 0, namespace=root
    )
    without = BeadsMemoryMiddleware(real, root, bind_tools=False).plan_call(
        [], [], "Where does my sister live?", 0, namespace=root
    )
    assert f"- [{fact.short_id}] My sister lives in Lyon." in with_tools.pinned_block
    assert "ids in brackets" in with_tools.pinned_block
    assert "- My sister lives in Lyon." in without.pinned_block
    assert "[" not in without.pinned_block and "ids in brackets" not in without.pinned_block
    # the tier's budget counts the lines as they are shown
    [(_, line, tokens)] = without.pinned_lines
    assert line == "- My sister lives in Lyon." and tokens < with_tools.pinned_lines[0][2]


def test_an_old_value_said_twice_is_replaced_twice(real: FactStore) -> None:
    root = real.root("dose")
    [first] = real.capture_message(
        root, "I'm on 50mg of the new medication.", message_id="m1", valid_from=T0
    ).facts
    [again] = real.capture_message(
        root,
        "I take my 50mg each morning with breakfast.",
        message_id="m2",
        valid_from=T0 + timedelta(days=1),
    ).facts
    changed = real.capture_message(
        root,
        "The doctor increased my dose, I'm now on 100mg.",
        message_id="m3",
        valid_from=T0 + timedelta(days=2),
    )
    assert {s.old.id for s in changed.superseded} == {first.id, again.id}
    block = render_block(real.search(root, "What dose am I on?"))
    assert "100mg" in block and "50mg" not in block, block
