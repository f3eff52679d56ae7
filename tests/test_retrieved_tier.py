"""The retrieved tier spends its budget, on real Postgres: more facts as the budget grows and never over
it, a stop at the relevance floor, a thin claim shown with its passage, and the
harness's `beads` arm deciding exactly what the middleware decides."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import injection_events, system_text
from eval_samples import write_locomo
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from bench.eval.assembled import BeadsArm, history_slots
from bench.eval.loaders import load_locomo
from bench.eval.runner import Stores, open_stores
from bench.eval.tokens import count_tokens
from bench.eval.window import TAIL_TITLE, ConversationView
from memory.context.assembler import Budgets, MessageSlot, retrieved_fit
from memory.context.block import (
    HEADER,
    LineStyle,
    TierSettings,
    excerpt,
    fill_retrieved,
    header,
    hit_line,
    shown_as_outdated,
)
from memory.context.recall import plan_call
from memory.doors.capture import capture_answer
from memory.doors.middleware import BeadsMemoryMiddleware, message_slots
from memory.embedders import FakeEmbedder
from memory.flags import PossiblyOutdated
from memory.graph.store import FactStore
from memory.model import Fact, Hit, Kind, SearchResult
from memory.retrieval import SearchOptions, rank
from memory.scripted import ScriptedChatModel

ASK = "What is our budget for each item?"


def budget_lines(store: FactStore, n: int, session: str = "s") -> None:
    root = store.root(session)
    for i in range(n):
        store.capture_message(
            root, f"Budget line {i}: our budget for item {i} is ${i}0k.", message_id=f"m{i}"
        )


def events_at(store: FactStore, **options: Any) -> dict[str, Any]:
    middleware = BeadsMemoryMiddleware(store, store.root("s"), **options)
    agent = create_agent(ScriptedChatModel(replies=["ok"]), tools=[], middleware=[middleware])
    [event] = injection_events(agent, ASK)
    return event


def retrieved_tier(event: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in event["assembly"]["tiers"] if t["tier"] == "retrieved")


# -- the budget -----------------------------------------------------------------------------------


def test_the_tier_fills_a_growing_budget_with_more_facts_and_never_exceeds_it(store: FactStore) -> None:
    budget_lines(store, 60)
    kept = []
    # these lines cost about 20 tokens each: asked for as many, the budget is what stops the tier
    settings = TierSettings(line_tokens=20)
    for budget in (60, 150, 400, 1200):
        event = events_at(store, retrieved_tokens=budget, tier=settings)
        tier = retrieved_tier(event)
        assert tier["budget"] == budget and 0 < tier["tokens"] <= budget
        assert len(event["facts"]) == tier["kept"]
        # the search asked for about what the budget holds (k derived from it, not a constant)
        assert event["retrieved_tier"]["k"] >= budget // settings.line_tokens
        kept.append(len(event["facts"]))
        if budget < 1200:  # the budget, not k, is what stopped it: the next lines did not fit
            over = [d for d in event["assembly"]["dropped"] if d["tier"] == "retrieved"]
            assert over and all(d["reason"] == f"over the retrieved budget of {budget} tokens" for d in over)
    assert kept == sorted(kept) and kept[0] < kept[1] < kept[2]
    assert kept[-1] > 8  # past the constant k of old
    # the best facts are kept at every budget: a larger block extends a smaller one (the lines are
    # read newest first, TierSettings.read_order; in rank's order the smaller is its first lines)
    small = events_at(store, retrieved_tokens=150)["facts"]
    large = events_at(store, retrieved_tokens=400)["facts"]
    assert {f["short_id"] for f in small} < {f["short_id"] for f in large}
    small = events_at(store, retrieved_tokens=150, tier=TierSettings(read_order="rank"))["facts"]
    large = events_at(store, retrieved_tokens=400, tier=TierSettings(read_order="rank"))["facts"]
    assert [f["short_id"] for f in large][: len(small)] == [f["short_id"] for f in small]


def test_the_lines_are_read_newest_first_with_the_agents_replies_after_the_users_words(
    store: FactStore,
) -> None:
    """Which lines go in, rank decides; they are read by when each was said, the latest first, so
    the header's rule (the later of two that disagree holds) reads down the block. A question about
    how things were keeps rank's order, and the agent's replies stay after the user's words."""
    store.search_options = dataclasses.replace(store.search_options, relevance_floor=-1.0)
    root = store.root("s")
    said = [
        "I signed up for a pottery class on Tuesdays.",
        "My sister Ana moved to Lyon for work.",
        "I adopted a grey cat named Miso.",
        "I started learning Portuguese with an app.",
    ]
    start = datetime(2024, 1, 8, tzinfo=UTC)
    for i, text in enumerate(said):
        store.capture_message(root, text, message_id=f"m{i}", valid_from=start + timedelta(days=30 * i))
    reply = "Miso sounds lovely, and a pottery class is a fine way to spend an evening."
    capture_answer(store, root, reply, key="r1")  # said last, by the agent

    def read(query: str, order: str) -> list[str]:
        tier = TierSettings(read_order=order)  # type: ignore[arg-type]
        middleware = BeadsMemoryMiddleware(store, root, tier=tier, bind_tools=False)
        call = middleware.plan_call([], [], query, 0, namespace=root)
        return [h.fact.body for h, _, _ in call.retrieved_lines]

    asked = "What do I do on weekday evenings, and who is in my family?"
    newest, ranked = read(asked, "newest"), read(asked, "rank")
    assert sorted(newest) == sorted(ranked) == sorted([*said, reply])  # the same lines
    assert newest == [*said[::-1], reply] != ranked
    # how things were: rank's order
    earlier = "What did I sign up for back in January?"
    assert read(earlier, "newest") == read(earlier, "rank")


