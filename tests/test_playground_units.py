"""The playground's small pure pieces: settings, origin checks, stream positions, the fold, the
scripted lanes' rules and the walkthrough's verdict."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import ValidationError
from starlette.datastructures import Headers

from memory.flags import KeywordMatch, PossiblyOutdated, Restates, Untrusted, texts
from playground.comparison.lanes import CORE_SYSTEM_PROMPT, STOCK_MEMORY_PROMPT, beads_prompt
from playground.events import EventRow, parse_last_event_id
from playground.render import dom_id
from playground.scripted import corrected_claim, is_question, lane_rules
from playground.security import same_origin
from playground.settings import PlaygroundSettings
from playground.turn_runner import search_results
from playground.views import TurnView, apply
from playground.walkthrough import STEPS, verdict


@pytest.mark.parametrize("chars", [0, -5, 100_001])
def test_settings_refuse_unsafe_message_limits(chars: int) -> None:
    with pytest.raises(ValidationError, match="max_message_chars"):
        PlaygroundSettings(max_message_chars=chars)


def test_settings_refuse_other_unsafe_values() -> None:
    with pytest.raises(ValidationError):
        PlaygroundSettings(workers=0)
    with pytest.raises(ValidationError):
        PlaygroundSettings(database_url="mysql://localhost/db")
    with pytest.raises(ValidationError, match="poll_seconds"):
        PlaygroundSettings(lease_seconds=2, poll_seconds=5)
    assert PlaygroundSettings(max_message_chars=10).max_body_bytes > 10 * 4


def test_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_MAX_MESSAGE_CHARS", "123")
    monkeypatch.setenv("PLAYGROUND_MODEL_BACKEND", "scripted")
    settings = PlaygroundSettings()
    assert (settings.max_message_chars, settings.model_backend) == (123, "scripted")


def test_the_playground_chooses_the_15b_and_its_status_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from memory.embedders import FakeEmbedder
    from playground.runtime import Runtime
    from playground.startup import select_model

    monkeypatch.delenv("BEADS_LOCAL_MODEL", raising=False)
    monkeypatch.setenv("PLAYGROUND_MODEL_BACKEND", "local")
    monkeypatch.setenv("PLAYGROUND_LOCAL_MODEL", "qwen2.5-coder-1.5b")
    monkeypatch.setattr("playground.models.engine.weights_ready", lambda *_: True)  # as if joined
    settings = PlaygroundSettings()
    assert settings.local_model == "qwen2.5-coder-1.5b"
    active = select_model(settings)
    assert active.model_name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    unused: Any = None  # status_lines reads only the settings, the model and the embedder
    rt = Runtime(settings, unused, unused, unused, unused, active, FakeEmbedder(), "ready", [], unused)
    label, line = rt.status_lines[0]
    assert label == "Model" and line.startswith("offline:qwen2.5-coder-1.5b-instruct-q4_k_m, in both lanes: ")
    # unset, the library's setting (and its default) decides
    monkeypatch.delenv("PLAYGROUND_LOCAL_MODEL")
    assert select_model(PlaygroundSettings()).model_name == "qwen2.5-coder-0.5b-instruct-q4_k_m"


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000"}, True),
        ({"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8001"}, False),
        ({"host": "127.0.0.1:8000", "origin": "null", "referer": "http://127.0.0.1:8000/chats/x"}, True),
        ({"host": "127.0.0.1:8000", "referer": "http://evil.example/"}, False),
        ({"host": "127.0.0.1:8000", "origin": "javascript://127.0.0.1:8000"}, False),
        ({"host": "127.0.0.1:8000"}, False),
    ],
)
def test_same_origin(headers: dict[str, str], allowed: bool) -> None:
    assert same_origin(Headers(headers)) is allowed


def test_stream_position_prefers_the_header_then_after() -> None:
    assert parse_last_event_id("7", 3) == 7
    assert parse_last_event_id(None, 3) == 3
    assert parse_last_event_id("garbage", 3) == 3
    assert parse_last_event_id("-4", None) == 0
    assert parse_last_event_id(None, None) == 0


def test_dom_ids_keep_only_safe_characters() -> None:
    assert dom_id('call_1"><script>') == "call_1___script_"


def event(seq: int, lane: str, kind: str, **payload: object) -> EventRow:
    return EventRow(uuid.UUID(int=1), seq, uuid.UUID(int=2), seq, lane, kind, dict(payload))


def test_the_fold_resets_on_resume_and_keys_tool_calls_by_id() -> None:
    turn = TurnView(uuid.UUID(int=2), uuid.UUID(int=1), 1, "")
    for e in [
        event(1, "turn", "turn", text="hi", turn_no=1),
        event(2, "stock", "start", attempt=1),
        event(3, "stock", "tool_call", id="c1", name="search_memory", args={"query": "hi"}),
        event(4, "stock", "token", text="Half a rep"),
        event(5, "stock", "resume", text=""),
        event(6, "stock", "tool_result", id="c1", name="search_memory", content="no items"),
        event(7, "stock", "token", text="Hello"),
        event(8, "stock", "token", text=" there."),
    ]:
        apply(turn, e)
    lane = turn.lanes["stock"]
    assert (turn.user_text, lane.text, lane.status, lane.resumed) == ("hi", "Hello there.", "running", True)
    assert list(lane.tool_calls) == ["c1"] and lane.tool_calls["c1"].result == "no items"
    apply(turn, event(9, "stock", "done", text="Hello there!", metrics={"model_calls": 2}))
    apply(turn, event(10, "turn", "turn_done"))
    assert (lane.text, lane.status, turn.status, turn.last_event_no) == ("Hello there!", "done", "done", 10)


def test_search_results_read_as_scores_and_contents() -> None:
    raw = json.dumps(
        [{"value": {"content": "Budget is $100k."}, "score": 0.71234}, {"value": {"content": "x"}}]
    )
    assert search_results(raw) == "2 items: [0.712] Budget is $100k. | x"
    assert search_results("[]") == "no items"
    assert search_results("not json") == "not json"


def test_questions_and_corrections() -> None:
    assert is_question("What is our budget per year?") and is_question("which one fits")
    assert not is_question("Our budget is $100k per year.")
    assert corrected_claim("Correction: our budget is $120k per year.") == "Our budget is $120k per year."


def test_scripted_lanes_use_their_memory_tools() -> None:
    stock = SystemMessage(f"{CORE_SYSTEM_PROMPT}\n\n{STOCK_MEMORY_PROMPT}")
    statement = lane_rules([stock, HumanMessage("Our budget is $100k per year.")])
    assert isinstance(statement, AIMessage) and statement.tool_calls[0]["name"] == "manage_memory"
    question = lane_rules([stock, HumanMessage("What is our budget?")])
    assert isinstance(question, AIMessage) and question.tool_calls[0]["name"] == "search_memory"
    found = json.dumps([{"value": {"content": "Our budget is $100k per year."}, "score": 0.8}])
    answer = lane_rules(
        [
            stock,
            HumanMessage("What is our budget?"),
            question,
            ToolMessage(found, tool_call_id="c", name="search_memory"),
        ]
    )
    assert answer == "From memory: Our budget is $100k per year."

    memory = "## Memory\nFacts recalled (current values; ids in brackets):\n- [0123abcd] Our budget is $100k per year."
    ours = SystemMessage(f"{beads_prompt()}\n\n{memory}")
    assert (
        lane_rules([ours, HumanMessage("What is our budget?")])
        == "From memory: Our budget is $100k per year."
    )
    assert lane_rules([ours, HumanMessage("What's a good name for a cat?")]).startswith("Nothing relevant")
    correction = lane_rules([ours, HumanMessage("Correction: our budget is $120k per year.")])
    assert isinstance(correction, AIMessage)
    assert correction.tool_calls[0]["args"] == {
        "fact": "Our budget is $120k per year.",
        "supersedes": "0123abcd",
    }


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("From memory: Our budget is $120k per year.", "corrected"),
        ("Your budget is $120,000 a year.", "corrected"),
        ("From memory: Our budget is $100k per year.", "stale"),
        ("Budget: $120k per year. Budget: $100k per year.", "both"),
        ("I do not know. You spent $1100k.", "neither"),
        ('{"name": "our_budget", "arguments": {"budget": "120k per year"}}', "no_answer"),
        ("", "no_answer"),
    ],
)
def test_the_verdict_reads_the_values(reply: str, expected: str) -> None:
    assert verdict(reply) == expected
    assert len(STEPS) == 4


def test_the_offline_model_is_not_offered_the_memory_tools_unless_asked() -> None:
    auto = PlaygroundSettings()
    assert not auto.offers_memory_tools("local")
    assert auto.offers_memory_tools("ollama") and auto.offers_memory_tools("scripted")
    assert PlaygroundSettings(memory_tools="on").offers_memory_tools("local")
    assert not PlaygroundSettings(memory_tools="off").offers_memory_tools("ollama")
    # without the tools the prompt asks for an answer only, and names no tool
    assert "remember_fact" in beads_prompt(True) and "remember_fact" not in beads_prompt(False)


def test_a_turn_whose_memory_held_nothing_relevant_says_the_model_was_told_so() -> None:
    from playground.render import make_templates, render_event
    from playground.turn_runner import injection

    templates = make_templates()
    nothing = event(
        2, "beads", "injection", **injection({"query": "cats?", "not_in_memory": True, "tokens": 14})
    )
    html = render_event(templates, nothing)
    assert "Nothing relevant in memory: the model was told so." in html
    found = event(
        2, "beads", "injection", **injection({"query": "budget?", "not_in_memory": False, "tokens": 14})
    )
    assert "Nothing relevant in memory" not in render_event(templates, found)


def test_the_injected_facts_show_the_flags_a_reader_needs_by_their_kind() -> None:
    from playground.render import make_templates, render_event
    from playground.turn_runner import injection

    flags = (
        PossiblyOutdated("522a8be4"),
        Untrusted(conflicts_with="522a8be4"),
        KeywordMatch(),
        Restates("04fb0755"),
    )
    fact = {"id": "x", "short_id": "ba528817", "text": "Our budget is $100k.", "distance": 0.2}
    fact |= {"score": 0.8, "kind": "user_input", "source": "tool_result", "agent_id": "a"}
    fact |= {"demoted": False, "resolved_from": None, "passage": None}
    fact |= {"flags": texts(flags), "marks": [{"kind": f.kind, "text": f.text} for f in flags]}
    shown = event(2, "beads", "injection", **injection({"query": "budget?", "tokens": 14, "facts": [fact]}))
    html = render_event(make_templates(), shown)
    assert 'class="flag flag-resolved">possibly outdated: 522a8be4 is newer</span>' in html
    assert 'class="flag flag-untrusted">untrusted: conflicts with the user&#39;s fact 522a8be4</span>' in html
    assert "keyword match" not in html and "restates" not in html
    # an injection recorded before flags had kinds shows the fact, without its flags
    del fact["marks"]
    old = event(2, "beads", "injection", **injection({"query": "budget?", "tokens": 14, "facts": [fact]}))
    assert "Our budget is $100k." in render_event(make_templates(), old)
