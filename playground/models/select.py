"""Pick the chat model from the settings: Ollama when it is there, the offline model when it is not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from memory.errors import MissingExtraError
from memory.scripted import ScriptedChatModel
from playground.models.chatml import text_of
from playground.models.local import LocalChatModel
from playground.models.ollama import display_url, has_model, list_ollama_models, ollama_chat_model
from playground.models.settings import Backend, ModelSettings


@dataclass(frozen=True)
class ActiveModel:
    """The chat model in use, and a line saying why it was chosen (for logs and the UI)."""

    backend: Backend
    model_name: str
    chat_model: BaseChatModel
    note: str


def select_chat_model(settings: ModelSettings | None = None) -> ActiveModel:
    """The chat model ``settings.model_backend`` asks for.

    ``auto`` uses Ollama when a server answers at ``ollama_base_url`` and has ``ollama_model``
    pulled, and the offline model otherwise; ``ollama`` and ``local`` force one; ``scripted`` is the
    deterministic double. Nothing is loaded or sent here: a forced Ollama that is down fails at the
    first call, with a message that says so. Choosing the offline model without its extra (``local``,
    or ``local15`` for ``local_model="qwen2.5-coder-1.5b"``) raises
    :class:`memory.errors.MissingExtraError` here, saying why it was chosen.
    """
    settings = settings or ModelSettings()
    url = display_url(settings.ollama_base_url)
    backend = settings.model_backend
    if backend == "scripted":
        return ActiveModel("scripted", "scripted", ScriptedChatModel(fallback=_echo), "scripted replies")
    if backend == "local":
        return _local(settings, "the offline model (BEADS_MODEL_BACKEND=local)")
    models = list_ollama_models(settings.ollama_base_url)
    if backend == "ollama":
        if models is None:
            note = f"Ollama not reachable at {url}: calls will fail until it is started (`ollama serve`)"
        elif not has_model(models, settings.ollama_model):
            note = f"Ollama at {url} does not have {settings.ollama_model}: run `ollama pull {settings.ollama_model}`"
        else:
            note = f"Ollama at {url}"
        return _ollama(settings, note)
    if models is None:
        return _local(settings, f"Ollama not reachable at {url}: using the offline model")
    if not has_model(models, settings.ollama_model):
        return _local(
            settings,
            f"Ollama at {url} does not have {settings.ollama_model} "
            f"(`ollama pull {settings.ollama_model}`): using the offline model",
        )
    return _ollama(settings, f"Ollama answered at {url}")


def _ollama(settings: ModelSettings, note: str) -> ActiveModel:
    return ActiveModel("ollama", settings.ollama_model, ollama_chat_model(settings), note)


def _local(settings: ModelSettings, note: str) -> ActiveModel:
    try:
        model = LocalChatModel(settings=settings)
    except MissingExtraError as exc:
        raise MissingExtraError(f"{note}, but {exc}") from exc
    return ActiveModel("local", model.model_name, model, note)


def _echo(messages: list[BaseMessage]) -> Any:
    # Enough for the playground to show a conversation moving without any model at all.
    last = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    return f"(scripted) You said: {text_of(last)}" if last is not None else "(scripted) Hello."