def test_with_a_known_context_the_tier_gets_its_share_and_what_the_window_cannot_use(
    store: FactStore,
) -> None:
    budget_lines(store, 60)
    event = events_at(store, context_tokens=2000, reserve_tokens=0, retrieved_share=0.25)
    tier, report = retrieved_tier(event), event["assembly"]
    # one short message in the thread: the window needs a few tokens, the tier takes the rest
    assert tier["budget"] > 0.25 * 2000
    assert report["total_tokens"] <= 2000 and report["overflow"] == 0
    assert event["window_messages"] == 1
    shared = events_at(store, context_tokens=2000, reserve_tokens=0, retrieved_share=0.5)
    assert retrieved_tier(shared)["budget"] == tier["budget"]  # the window left the same room either way


def similarities(event: dict[str, Any]) -> dict[str, float]:
    """Each injected fact's similarity (what the floor reads; the order is fused)."""
    return {f["short_id"]: 1 - f["distance"] for f in event["facts"]}


def test_selection_stops_at_the_relevance_floor_before_the_budget_is_full(store: FactStore) -> None:
    budget_lines(store, 30)
    wide = events_at(store, retrieved_tokens=2000)
    sims = similarities(wide)
    ranked = sorted(set(sims.values()), reverse=True)
    assert len(ranked) > 6
    floor = (ranked[4] + ranked[5]) / 2
    options = SearchOptions(relevance_floor=floor)
    event = events_at(store, retrieved_tokens=2000, search_options=options)
    assert [f["short_id"] for f in event["facts"]] == [f for f, sim in sims.items() if sim >= floor]
    assert retrieved_tier(event)["tokens"] < 2000  # room left: the floor stopped it, not the budget
    assert "below the relevance floor" in {reason for _, reason in event["dropped"]}


def candidate(score: float, name: str) -> dict[str, Any]:
    fid = uuid.uuid5(uuid.NAMESPACE_URL, name)
    return {
        "hit_id": fid, "hit_kind": "user_input", "hit_status": "active", "head_id": fid,
        "head_kind": "user_input", "head_status": "active", "head_agent_id": "root",
        "head_message_id": name, "head_md5": name, "head_in_scope": True, "head_demoted": False,
        "claim_sim": score, "passage_sim": None, "head_has_vector": True, "head_derived_from": [],
        "head_valid_from": None,
    }  # fmt: skip


def test_one_message_does_not_fill_the_block_with_its_claims() -> None:
    def claim(score: float, name: str, message: str) -> dict[str, Any]:
        return {**candidate(score, name), "head_message_id": message}

    # message "long" was cut into four claims, all close to the query; two other messages follow
    rows = [claim(0.80, "a", "long"), claim(0.79, "b", "long"), claim(0.78, "c", "long"),
            claim(0.77, "d", "long"), claim(0.70, "e", "m2"), claim(0.60, "f", "m3")]  # fmt: skip
    flat = SearchOptions(k=4, keyword=False, per_message=None)
    assert [c["md5"] for c in rank(rows, flat).chosen] == ["a", "b", "c", "d"]
    spread = SearchOptions(k=4, keyword=False, per_message=2)
    assert [c["md5"] for c in rank(rows, spread).chosen] == ["a", "b", "e", "f"]
    # nothing is lost when the block has room: the message's other claims come after the rest
    roomy = SearchOptions(k=10, keyword=False, per_message=2)
    assert [c["md5"] for c in rank(rows, roomy).chosen] == ["a", "b", "e", "f", "c", "d"]
    with pytest.raises(ValueError):
        SearchOptions(per_message=0)


