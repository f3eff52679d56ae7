"""One model spec everywhere a model is chosen (memory.model_spec), and what the playground builds
from it: nothing is sent to any server here."""

from __future__ import annotations

import sys

import pytest

from memory.errors import ConfigurationError, MissingExtraError, ModelKeyMissingError
from memory.model_spec import ModelSpec, missing_key, parse_model_spec
from playground.models.select import hosted_chat_model, select_chat_model
from playground.models.settings import ModelSettings
from playground.settings import PlaygroundSettings


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("offline", ModelSpec("offline")),
        ("local", ModelSpec("offline")),
        ("offline:qwen2.5-coder-1.5b", ModelSpec("offline", "qwen2.5-coder-1.5b")),
        ("scripted", ModelSpec("scripted")),
        ("auto", ModelSpec("auto")),
        ("ollama:qwen3:8b", ModelSpec("ollama", "qwen3:8b")),
        ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
        (" Anthropic:claude-sonnet-4-5 ", ModelSpec("anthropic", "claude-sonnet-4-5")),
        ("groq:llama-3.3-70b-versatile", ModelSpec("groq", "llama-3.3-70b-versatile")),
    ],
)
def test_a_spec_names_a_provider_and_a_model(spec: str, parsed: ModelSpec) -> None:
    assert parse_model_spec(spec) == parsed
    assert parse_model_spec(str(parsed)) == parsed  # what a spec prints reads back the same


@pytest.mark.parametrize("spec", ["", "gpt-4", "openai:", "ollama", ":gpt-4", "scripted:x", "open ai:gpt"])
def test_a_wrong_spec_says_what_a_spec_looks_like(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="openai:<model>"):
        parse_model_spec(spec)


def test_a_missing_key_is_named_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    error = missing_key(ModelSpec("openai", "gpt-4o"))
    assert error is not None and "OPENAI_API_KEY" in str(error) and "OPENAI_BASE_URL" in str(error)
    # an OpenAI-compatible server of one's own needs no OpenAI key
    assert missing_key(ModelSpec("openai", "x"), base_url="http://127.0.0.1:8080/v1") is None
    with pytest.raises(ModelKeyMissingError, match="ANTHROPIC_API_KEY"):
        select_chat_model(ModelSettings(model="anthropic:claude-sonnet-4-5"))
    with pytest.raises(ModelKeyMissingError, match="OPENAI_API_KEY"):
        select_chat_model(ModelSettings(model="openai:gpt-4o-mini"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    active = select_chat_model(ModelSettings(model="anthropic:claude-sonnet-4-5"))
    assert (active.backend, active.model_name, active.label) == (
        "anthropic",
        "claude-sonnet-4-5",
        "anthropic:claude-sonnet-4-5",
    )


def test_openai_at_a_base_url_is_any_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    settings = ModelSettings(model="openai:qwen2.5-coder")
    assert settings.openai_base_url == "http://127.0.0.1:9/v1"
    active = select_chat_model(settings)
    assert active.label == "openai:qwen2.5-coder"
    assert "OpenAI-compatible server at http://127.0.0.1:9/v1" in active.note
    assert getattr(active.chat_model, "openai_api_base", None) == "http://127.0.0.1:9/v1"
    assert getattr(active.chat_model, "model_name", None) == "qwen2.5-coder"


def test_a_missing_provider_package_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, "langchain_openai", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"'openai' extra"):
        hosted_chat_model(ModelSpec("openai", "gpt-4o"), ModelSettings())


def test_an_unknown_provider_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="no-such-provider:model-x"):
        hosted_chat_model(ModelSpec("no-such-provider", "model-x"))


def test_the_spec_wins_over_the_older_settings_and_they_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEADS_MODEL", raising=False)
    assert ModelSettings(model_backend="ollama", ollama_model="qwen3:8b").spec == ModelSpec(
        "ollama", "qwen3:8b"
    )
    assert ModelSettings(model_backend="local").spec == ModelSpec("offline", "qwen2.5-coder-0.5b")
    assert ModelSettings(model="scripted", model_backend="local").spec == ModelSpec("scripted")
    assert select_chat_model(ModelSettings(model="scripted")).label == "scripted"
    monkeypatch.setenv("PLAYGROUND_MODEL", "local")
    assert PlaygroundSettings().model == "offline"
    monkeypatch.setenv("PLAYGROUND_MODEL", "gpt-4")
    with pytest.raises(ConfigurationError):
        PlaygroundSettings()


def test_an_offline_spec_names_one_of_the_offline_models() -> None:
    with pytest.raises(ConfigurationError, match=r"qwen2\.5-coder-0\.5b"):
        select_chat_model(ModelSettings(model="offline:llama-70b"))
