"""An in-process LRU in front of any embedder.

Agents embed the same strings over and over (the facts they just wrote, the same query each turn),
and a model run or an HTTP round trip per repeat is wasted time. The cache is keyed by the sha256 of
the text, so a long text costs 32 bytes of key rather than its whole length.

Like every embedder, a cached one must never be called inside a database transaction: a miss still
runs the model or calls the server. Callers embed first, then write.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from memory.embedders.base import Embedder, QueryEmbedder
from memory.errors import EmbedderUnavailableError

#: Put before a query's UTF-8 bytes when its key is hashed, so a query vector never answers for the
#: same text embedded for storage. The byte 0xff occurs in no UTF-8 text, so no stored text's bytes
#: can begin with it.
_QUERY_SALT = b"\xffquery"


@dataclass(frozen=True, slots=True)
class CacheStats:
    """A snapshot of a cache's counters."""

    hits: int
    misses: int
    entries: int


class CachedEmbedder:
    """``inner`` with an LRU of at most ``max_entries`` vectors in front of it.

    It has the same ``name`` and ``dims`` as ``inner``, so its vectors live in the same space. The
    texts of one call that are not cached are sent to ``inner`` in a single batch.

    For an inner embedder that embeds search queries apart (a :class:`QueryEmbedder`), query vectors
    are cached under keys of their own; for any other, :meth:`embed_queries` is :meth:`embed`.

    Thread-safe. The lock is not held while ``inner`` runs, so two threads that miss on the same text
    at once may both embed it; the answer is the same, and holding the lock instead would serialise
    every embedding in the process behind the slowest one.
    """

    def __init__(self, inner: Embedder, max_entries: int = 50_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self.name: str = inner.name
        self.dims: int = inner.dims
        self.max_entries = max_entries
        # Tuples, not lists: callers get a fresh list each time, so nothing they do to a returned
        # vector can change what the cache hands out next.
        self._entries: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    @property
    def hits(self) -> int:
        """Texts answered from the cache."""
        return self._hits

    @property
    def misses(self) -> int:
        """Texts sent to the inner embedder."""
        return self._misses

    def stats(self) -> CacheStats:
        """The counters and the number of cached vectors, read together."""
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._entries))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        """Forget every cached vector (the counters are kept)."""
        with self._lock:
            self._entries.clear()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text; only the texts not cached reach the inner embedder."""
        keys, found, missing = self._lookup(texts)
        if missing:
            vectors = self.inner.embed([texts[i] for i in missing.values()])
            self._store(found, missing, vectors)
        return [list(found[key]) for key in keys]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`, using the inner embedder's ``aembed`` for the misses."""
        keys, found, missing = self._lookup(texts)
        if missing:
            vectors = await self.inner.aembed([texts[i] for i in missing.values()])
            self._store(found, missing, vectors)
        return [list(found[key]) for key in keys]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per search query, from the inner embedder's ``embed_queries`` where it has one."""
        if not isinstance(self.inner, QueryEmbedder):
            return self.embed(texts)
        keys, found, missing = self._lookup(texts, _QUERY_SALT)
        if missing:
            vectors = self.inner.embed_queries([texts[i] for i in missing.values()])
            self._store(found, missing, vectors)
        return [list(found[key]) for key in keys]

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed_queries`, using the inner embedder's async methods for the misses."""
        if not isinstance(self.inner, QueryEmbedder):
            return await self.aembed(texts)
        keys, found, missing = self._lookup(texts, _QUERY_SALT)
        if missing:
            vectors = await self.inner.aembed_queries([texts[i] for i in missing.values()])
            self._store(found, missing, vectors)
        return [list(found[key]) for key in keys]

    def _lookup(
        self, texts: Sequence[str], salt: bytes = b""
    ) -> tuple[list[bytes], dict[bytes, tuple[float, ...]], dict[bytes, int]]:
        """The key of every text, the cached vectors, and the first index of each uncached key."""
        keys = [hashlib.sha256(salt + text.encode("utf-8")).digest() for text in texts]
        found: dict[bytes, tuple[float, ...]] = {}
        # A text repeated within one call is embedded once: the dict keeps its first position.
        missing: dict[bytes, int] = {}
        with self._lock:
            for index, key in enumerate(keys):
                if key in found or key in missing:
                    continue
                vector = self._entries.get(key)
                if vector is None:
                    missing[key] = index
                else:
                    self._entries.move_to_end(key)
                    found[key] = vector
            self._misses += len(missing)
            self._hits += len(keys) - len(missing)
        return keys, found, missing

    def _store(
        self,
        found: dict[bytes, tuple[float, ...]],
        missing: dict[bytes, int],
        vectors: list[list[float]],
    ) -> None:
        """Put the inner embedder's answers in ``found`` and in the cache, evicting the oldest."""
        if len(vectors) != len(missing):
            raise EmbedderUnavailableError(
                f"embedder {self.name!r} returned {len(vectors)} vectors for {len(missing)} texts"
            )
        with self._lock:
            for key, vector in zip(missing, vectors, strict=True):
                frozen = tuple(vector)
                found[key] = frozen
                self._entries[key] = frozen
                self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