def test_a_question_that_names_a_speaker_ranks_their_own_facts_first() -> None:
    def said(score: float, name: str, speaker: str) -> dict[str, Any]:
        return {**candidate(score, name), "head_speaker": speaker}

    # Ben says Ana's name to her; Ana says what she does herself, a little further from the query
    rows = [said(0.62, "ben", "Ben"), said(0.55, "ana", "Ana"), said(0.50, "other", "Ben")]
    options = SearchOptions(k=3, keyword=False, speaker_boost=0.2)
    assert [c["md5"] for c in rank(rows, options, "What does Ana do to relax?").chosen] == [
        "ana",
        "ben",
        "other",
    ]
    # no speaker named, or the boost off: the closeness alone
    assert next(c["md5"] for c in rank(rows, options, "What does anyone do to relax?").chosen) == "ben"
    off = SearchOptions(k=3, keyword=False, speaker_boost=0.0)
    assert next(c["md5"] for c in rank(rows, off, "What does Ana do to relax?").chosen) == "ben"
    # the floor reads the closeness, not the boost: a fact under it stays out whoever said it
    low = [said(0.62, "ben", "Ben"), said(0.15, "ana", "Ana")]
    floor = SearchOptions(k=3, keyword=False, speaker_boost=0.2, relevance_floor=0.2)
    assert [c["md5"] for c in rank(low, floor, "What does Ana do?").chosen] == ["ben"]


def test_claims_of_one_message_in_a_block_share_its_line(store: FactStore) -> None:
    root = store.root("s")
    store.capture_message(
        root,
        "Our budget for item 1 is $10k. The weather was grey all week. Our budget for item 2 is $20k.",
        message_id="both",
    )
    model = ScriptedChatModel(replies=["ok"])
    middleware = BeadsMemoryMiddleware(
        store, root, retrieved_tokens=400, tier=TierSettings(merge_claims=True, excerpt_share=0.0)
    )
    [event] = injection_events(create_agent(model, tools=[], middleware=[middleware]), ASK)
    block = system_text(model.prompts[0])
    # one line, one date: the two claims in the order they were said, the claim between them left out
    [line] = [x for x in block.splitlines() if "item 1" in x]
    assert "Our budget for item 1 is $10k. … Our budget for item 2 is $20k." in line
    assert sum("budget for item" in x for x in block.splitlines()) == 1
    merged = [sid for sid, reason in event["dropped"] if "line of a better-ranked claim" in reason]
    assert len(merged) == 1
    # off: a line each
    model = ScriptedChatModel(replies=["ok"])
    middleware = BeadsMemoryMiddleware(
        store, root, retrieved_tokens=400, tier=TierSettings(merge_claims=False, excerpt_share=0.0)
    )
    injection_events(create_agent(model, tools=[], middleware=[middleware]), ASK)
    assert sum("budget for item" in x for x in system_text(model.prompts[0]).splitlines()) == 2


# -- thin claims ----------------------------------------------------------------------------------


def test_excerpt_centres_on_the_claim_and_cuts_at_words() -> None:
    text = "We talked about many things that day. We moved the launch. Friday. Then lunch happened."
    start = text.index("Friday.")
    shown, (lo, hi) = excerpt(text, (start, start + 7), 40)
    assert "Friday." in shown and text[lo:hi].strip() in text
    assert shown.startswith("…") and shown.endswith("…")
    assert not shown.strip("…").startswith(" ") and len(shown) <= 42
    whole, (lo, hi) = excerpt(text, (start, start + 7), 500)
    assert whole == text and (lo, hi) == (0, len(text))


