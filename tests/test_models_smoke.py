"""The model smoke gate: what passes, what fails, and the exit code."""

from __future__ import annotations

import pytest

from memory.models import smoke
from memory.models.scripted import ScriptedChatModel, calls, tool_call
from memory.models.select import ActiveModel
from memory.models.settings import ModelSettings


def scripted(*replies: object) -> ActiveModel:
    return ActiveModel("local", "scripted", ScriptedChatModel(replies=list(replies)), "test")


def test_a_capable_model_passes_every_check() -> None:
    active = scripted(
        calls(tool_call("get_weather", city="Paris")),
        '```json\n{"name": "Maria Lopez", "city": "Lisbon", "job": "nurse"}\n```',
    )
    results = smoke.run_checks(active, ModelSettings())
    assert [(r.name, r.passed) for r in results] == [
        ("tool call", True),
        ("extraction", True),
        ("embedding", True),
    ]
    assert results[2].reason == "minilm-l6-int8: 384 dimensions"


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
    monkeypatch.setattr(smoke, "select_chat_model", lambda settings: scripted("no tools here", "{}"))
    assert smoke.main(["--backend", "local"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  tool call" in out
    assert "FAIL  extraction" in out
    assert "PASS  embedding" in out
