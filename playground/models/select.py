"""Pick the chat model from the settings: the spec ``BEADS_MODEL`` names (memory.model_spec), or with
none, Ollama when it is there and the offline model when it is not."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from memory.errors import ConfigurationError, MissingExtraError
from memory.extras import import_extra
from memory.model_spec import PROVIDER_EXTRAS, ModelSpec, missing_key
from memory.scripted import ScriptedChatModel
from playground.models.chatml import text_of
from playground.models.local import LocalChatModel
from playground.models.ollama import display_url, has_model, list_ollama_models, ollama_chat_model
from playground.models.settings import LocalModelName, ModelSettings

#: a hosted model's reply may take a while (a long prompt, a busy server), but not forever
HOSTED_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class ActiveModel:
    """The chat model in use, and a line saying why it was chosen (for logs and the UI).

    `backend` is the spec's provider ("local" for the offline model, "ollama", "openai", "anthropic",
    any init_chat_model provider, or "scripted"); `model_name` the model it runs."""

    backend: str
    model_name: str
    chat_model: BaseChatModel
    note: str

    @property
    def label(self) -> str:
        """The model as a spec names it ("offline:qwen2.5-coder-0.5b-instruct-q4_k_m", "openai:gpt-4o")."""
        provider = "offline" if self.backend == "local" else self.backend
        return provider if provider == self.model_name else f"{provider}:{self.model_name}"


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
    spec = settings.spec
    url = display_url(settings.ollama_base_url)
    chosen_by = (
        f"BEADS_MODEL={spec}"
        if settings.model is not None
        else f"BEADS_MODEL_BACKEND={settings.model_backend}"
    )
    if spec.provider == "scripted":
        return ActiveModel("scripted", "scripted", ScriptedChatModel(fallback=_echo), "scripted replies")
    if spec.provider == "offline":
        if spec.model:
            settings = settings.model_copy(update={"local_model": _local_model_name(spec)})
        return _local(settings, f"the offline model ({chosen_by})")
    if spec.provider not in ("auto", "ollama"):
        return ActiveModel(
            spec.provider, spec.model, hosted_chat_model(spec, settings), _hosted_note(spec, settings)
        )
    if spec.provider == "ollama":
        settings = settings.model_copy(update={"ollama_model": spec.model})
    models = list_ollama_models(settings.ollama_base_url)
    if spec.provider == "ollama":
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


def hosted_chat_model(spec: ModelSpec, settings: ModelSettings | None = None) -> BaseChatModel:
    """The chat model `spec` names on a server: openai (any OpenAI-compatible server at
    ``settings.openai_base_url``), anthropic, or any provider init_chat_model builds.

    A missing key is a :class:`memory.errors.ModelKeyMissingError`, a missing provider package a
    :class:`memory.errors.MissingExtraError` naming the extra (or the package), both before any call.
    """
    settings = settings or ModelSettings()
    if (no_key := missing_key(spec, base_url=settings.openai_base_url)) is not None:
        raise no_key
    if spec.provider in PROVIDER_EXTRAS:
        extra, module = PROVIDER_EXTRAS[spec.provider]
        import_extra(module, extra, f"the {spec.provider}: chat models")
    options: dict[str, Any] = {"temperature": settings.temperature, "timeout": HOSTED_TIMEOUT_SECONDS}
    if settings.max_tokens is not None:
        options["max_tokens"] = settings.max_tokens
    if spec.provider == "openai":
        from langchain_openai import ChatOpenAI

        if settings.openai_base_url is not None:
            # a local OpenAI-compatible server ignores the key, but the client refuses to start without one
            options["api_key"] = os.environ.get("OPENAI_API_KEY") or "unused"
            if settings.max_tokens is not None:
                # the client sends the limit as max_completion_tokens, which some servers (llama.cpp's
                # Python server among them) do not read: they get the older name too
                options["extra_body"] = {"max_tokens": settings.max_tokens}
        # the client gives up on a stream whose first chunk takes 120 s; a local server that is
        # reading a long agent prompt on a CPU, or serving the other lane's call first, takes longer
        options["stream_chunk_timeout"] = HOSTED_TIMEOUT_SECONDS
        return ChatOpenAI(model=spec.model, base_url=settings.openai_base_url, stream_usage=True, **options)
    if spec.provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model_name=spec.model, **options)
    from langchain.chat_models import init_chat_model

    try:
        model = init_chat_model(spec.model, model_provider=spec.provider, **options)
    except ImportError as exc:  # init_chat_model names the package the provider needs
        raise MissingExtraError(f"{spec}: {exc}") from exc
    except ValueError as exc:  # a provider it does not know, or its class refusing the settings
        raise ConfigurationError(f"{spec} cannot be built: {exc}") from exc
    if not isinstance(model, BaseChatModel):
        raise ConfigurationError(f"{spec} built a {type(model).__name__}, not a chat model")
    return model


def _hosted_note(spec: ModelSpec, settings: ModelSettings) -> str:
    if spec.provider == "openai" and settings.openai_base_url:
        return f"an OpenAI-compatible server at {display_url(settings.openai_base_url)}"
    return f"{spec.provider}'s API"


def _local_model_name(spec: ModelSpec) -> LocalModelName:
    names: tuple[LocalModelName, ...] = get_args(LocalModelName)
    for name in names:
        if spec.model == name:
            return name
    raise ConfigurationError(f"{spec}: the offline models are {', '.join(names)}")


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