def test_an_excerpt_below_a_line_of_its_message_shows_what_that_line_did_not() -> None:
    text = "We talked about many things that day. We moved the launch. Friday. Then lunch happened."
    start = text.index("Friday.")
    shown, (lo, _) = excerpt(text, (start, start + 7), 40, not_before=text.index("Friday"))
    assert lo == start and shown.startswith("…Friday. Then lunch")  # the room goes after the claim
    # never past the claim's own start, whatever the line above showed
    assert excerpt(text, (start, start + 7), 40, not_before=len(text))[1][0] == start


def test_two_claims_of_one_message_make_lines_that_do_not_repeat_each_other(store: FactStore) -> None:
    root = store.root("two-claims")
    store.capture_message(
        root,
        "Status on the Orion migration: the schema review wrapped up on Monday and the dashboards are"
        " green. Priya from the platform team joined us this week. She will run the rollback drill on"
        " Thursday, before the cutover window on Saturday from 02:00 to 04:00 UTC. Marco is on call for"
        " the weekend, and the runbook lives in the ops wiki under Orion.",
        message_id="status",
    )
    model = ScriptedChatModel(replies=["ok"])
    middleware = BeadsMemoryMiddleware(store, root, retrieved_tokens=1_200)
    create_agent(model, tools=[], middleware=[middleware]).invoke(
        {
            "messages": [
                HumanMessage("Who runs the rollback drill for the Orion migration, and who is on call?")
            ]
        }
    )
    lines = [x for x in system_text(model.prompts[0]).splitlines() if x.startswith("- ")]
    # the message is too long for one line: its claims come as excerpts, each showing what the lines
    # above did not (they had each repeated the rollback drill and the cutover window)
    assert len(lines) >= 2
    for sentence in ("Priya from the platform team joined us", "before the cutover window on Saturday"):
        assert sum(sentence in line for line in lines) == 1, (sentence, lines)


def test_a_thin_claim_brings_its_passage_within_the_budget(store: FactStore) -> None:
    root = store.root("s")
    store.capture_message(root, "We moved the launch. Friday.", message_id="launch")
    store.capture_message(root, "The launch party needs a venue near the office.", message_id="party")
    tier = TierSettings(thin_tokens=8, passage_chars=120, excerpt_share=0.0)
    everything = SearchOptions(relevance_floor=-1.0)  # every claim is a candidate, "Friday." included
    ask = "Did we move the launch?"  # a question: held out of retrieval, so no call finds the last one

    def event(**options: Any) -> tuple[dict[str, Any], str]:
        model = ScriptedChatModel(replies=["ok"])
        middleware = BeadsMemoryMiddleware(store, root, search_options=everything, **options)
        [found] = injection_events(create_agent(model, tools=[], middleware=[middleware]), ask)
        return found, system_text(model.prompts[0])

    found, system = event(tier=tier, retrieved_tokens=400)
    facts = {f["text"]: f for f in found["facts"]}
    # the thin claim that ranks first is shown with the message it was cut from
    assert facts["We moved the launch."]["passage"] == "We moved the launch. Friday."
    assert ') We moved the launch. (in: "We moved the launch. Friday.")' in system
    # its sibling's words are in that passage: not shown twice, and the reason reported
    assert "Friday." not in facts and "Friday." not in system.replace("launch. Friday.", "")
    assert "its words are in the passage shown with a better-ranked fact" in {r for _, r in found["dropped"]}
    assert found["retrieved_tier"]["with_passage"] == [facts["We moved the launch."]["short_id"]]
    assert retrieved_tier(found)["tokens"] <= 400
    # a thick claim is shown as it is
    assert facts["The launch party needs a venue near the office."]["passage"] is None

    # a budget the passage line does not fit keeps the shorter lines that do instead
    sid = facts["We moved the launch."]["short_id"]
    line = f'- [{sid}] We moved the launch. (in: "We moved the launch. Friday.")'
    small = count_tokens(HEADER) + count_tokens(line) - 1
    tight, _ = event(tier=tier, retrieved_tokens=small)
    assert 0 < retrieved_tier(tight)["tokens"] <= small
    assert "We moved the launch." not in {f["text"] for f in tight["facts"]}
    # off (thin_tokens=0, excerpts off): claims alone, a line each where they are not merged
    plain, _ = event(retrieved_tokens=400, tier=TierSettings(merge_claims=False, excerpt_share=0.0))
    assert all(f["passage"] is None for f in plain["facts"]) and "Friday." in {
        f["text"] for f in plain["facts"]
    }
    # and with merge_claims the message's two claims share one line
    merged, text = event(retrieved_tokens=400, tier=TierSettings(merge_claims=True, excerpt_share=0.0))
    assert "We moved the launch. … Friday." in text and "Friday." not in {f["text"] for f in merged["facts"]}


