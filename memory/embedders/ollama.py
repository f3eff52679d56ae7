"""Embeddings from a local Ollama server, through langchain-ollama.

Every way the server can fail (not running, model not pulled, an error or a reply of the wrong shape)
becomes one :class:`EmbedderUnavailableError` whose message says what to do about it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx
from ollama import ResponseError

from memory.embedders.base import l2_normalise
from memory.errors import EmbedderUnavailableError

#: Where the Ollama client goes when neither ``base_url`` nor ``OLLAMA_HOST`` says otherwise.
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"

#: Models trained with task prefixes: (prefix for stored documents, prefix for search queries).
#: nomic-embed-text is trained on inputs that start with one of these, and its vectors are noticeably
#: worse without them. Both prefixes map into the same vector space, so the name does not change.
TASK_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_document: ", "search_query: "),
}


class OllamaEmbedder:
    """Vectors from the Ollama model ``model``, at ``base_url`` (default: ``OLLAMA_HOST`` or local).

    ``dims`` is the length the model must return; a reply of any other length raises, because the
    store's vectors for this name all have one length. Vectors are L2-normalised here, whatever the
    server did.

    For models in :data:`TASK_PREFIXES` each text gets the model's prefix. By default that is the
    document prefix, which suits both what the memory stores and fact-to-fact comparisons; pass
    ``query=True`` for an embedder that embeds search queries against those documents.
    """

    def __init__(
        self,
        model: str = "nomic-embed-text",
        base_url: str | None = None,
        dims: int = 768,
        *,
        query: bool = False,
        timeout: float | None = 60.0,
    ) -> None:
        if dims < 1:
            raise ValueError("dims must be at least 1")
        self.model = model
        self.name = f"ollama:{model}"
        self.dims = dims
        self.query = query
        self.url = _display_url(base_url)
        # Tags such as "nomic-embed-text:v1.5" use the same prefixes as the bare model name.
        prefixes = TASK_PREFIXES.get(model.split(":", 1)[0])
        self._prefix = "" if prefixes is None else prefixes[1 if query else 0]
        # Imported here: langchain-ollama pulls in most of langchain-core, seconds of import time that
        # a process using another embedder should not pay.
        from langchain_ollama import OllamaEmbeddings

        # A bounded timeout: the client's default is none at all, and a wedged server would hang the
        # agent's turn forever.
        self._client = OllamaEmbeddings(model=model, base_url=base_url, client_kwargs={"timeout": timeout})

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, from one request to the server."""
        if not texts:
            return []
        try:
            vectors = self._client.embed_documents(self._prefixed(texts))
        except Exception as e:
            translated = self._translate(e)
            if translated is None:
                raise
            raise translated from e
        return self._check(vectors, len(texts))

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`, on the async HTTP client."""
        if not texts:
            return []
        try:
            vectors = await self._client.aembed_documents(self._prefixed(texts))
        except Exception as e:
            translated = self._translate(e)
            if translated is None:
                raise
            raise translated from e
        return self._check(vectors, len(texts))

    def _prefixed(self, texts: Sequence[str]) -> list[str]:
        return [self._prefix + text for text in texts]

    def _translate(self, error: Exception) -> EmbedderUnavailableError | None:
        """The error to raise for ``error`` from the HTTP call, or None to let it propagate."""
        # The ollama client turns httpx.ConnectError into the builtin ConnectionError, but only in its
        # plain request path; the two are unrelated classes, so catch both.
        if isinstance(error, (httpx.ConnectError, ConnectionError)):
            return EmbedderUnavailableError(
                f"cannot reach Ollama at {self.url}: start it with `ollama serve`, "
                "or pass the URL of a running server as base_url (or set OLLAMA_HOST)"
            )
        if isinstance(error, ResponseError):
            if error.status_code == 404:
                return EmbedderUnavailableError(
                    f"Ollama at {self.url} does not have the model {self.model!r} "
                    f"({error.error}): run `ollama pull {self.model}`"
                )
            return EmbedderUnavailableError(
                f"Ollama at {self.url} could not embed with {self.model!r}: "
                f"{error.error} (HTTP {error.status_code})"
            )
        if isinstance(error, httpx.TimeoutException):
            return EmbedderUnavailableError(f"Ollama at {self.url} did not answer in time")
        if isinstance(error, httpx.HTTPError):
            return EmbedderUnavailableError(f"the request to Ollama at {self.url} failed: {error}")
        if isinstance(error, ValueError):
            # Malformed JSON, or JSON that is not an embed reply (pydantic's ValidationError is a
            # ValueError): something answers at that URL, but it does not speak Ollama's API.
            return EmbedderUnavailableError(
                f"the server at {self.url} did not answer like Ollama: {type(error).__name__}"
            )
        return None

    def _check(self, vectors: Sequence[Sequence[float]], expected: int) -> list[list[float]]:
        """The server's vectors, normalised, once their count and length are what was asked for."""
        if len(vectors) != expected:
            raise EmbedderUnavailableError(
                f"Ollama at {self.url} returned {len(vectors)} vectors for {expected} texts"
            )
        for vector in vectors:
            if len(vector) != self.dims:
                raise EmbedderUnavailableError(
                    f"Ollama model {self.model!r} returned {len(vector)}-dimensional vectors, "
                    f"but this embedder was configured with dims={self.dims}; pass dims={len(vector)} "
                    "(vectors of another length cannot share the store's index for this name)"
                )
        return [l2_normalise(vector) for vector in vectors]


def _display_url(base_url: str | None) -> str:
    """The server URL for messages: what the client will use, with any credentials left out."""
    raw = base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_OLLAMA_URL
    if "://" not in raw:
        raw = f"http://{raw}"
    try:
        parts = urlsplit(raw)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        # Not a URL we can take apart: show it as given, which is still the most useful thing to say.
        return raw
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"
