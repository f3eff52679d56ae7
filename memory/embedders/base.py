"""What every embedder looks like, and the small vector helpers the rest of the library shares.

An embedder turns texts into L2-normalised vectors of a fixed length. Its ``name`` identifies the
vector space: the store keys every vector by it, because two models (or one model with two
settings) give vectors that mean nothing next to each other even when their lengths agree.

Embedders may be slow (a model run) or remote (an HTTP call), so they must never be called inside a
database transaction: callers embed first, then open the transaction and write.

Some models embed a search query differently from the texts it is matched against (e5's ``query: ``
and ``passage: `` prefixes). Such an embedder also has ``embed_queries`` and ``aembed_queries``
(:class:`QueryEmbedder`); ``embed`` stays the side for what is stored. Code that embeds a query calls
:func:`embed_queries` (or :func:`embed_query`), which uses ``embed`` for an embedder without them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of one fixed vector space."""

    #: Stable identifier of the vector space, e.g. ``"minilm-l6-int8"``. Vectors of different names
    #: are never compared.
    name: str
    #: Length of every vector this embedder returns.
    dims: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`, without blocking the event loop."""
        ...


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An embedder whose search queries are embedded apart from what they are matched against."""

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per search query, in the space of :meth:`embed`'s vectors."""
        ...

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed_queries`, without blocking the event loop."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The vectors of search queries: the embedder's ``embed_queries`` where it has one, else ``embed``."""
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_queries(texts)
    return embedder.embed(texts)


async def aembed_queries(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The same as :func:`embed_queries`, without blocking the event loop."""
    if isinstance(embedder, QueryEmbedder):
        return await embedder.aembed_queries(texts)
    return await embedder.aembed(texts)


def embed_query(embedder: Embedder, query: str) -> list[float]:
    """The vector of a single search query."""
    return embed_queries(embedder, [query])[0]


def embed_one(embedder: Embedder, text: str) -> list[float]:
    """The vector of a single text."""
    return embedder.embed([text])[0]


async def aembed_one(embedder: Embedder, text: str) -> list[float]:
    """The vector of a single text, without blocking the event loop."""
    return (await embedder.aembed([text]))[0]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 0.0 when either is all zeros.

    Embedders already return unit vectors, so this is their dot product, but dividing by the norms
    keeps the helper correct for vectors that came from anywhere else.
    """
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of {len(a)} and {len(b)} dimensions")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


def l2_normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (an all-zero vector is returned unchanged)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not norm:
        return [float(x) for x in vector]
    return [x / norm for x in vector]


def mean_of_parts(
    parts: Sequence[str], vectors: Sequence[Sequence[float]] | NDArray[np.float32]
) -> list[float]:
    """The vector of a text cut into `parts`, from the parts' own `vectors`: their mean, each weighted
    by its part's length in characters, normalised to length 1.

    What a message's passage vector is (memory.graph.facts.message_facts): the claims are embedded
    anyway, and embedding the whole message as well was half of an import's model time. The mean of
    a few sentences stands for their text as a whole the way a mean-pooled model's own vector does;
    and for a long message it covers all of it, where a model reads its first few hundred tokens."""
    if len(parts) != len(vectors) or not parts:
        raise ValueError(f"{len(parts)} parts and {len(vectors)} vectors: one vector a part, at least one")
    weights = np.array([max(len(p), 1) for p in parts], dtype=np.float64)
    # the parts' vectors as they are stored (pgvector's float4), so that a mean taken from a model's
    # output and one taken from the table later (a new embedding space's backfill) are the same
    stored = np.asarray(vectors, dtype=np.float32).astype(np.float64)
    return l2_normalise((stored * weights[:, None]).sum(axis=0).tolist())