# -- the beads arm is the middleware --------------------------------------------------------------


def test_the_middleware_and_its_plan_call_produce_the_same_block(store: FactStore) -> None:
    budget_lines(store, 40)
    history = [
        HumanMessage("Which vendors did we compare?", id="h1"),
        AIMessage("Three of them.", id="a1"),
        HumanMessage(ASK, id="h2"),
    ]
    options: dict[str, Any] = {"context_tokens": 900, "tier": TierSettings(thin_tokens=6)}
    middleware = BeadsMemoryMiddleware(store, store.root("s"), **options)
    model = ScriptedChatModel(replies=["ok"])
    agent = create_agent(model, tools=[], middleware=[middleware])
    agent.invoke({"messages": history}, {"configurable": {"thread_id": "t"}})
    injected = system_text(model.prompts[0])
    # the same history through the function the middleware calls: the very same block
    same = BeadsMemoryMiddleware(store, store.root("s"), **options)
    call = same.plan_call(message_slots(history), [m.id for m in history], ASK, 0)
    assert call.block and injected == call.block
    assert call.retrieved_block.startswith(HEADER)
    # and through recall.plan_call with the middleware's settings spelled out
    direct = plan_call(
        store,
        store.root("s"),
        history=message_slots(history),
        message_ids=[m.id for m in history],
        query=ASK,
        fixed_tokens=0,
        budgets=Budgets(context=900, retrieved_share=same.budgets.retrieved_share),
        injection="always",
        options=store.search_options,
        tier=TierSettings(thin_tokens=6),
    )
    assert direct.block == call.block


@pytest.fixture
def stores(db_url: str) -> Iterator[Stores]:
    with open_stores(db_url, FakeEmbedder(256)) as s:
        yield s


def test_the_beads_arm_shows_the_block_the_middleware_decides(stores: Stores, tmp_path: Path) -> None:
    [conversation] = load_locomo(write_locomo(tmp_path)).conversations
    stores.ingestor.ingest(conversation)
    arm = BeadsArm(stores.facts, stores.ingestor.root)
    view = ConversationView(conversation)
    blocks = 0
    for question in conversation.questions:
        for budget in (120, 400):
            window = arm.window(view, question, budget)
            assert window.tokens == count_tokens(window.text) <= budget
            # what the middleware (defaults, context = budget + its reserve, and like the reader no
            # memory tools) decides for this history
            middleware = BeadsMemoryMiddleware(
                stores.facts,
                stores.ingestor.root(conversation.id),
                context_tokens=budget + arm.middleware(conversation.id, budget).budgets.reserve,
                bind_tools=False,
            )
            assert middleware.budgets == arm.middleware(conversation.id, budget).budgets
            ids: list[str | None] = [t.id for t in conversation.turns]
            [fixed] = [count_tokens(TAIL_TITLE)]
            call = middleware.plan_call(history_slots(view), [*ids, None], question.question, fixed)
            assert call.retrieved_block in window.text  # '' when the window came to show it all
            blocks += bool(call.retrieved_block)
            facts = [i.fact_id for i in window.items if i.fact_id is not None]
            assert facts == [h.fact.short_id for h, _, _ in call.retrieved_lines]
            # the tiers share the context: none of the tier's lines is pushed out by the window
            assert window.retrieved_pushed_out == 0
    assert blocks > len(conversation.questions) // 2


def test_the_gated_beads_arm_is_the_transcript_while_it_fits_and_the_middleware_after(
    stores: Stores, tmp_path: Path
) -> None:
    from bench.eval.runner import make_arm

    [conversation] = load_locomo(write_locomo(tmp_path)).conversations
    stores.ingestor.ingest(conversation)
    view = ConversationView(conversation)
    gated, always = make_arm("beads_gated", stores), make_arm("beads", stores)
    question = conversation.questions[0]
    roomy = view.history_tokens + count_tokens(TAIL_TITLE) + 400
    fits = gated.window(view, question, roomy)
    no_ids = header(LineStyle(ids=False))  # the reader has no memory tools: the block names no ids
    assert fits.arm == "beads_gated" and no_ids not in fits.text
    assert all(i.fact_id is None for i in fits.items)
    # once the transcript does not fit, the gate opens: the same block as the default
    tight = gated.window(view, question, 150)
    same = always.window(view, question, 150)
    assert (tight.text, tight.tokens) == (same.text, same.tokens) and no_ids in tight.text


