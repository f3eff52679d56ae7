"""Chat through a local Ollama server, with failures that say what to do about them.

:class:`OllamaChatModel` is ChatOllama with one change: every call path (invoke, stream, ainvoke,
astream, and so through ``create_agent``) raises :class:`ModelUnavailableError` with a clear message
when the server is down or the model is not pulled, instead of the raw httpx/ollama errors, whose
types differ by call path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_ollama import ChatOllama
from ollama import ResponseError

from memory.errors import ModelUnavailableError
from playground.models.settings import ModelSettings, normalise_ollama_url

#: Connecting is quick or it is not happening; reading waits for a model that may need a minute to load
#: and longer to read a long prompt on a CPU, but not forever (the client's default).
CHAT_TIMEOUT = httpx.Timeout(600.0, connect=5.0)


def explain_ollama_error(exc: BaseException, model: str, base_url: str) -> ModelUnavailableError | None:
    """The error to raise instead of ``exc`` from a call to Ollama, or None to let ``exc`` propagate."""
    # The ollama client turns httpx.ConnectError into the builtin ConnectionError, but only on some
    # call paths; the two are unrelated classes, so check both.
    if isinstance(exc, (httpx.ConnectError, ConnectionError)):
        return ModelUnavailableError(
            f"Ollama is not reachable at {base_url}: start it with `ollama serve`, point "
            "BEADS_OLLAMA_BASE_URL (or OLLAMA_HOST) at a running server, "
            "or set BEADS_MODEL_BACKEND=local to use the offline model"
        )
    if isinstance(exc, ResponseError):
        if exc.status_code == 404:
            return ModelUnavailableError(
                f"model {model} is not pulled on the Ollama at {base_url} ({exc.error}): "
                f"run `ollama pull {model}`, or set BEADS_OLLAMA_MODEL to a model you have"
            )
        return ModelUnavailableError(
            f"Ollama at {base_url} could not chat with {model!r}: {exc.error} (HTTP {exc.status_code})"
        )
    if isinstance(exc, httpx.TimeoutException):
        return ModelUnavailableError(f"Ollama at {base_url} did not answer in time")
    if isinstance(exc, httpx.HTTPError):
        return ModelUnavailableError(f"the request to Ollama at {base_url} failed: {exc}")
    return None


class OllamaChatModel(ChatOllama):
    """ChatOllama whose connection and missing-model errors are :class:`ModelUnavailableError`."""

    @contextlib.contextmanager
    def _explaining(self) -> Iterator[None]:
        """Re-raise a connection or missing-model error as ModelUnavailableError (any call path)."""
        try:
            yield
        except Exception as e:
            if (explained := explain_ollama_error(e, self.model, display_url(self.base_url))) is None:
                raise
            raise explained from e

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._explaining():
            return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._explaining():
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        with self._explaining():
            yield from super()._stream(messages, stop, run_manager, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        with self._explaining():
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                yield chunk


def ollama_chat_model(settings: ModelSettings | None = None) -> OllamaChatModel:
    """The configured Ollama model. Nothing is sent to the server until the first call."""
    settings = settings or ModelSettings()
    return OllamaChatModel(
        model=settings.ollama_model,
        base_url=settings.ollama_base_url,
        # Always explicit: without it Ollama uses its own default (2048 on many installs) and drops
        # the start of longer prompts without an error, which for an agent means its instructions.
        num_ctx=settings.num_ctx,
        reasoning=settings.reasoning,
        temperature=settings.temperature,
        validate_model_on_init=False,
        client_kwargs={"timeout": CHAT_TIMEOUT},
    )


def display_url(base_url: str | None) -> str:
    """The server URL for messages, without any credentials it carries."""
    url = normalise_ollama_url(base_url or os.environ.get("OLLAMA_HOST", ""))
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def list_ollama_models(base_url: str, timeout: float = 1.0) -> list[str] | None:
    """The models pulled on the Ollama server at ``base_url``, or None when no Ollama answers there."""
    try:
        response = httpx.get(f"{base_url.rstrip('/')}/api/tags", timeout=timeout)
    except (httpx.HTTPError, httpx.InvalidURL):
        return None
    # Something else answering on that port (a web server, say) is not Ollama.
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("models"), list):
        return None
    return [str(m.get("name") or m.get("model")) for m in body["models"] if isinstance(m, dict)]


def probe_ollama(base_url: str, timeout: float = 1.0) -> bool:
    """Whether an Ollama server answers at ``base_url`` (GET /api/tags)."""
    return list_ollama_models(base_url, timeout) is not None


def has_model(models: list[str], model: str) -> bool:
    """Whether ``model`` is among ``models`` as /api/tags lists them (``x`` means ``x:latest``)."""

    def full(name: str) -> str:
        return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"

    return full(model) in {full(m) for m in models}
