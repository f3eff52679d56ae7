"""The assembler as a harness arm, the pin policy, and conversations with tool output, on real Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from eval_samples import FILLER, write_beam, write_locomo

from bench.eval.assembled import PINNED_TITLE, standing_rules
from bench.eval.conversation import Conversation, Dataset, Question, Session, Turn
from bench.eval.loaders import load_beam, load_locomo
from bench.eval.metrics import window_metrics
from bench.eval.runner import Stores, make_arm, open_stores
from bench.eval.tokens import count_tokens
from bench.eval.toolcalls import TOOL_NAME, with_tool_calls
from bench.eval.window import ConversationView, asked_at
from memory.embedders import FakeEmbedder
from memory.model import Fact, Kind, Source, Status

pytestmark = pytest.mark.bench


ASSEMBLED = ("assembled", "assembled_pinned", "assembled_noclear")


@pytest.fixture
def stores(db_url: str) -> Iterator[Stores]:
    with open_stores(db_url, FakeEmbedder(256)) as s:
        yield s


def both_samples(tmp_path: Path) -> Dataset:
    locomo, beam = load_locomo(write_locomo(tmp_path)), load_beam(write_beam(tmp_path))
    return Dataset("mixed", "sample", [*locomo.conversations, *beam.conversations])


def test_the_assembled_arms_stay_within_budget(stores: Stores, tmp_path: Path) -> None:
    dataset = with_tool_calls(both_samples(tmp_path), every=3, tokens=60)
    for conversation in dataset.conversations:
        stores.ingestor.ingest(conversation)
        view = ConversationView(conversation)
        arms = {name: make_arm(name, stores) for name in ASSEMBLED}
        for question in conversation.questions:
            for budget in (40, 90, 200, 1200):
                for name, arm in arms.items():
                    window = arm.window(view, question, budget)
                    assert window.tokens == count_tokens(window.text) <= budget, (name, budget)
                    assert len({i.priority for i in window.items}) == len(window.items)


def test_retrieved_facts_keep_their_share_of_a_tight_context(stores: Stores, tmp_path: Path) -> None:
    [conversation] = load_locomo(write_locomo(tmp_path)).conversations
    stores.ingestor.ingest(conversation)
    cat = next(q for q in conversation.questions if q.question == "What is the name of Ana's cat?")
    view = ConversationView(conversation)
    window = make_arm("assembled", stores).window(view, cat, 150)
    # the cat is in the first turn, far outside 150 tokens of transcript: only retrieval reaches it
    assert window_metrics(window, cat)["hit_any"]
    carved = [i for i in window.items if i.turn_id == "D1:1"]
    assert carved and carved[0].fact_id is not None
    # and the newest turns still fill the rest of the budget, whole
    newest = conversation.turns[-1]
    assert newest.text in window.text and "…" not in window.text


def day(n: int) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=n)


def ruled_conversation() -> Conversation:
    said = [
        "Always include version numbers when I list libraries.",
        "I prefer short answers with one example.",
        "My cousin plays the oboe in an orchestra.",
        *FILLER * 4,
        "Never suggest paid services.",
    ]
    turns = tuple(Turn(f"t{i}", f"s{i // 6}", "user", "Ana", text, day(i)) for i, text in enumerate(said))
    sessions = tuple(
        Session(f"s{k}", tuple(t for t in turns if t.session_id == f"s{k}"))
        for k in range(len(said) // 6 + 1)
    )
    question = Question(
        "q1", "ruled", "preference", "Which libraries should I use for plotting?", "-", ("t0",)
    )
    return Conversation("ruled", "handmade", sessions, (question,))


def test_pinned_rules_reach_every_window_and_only_once_said(stores: Stores) -> None:
    conversation = ruled_conversation()
    stores.ingestor.ingest(conversation)
    [question] = conversation.questions
    full = ConversationView(conversation)
    arm = make_arm("assembled_pinned", stores)
    window = arm.window(full, question, 600)  # a pinned tier of 100 tokens
    pins = [i for i in window.items if i.fact_id is not None and i.turn_id in ("t0", "t1", t_last(full))]
    assert {i.turn_id for i in pins} >= {"t0", "t1", t_last(full)}
    assert PINNED_TITLE in window.text and "oboe" not in window.text.split(PINNED_TITLE)[1].split("\n\n")[0]
    assert window_metrics(window, question)["hit_any"]
    # pinned facts are not spent on again by retrieval: each fact appears once
    fact_ids = [i.fact_id for i in window.items if i.fact_id]
    assert len(fact_ids) == len(set(fact_ids))
    # asked before the last rule was said, it cannot have been pinned
    early = asked_at(full, question, "evidence")
    assert t_last(full) in early.hidden
    assert t_last(full) not in {i.turn_id for i in arm.window(early, question, 600).items}
    # the unpinned arm spends nothing on pins
    assert PINNED_TITLE not in make_arm("assembled", stores).window(full, question, 600).text


def t_last(view: ConversationView) -> str:
    return view.conversation.turns[-1].id


def test_the_pin_policy_takes_standing_rules_and_preferences_only() -> None:
    user = Turn("t", "s", "user", "Ana", "", None)
    tool = Turn("r", "s", "tool", TOOL_NAME, "", None)

    def pins(body: str, turn: Turn = user) -> bool:
        now = datetime.now(UTC)
        fact = Fact(
            uuid.uuid4(), "s", uuid.uuid4(), Kind.USER_INPUT, Status.ACTIVE, Source.PASSIVE_CAPTURE,
            "agent", body, uuid.uuid4(), now, None, now,
        )  # fmt: skip
        return standing_rules(fact, turn)

    assert pins("Always include error status codes in responses.")
    assert pins("Please never use tabs.")
    assert pins("From now on answer in French.")
    assert pins("I prefer detailed proofs with diagrams.")
    assert pins("I'd rather keep dependencies minimal.")
    assert not pins("I always forget my keys on Mondays.")
    assert not pins("My sister breeds parrots in Lisbon.")
    assert not pins("Always include error status codes.", tool)


def test_tool_calls_are_inserted_deterministically_and_evidence_is_untouched(tmp_path: Path) -> None:
    dataset = both_samples(tmp_path)
    first = with_tool_calls(dataset, every=3, tokens=40)
    again = with_tool_calls(dataset, every=3, tokens=40)
    assert first.conversations == again.conversations
    assert first.name == "mixed-tools" and "tool-calls-every-3" in first.source
    for before, after in zip(dataset.conversations, first.conversations, strict=True):
        original = [t for t in after.turns if not t.id.endswith(("#call", "#result"))]
        assert original == list(before.turns)
        assert after.questions == before.questions
        results = [t for t in after.turns if t.role == "tool"]
        assert len(results) == len(before.turns) // 3
        for result in results:
            i = after.turns.index(result)
            call = after.turns[i - 1]
            assert (
                call.calls_tool
                and call.role == "assistant"
                and call.id == result.id.replace("#result", "#call")
            )
            assert result.speaker == TOOL_NAME and count_tokens(result.text) >= 30
    # the output is the other conversation's text, read in order
    beam = dataset.conversations[1]
    first_result = next(t for t in first.conversations[0].turns if t.role == "tool")
    assert first_result.text.startswith(beam.turns[0].text.strip())
    with pytest.raises(ValueError):
        with_tool_calls(Dataset("one", "x", dataset.conversations[:1]))


def test_tool_output_is_captured_as_untrusted_facts_and_cleared_first(stores: Stores, tmp_path: Path) -> None:
    dataset = with_tool_calls(both_samples(tmp_path), every=2, tokens=80)
    conversation = dataset.conversations[0]
    stores.ingestor.ingest(conversation)
    facts = stores.facts.audit.facts_in_namespace(stores.ingestor.root(conversation.id).id)
    from_tools = {f.message_id for f in facts if f.source is Source.TOOL_RESULT}
    tool_turns = {t.id: t.text for t in conversation.turns if t.role == "tool"}
    # every result is stored; one said again word for word (the sample's donor text comes round
    # again) is the fact its first telling wrote
    assert from_tools <= set(tool_turns)
    assert {tool_turns[i] for i in from_tools} == set(tool_turns.values())
    assert not any(f.message_id and f.message_id.endswith("#call") for f in facts)

    view = ConversationView(conversation)
    question = conversation.questions[0]
    budget = 1200  # the window reaches past the last 10 messages, where tool output counts as old
    cleared = make_arm("assembled", stores).window(view, question, budget)
    kept = make_arm("assembled_noclear", stores).window(view, question, budget)
    assert "output cleared from this view" in cleared.text
    assert "output cleared from this view" not in kept.text
    turns_shown = [
        {i.turn_id for i in w.items if i.fact_id is None and not i.turn_id.endswith("#result")}
        for w in (cleared, kept)
    ]
    assert len(turns_shown[0]) > len(turns_shown[1])  # the room tool output took holds older turns
    assert cleared.tokens <= budget and kept.tokens <= budget