def test_the_beads_arm_never_retrieves_what_was_said_after_the_question(
    stores: Stores, tmp_path: Path
) -> None:
    [conversation] = load_locomo(write_locomo(tmp_path)).conversations
    stores.ingestor.ingest(conversation)
    view = ConversationView(conversation).until(conversation.sessions[0].id)
    arm = BeadsArm(stores.facts, stores.ingestor.root)
    question = conversation.questions[0]
    window = arm.window(view, question, 400)
    assert not {i.turn_id for i in window.items} & view.hidden
    slots = history_slots(view)
    assert slots[-1] == MessageSlot("human", 0)  # the question: the newest message, free
    assert dataclasses.replace(slots[0]).tokens == view.tokens[conversation.turns[0].id]


def test_the_beads_arm_counts_a_fact_flagged_outdated_as_marked(store: FactStore) -> None:
    from bench.eval.assembled import pack_hits
    from bench.eval.tokens import Packer

    root = store.root("s")
    old = store.capture_message(root, "The launch is on Friday.", message_id="m1").facts[0]
    new = store.capture_message(root, "The launch is on Monday.", message_id="m2").facts[0]
    older = Hit(old, 0.5, 0.5, 0.5, None, False, None, (PossiblyOutdated("x"),))
    newer = Hit(new, 0.6, 0.4, 0.6, None, False, None)
    assert shown_as_outdated(older) and not shown_as_outdated(newer)
    lines = [(h, hit_line(h), 12) for h in (newer, older)]
    items = pack_hits(Packer(200), HEADER, lines, first_priority=3)
    assert [(i.turn_id, i.priority, i.marked_outdated) for i in items] == [("m2", 3, False), ("m1", 4, True)]


def test_a_large_budget_shows_a_long_message_whole_and_whole_share_caps_it(store: FactStore) -> None:
    root = store.root("s")
    sentences = [
        f"Budget note {i}: the budget for stage {i} of the rollout is ${i}5k and is approved."
        for i in range(9)
    ]
    message = " ".join(sentences)
    assert len(message) > 600  # longer than a claim's line may be when the budget is small
    store.capture_message(root, message, message_id="long")

    def system(tier: TierSettings) -> str:
        model = ScriptedChatModel(replies=["ok"])
        middleware = BeadsMemoryMiddleware(store, root, tier=tier, retrieved_tokens=6000)
        injection_events(create_agent(model, tools=[], middleware=[middleware]), ASK)
        return system_text(model.prompts[0])

    # at 6,000 tokens a line may take 500: the message is one line, all of it, not clipped at a claim's length
    whole = system(TierSettings())
    assert message in whole
    # whole_share=0: no budget for whole messages, so the message is shown as its claims
    claims = system(TierSettings(whole_share=0.0, excerpt_share=0.0))
    assert message not in claims and sentences[0] in claims
    # an agent's conclusion too long to be shown whole is clipped as a claim is, at any budget
    answer = " ".join(
        f"Summary {i}: our budget for item {i} of the rollout is ${i}5k in all." for i in range(40)
    )
    store.remember(root, answer, kind=Kind.CONCLUSION)
    clipped = system(TierSettings())
    assert message in clipped and answer not in clipped and answer[:200] in clipped
    assert answer[:1500] in system(TierSettings(conclusion_chars=0))  # clipped at the line's own length


def test_a_reply_that_repeats_a_message_shown_whole_is_not_shown_again(store: FactStore) -> None:
    # a small model answered by repeating the user's earlier message word for word; its conclusion
    # matched none of the message's claims, so the block held the same text as two lines
    root = store.root("s")
    message = "Our budget for each item is $40k. The vendor invoices us in March."
    claims = store.capture_message(root, message, message_id="m1").facts
    reply = store.remember(root, message, kind=Kind.CONCLUSION)

    def block(facts: list[Fact]) -> tuple[list[str], list[tuple[str, str]]]:
        hits = tuple(Hit(f, 0.9 - i * 0.01, 0.1, 0.9, None, False, None) for i, f in enumerate(facts))
        result = SearchResult(hits, ASK, False, 0.9)
        tier = fill_retrieved(lambda k: result, store.passages, 6000, sum, TierSettings())
        return list(tier.lines), list(tier.result.dropped)

    # the message shown whole, then the reply: the reply is left out
    lines, dropped = block([*claims, reply])
    assert len(lines) == 1 and message in lines[0], lines
    assert (reply.short_id, f"the same words as {claims[0].short_id}") in dropped
    # the reply shown first, as a line of its own: the message is left out, and so are its claims
    lines, dropped = block([reply, *claims])
    assert len(lines) == 1 and message in lines[0], lines
    assert (claims[0].short_id, f"the same words as {reply.short_id}") in dropped


