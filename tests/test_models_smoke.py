"""The model smoke gate: what passes, what fails, and the exit code."""

from __future__ import annotations

import pytest

from memory.scripted import ScriptedChatModel, calls, tool_call
from playground.comparison import toolcall_bench
from playground.models import smoke
from playground.models.select import ActiveModel
from playground.models.settings import ModelSettings


def scripted(*replies: object) -> ActiveModel:
    return ActiveModel("local", "scripted", ScriptedChatModel(replies=list(replies)), "test")


def test_a_capable_model_passes_every_check() -> None:
    active = scripted(
        calls(tool_call("get_weather", city="Paris")),
        "So that they remember something later.",
        "It is 14°C with light rain in Paris.",
        '```json\n{"name": "Maria Lopez", "city": "Lisbon", "job": "nurse"}\n```',
    )
    results = smoke.run_checks(active, ModelSettings())
    assert [(r.name, r.passed) for r in results] == [
        ("tool call", True),
        ("no needless call", True),
        ("answer from a tool", True),
        ("extraction", True),
        ("embedding", True),
    ]
    assert results[4].reason == "minilm-l6-int8: 384 dimensions"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("It is sunny in Paris.", "no tool call; the reply was 'It is sunny in Paris.'"),
        (
            calls(tool_call("get_weather", city="Rome")),
            "wrong tool call: [('get_weather', {'city': 'Rome'})]",
        ),
    ],
)
def test_a_model_that_does_not_call_the_tool_fails(reply: object, reason: str) -> None:
    passed, why = smoke.check_tool_call(scripted(reply).chat_model)
    assert not passed
    assert why == reason


@pytest.mark.parametrize(
    ("reply", "passed", "reason"),
    [
        ('{"name": "M", "city": "L", "job": "n"}', True, '{"name": "M", "city": "L", "job": "n"}'),
        (
            'Here you go: {"name": "M", "city": "L", "job": "n"}',
            True,
            '{"name": "M", "city": "L", "job": "n"} (plus 13 characters of other text)',
        ),
        ('{"name": "M", "city": "L"}', False, 'missing keys [\'job\']: {"name": "M", "city": "L"}'),
        ('{"name": "M", "city": ', False, "the JSON does not parse"),
        ("Maria is a nurse.", False, "no JSON object"),
    ],
)
def test_extraction(reply: str, passed: bool, reason: str) -> None:
    result = smoke.check_extraction(scripted(reply).chat_model)
    assert result[0] is passed
    assert result[1].startswith(reason)


def test_main_reports_and_fails_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        smoke,
        "select_chat_model",
        lambda settings: scripted("no tools here", "To remember something.", "It is what it is.", "{}"),
    )
    assert smoke.main(["--backend", "local"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  tool call" in out
    assert "PASS  no needless call" in out
    assert "FAIL  answer from a tool" in out  # the reply does not use the result
    assert "FAIL  extraction" in out
    assert "PASS  embedding" in out
    assert out.splitlines()[-1] == (
        "the playground's lanes run without delegation and web search (a tool-call check failed)"
    )


def test_the_tool_call_bench_counts_valid_calls_stored_memories_and_free_text() -> None:
    memory_id = "3f2b8c1e-9a4d-4e7f-b6c5-1d2e3f4a5b6c"
    model = ScriptedChatModel(
        replies=[
            "(warm-up)",
            calls(tool_call("manage_memory", content="Budget: 1.2M")),
            calls(tool_call("manage_memory", content="x", action="update", id="budget")),
            calls(tool_call("manage_memory", content="x", action="create", id=memory_id)),
            calls(tool_call("manage_memory", action="delete", id=memory_id)),
            calls(tool_call("our_budget", budget="1200000")),
            calls(tool_call("search_memory", query="budget"), tool_call("web_search", query="rates")),
            '{"name": "our_budget", "arguments": {}}',
            "Fine, thanks.",
        ]
    )
    replies = toolcall_bench.run_lane({None: model}, "stock", list("abcdefgh"))
    assert model.tool_history[0] == ["manage_memory", "search_memory", "web_search", "delegate_research"]
    summary = toolcall_bench.summarise(replies)
    assert {k: v for k, v in summary.items() if not k.startswith("seconds")} == {
        "replies": 8,
        "calls": 7,
        "valid": 5,  # the id "budget" is not a UUID; our_budget is no tool
        "unknown tool": 1,
        "free text": 2,
        "call-like text": 1,
        "stored": 1,  # LangMem refuses an id on create, and a delete stores nothing
        "manage_memory valid": 3,
    }
    assert replies[1].calls[0]["why"].startswith("id: Input should be a valid UUID")
    assert "cannot provide a MEMORY ID" in replies[2].calls[0]["why"]
    assert replies[0].calls[0]["why"].startswith("created memory ")
    assert (replies[3].calls[0]["stored"], replies[3].calls[0]["why"]) == (
        False,
        f"Deleted memory {memory_id}",
    )


def test_the_beads_lane_is_measured_with_its_own_tools() -> None:
    model = ScriptedChatModel(replies=["(warm-up)", calls(tool_call("remember_fact", fact="Budget is 1.2M"))])
    [reply] = toolcall_bench.run_lane({None: model}, "beads", ["Our budget is 1.2M."])
    assert model.tool_history[0] == [
        "remember_fact",
        "recall_from_subagents",
        "pin_fact",
        "web_search",
        "delegate_research",
    ]
    assert reply.calls[0]["valid"]
    assert "remember_fact" in str(model.prompts[1][0].content)


def test_the_bench_interleaves_the_settings_it_compares() -> None:
    off = ScriptedChatModel(replies=["(warm-up)", "a", "b"])
    on = ScriptedChatModel(replies=["A", "B"])
    replies = toolcall_bench.run_lane({False: off, True: on}, "stock", ["one", "two"])
    assert [(r.prompt, r.grammar, r.content) for r in replies] == [
        (0, False, "a"),
        (0, True, "A"),
        (1, True, "B"),
        (1, False, "b"),
    ]