def test_excerpts_show_a_claim_in_its_turn_only_where_a_line_may_hold_a_paragraph() -> None:
    settings = TierSettings(excerpt_share=0.5, excerpt_from=150)
    small = settings.for_budget(1_200)  # a line may take 120 tokens: claims alone, as before
    assert small.thin_tokens == 0
    everywhere = TierSettings(excerpt_share=0.5).for_budget(1_200)
    assert everywhere.thin_tokens == 120 and everywhere.passage_chars == 240
    large = settings.for_budget(3_000)  # 300 tokens a line: a claim with 600 characters of its turn
    assert large.thin_tokens == 300 and large.passage_chars == 600 and large.max_chars == 1_200
    assert TierSettings().for_budget(3_000).thin_tokens == 300  # on by default, at every budget
    assert TierSettings(excerpt_share=0.0).for_budget(3_000).thin_tokens == 0  # off: claims alone
    with pytest.raises(ValueError, match="excerpt_share"):
        TierSettings(excerpt_share=1.5)


def test_an_excerpt_goes_on_from_where_a_line_above_stopped_in_its_claim() -> None:
    text = "We met on Monday. The drill runs on Thursday before the cutover on Saturday. Marco is on call."
    claim = (text.index("The drill"), text.index(" Marco"))
    stopped = text.index("before the cutover")  # the line above showed the claim up to here
    shown, (lo, hi) = excerpt(text, claim, 40, not_before=stopped)
    assert lo == stopped and shown.startswith("…before the cutover on Saturday.")
    assert "The drill" not in shown and hi > claim[1]  # the room goes after what is left of it


def test_the_tier_stops_widening_once_a_line_did_not_fit(store: FactStore) -> None:
    # a line that did not fit leaves room only a line ranked below every one shown could fill; on a
    # 1M chat's session, searching for one took five searches up to max_k for a short question.
    # Where the block is nearly empty (its first line too long for the budget) it still widens:
    # `test_a_thin_claim_brings_its_passage_within_the_budget`
    root = store.root("s")
    # a day apart: which lines say their minute depends on the others in the block, and a line must
    # cost the same in every block here
    facts = [
        store.remember(
            root,
            f"Item {i} arrives in batch {i} of the vendor's order, packed by hand and checked twice.",
            valid_from=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i),
        )
        for i in range(60)
    ]

    def tier_of(budget: int | None, settings: TierSettings, asked: list[int]) -> tuple[int, ...]:
        def search(k: int | None) -> SearchResult:
            asked.append(k or len(facts))
            hits = tuple(
                Hit(f, 0.9 - i * 0.001, 0.1, 0.9, None, False, None) for i, f in enumerate(facts[:k])
            )
            return SearchResult(hits, ASK, False, 0.9)

        fit = (lambda tokens: retrieved_fit(tokens, 0, budget)) if budget is not None else sum
        return fill_retrieved(search, store.passages, budget, fit, settings).tokens

    # the first search asks for budget // 10 facts; no line_share, so that a line costs the same at
    # every budget
    plain = TierSettings(line_tokens=10, line_share=0)
    tokens = tier_of(None, plain, [])
    # two lines fit and the third does not, with more than widen_below tokens left
    budget = tokens[0] + tokens[1] + 30
    first = budget // plain.line_tokens
    assert tokens[2] > 30 and first < len(facts)
    asked: list[int] = []
    tier_of(budget, plain, asked)
    assert asked == [first]
    asked = []
    tier_of(budget, dataclasses.replace(plain, fill_gaps=True), asked)
    assert asked[:2] == [first, 2 * first]
    # while every line fits, it still asks for more: three lines fit with 30 tokens left
    roomy = sum(tokens[:3]) + 30
    asked = []
    tier_of(roomy, dataclasses.replace(plain, line_tokens=roomy // 3), asked)
    assert asked[:2] == [3, 6]
