"""A fast, deterministic 768-d embedder whose vectors cluster by topic, and a lookup wrapper.

Real sentence embeddings are neither uniform noise (the worst case for HNSW) nor exact duplicates:
texts of one domain share a direction, texts about one system or one component cluster, and two
wordings of the same claim sit close together. This embedder builds that structure from parts:

    v = normalise(G + S[system] + T[topic] + words + noise)

G is shared by every text, S and T come from the "<system> <component>" phrase found in the text (or,
without one, a topic picked by sha256 of the text), `words` sums one seeded direction per content
word (so a question and the claim it asks about, or two versions of a claim, share most of it), and
`noise` is seeded by the whole text. Every seed comes from hashlib, never `hash()`, so the vectors
are the same in every process. Well under a millisecond a text: 130,000 texts take about 20 seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Sequence

import numpy as np

SYSTEMS = (
    "billing", "checkout", "search", "inventory", "identity", "payments", "analytics", "notifications",
    "shipping", "catalog", "pricing", "reporting", "onboarding", "support", "ledger", "fraud",
    "recommendations", "messaging", "scheduler", "storage",
)  # fmt: skip
COMPONENTS = (
    "api", "database", "cache", "queue", "worker", "frontend", "gateway", "pipeline", "dashboard", "cluster",
)  # fmt: skip
TOPICS = tuple(f"{s} {c}" for s in SYSTEMS for c in COMPONENTS)  # 200 topics

_STOPWORDS = frozenset(
    {
        "a", "an", "the", "of", "for", "to", "in", "on", "at", "is", "are", "was", "were", "be", "been",
        "our", "we", "you", "i", "it", "its", "this", "that", "these", "those", "and", "or", "by", "with",
        "as", "from", "has", "have", "had", "do", "does", "did", "what", "which", "can", "could", "please",
        "find", "out", "check", "now", "set",
    }
)  # fmt: skip
_WORD = re.compile(r"[a-z][a-z0-9-]*")
_TOPIC = re.compile(r"\b(" + "|".join(SYSTEMS) + r") (" + "|".join(COMPONENTS) + r")\b")

# Component weights, tuned so that (cosine): two versions of one claim ~0.85, a question and the claim
# it asks about ~0.8, two claims about one topic ~0.6, one system ~0.4, unrelated texts ~0.25.
_W_GLOBAL = 0.55
_W_SYSTEM = 0.45
_W_TOPIC = 0.75
_W_WORDS = 0.8
_W_NOISE = 0.3


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _seeded(seed: int, label: str, dims: int) -> np.ndarray:
    """A unit direction drawn from `label`: shake_256 bytes as uniform components, which in hundreds of
    dimensions are as good as Gaussian ones for "independent random direction", and ten times faster."""
    raw = hashlib.shake_256(f"{seed}\x00{label}".encode()).digest(2 * dims)
    return _unit(np.frombuffer(raw, dtype=np.uint16).astype(np.float32) - 32767.5)


class TopicEmbedder:
    """Deterministic unit vectors with topic structure; satisfies memory.embedders.base.Embedder."""

    def __init__(self, dims: int = 768, seed: int = 7) -> None:
        self.dims = dims
        self.seed = seed
        self.name = f"bench-topics-{dims}-s{seed}"
        self._global = _seeded(seed, "global", dims)
        self._systems = {s: _seeded(seed, "system:" + s, dims) for s in SYSTEMS}
        self._topics = {t: _seeded(seed, "topic:" + t, dims) for t in TOPICS}
        self._words: dict[str, np.ndarray] = {}

    def _word(self, word: str) -> np.ndarray:
        vec = self._words.get(word)
        if vec is None:
            vec = self._words[word] = _seeded(self.seed, "word:" + word, self.dims)
        return vec

    def vector(self, text: str) -> np.ndarray:
        lowered = text.lower()
        match = _TOPIC.search(lowered)
        if match:
            system, topic = match[1], match[0]
        else:
            topic = TOPICS[int.from_bytes(hashlib.sha256(lowered.encode()).digest()[:4], "big") % len(TOPICS)]
            system = topic.split()[0]
        words = [w for w in _WORD.findall(lowered) if w not in _STOPWORDS and not any(c.isdigit() for c in w)]
        total = _W_GLOBAL * self._global + _W_SYSTEM * self._systems[system] + _W_TOPIC * self._topics[topic]
        if words:
            total = total + (_W_WORDS / np.sqrt(len(words))) * np.sum([self._word(w) for w in words], axis=0)
        total = total + _W_NOISE * _seeded(self.seed, "text:" + text, self.dims)
        return _unit(total).astype(np.float32)

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors as one float32 array of shape (len(texts), dims)."""
        out = np.empty((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self.vector(text)
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t).tolist() for t in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return self.embed(texts)


class LookupEmbedder:
    """The same space as `base`, answered from vectors computed in advance (so timings exclude embedding).

    Vectors are kept as float32 arrays (a Python list of 768 floats costs 25 KB) and handed out as
    lists, what an embedding function returns; `pin` keeps the list form of texts that are looked up
    inside a timed call (queries), so that the lookup is one dict access. A text that was not
    computed in advance is embedded on the spot and counted in `misses`.
    """

    def __init__(self, base: TopicEmbedder) -> None:
        self.base = base
        self.name = base.name
        self.dims = base.dims
        self.arrays: dict[str, np.ndarray] = {}
        self.lists: dict[str, list[float]] = {}
        self.misses = 0

    def precompute(self, texts: Sequence[str]) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.arrays]
        self.arrays.update(zip(todo, self.base.embed_array(todo), strict=True))

    def pin(self, texts: Sequence[str]) -> None:
        self.precompute(texts)
        self.lists.update((t, self.arrays[t].tolist()) for t in texts)

    def array(self, text: str) -> np.ndarray:
        vec = self.arrays.get(text)
        if vec is None:
            self.misses += 1
            vec = self.arrays[text] = self.base.vector(text)
        return vec

    def vector(self, text: str) -> list[float]:
        vec = self.lists.get(text)
        return vec if vec is not None else self.array(text).tolist()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return self.embed(texts)


class RemoteEmbedder:
    """`inner`'s vectors, answered after the wait a model on another machine costs (an Ollama server
    with a GPU, say): `per_call` seconds a call and `per_text` a text, slept, so that the wait takes
    no CPU from the store being timed, as a remote model's does not."""

    def __init__(self, inner: LookupEmbedder, per_call: float, per_text: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.dims = inner.dims
        self.per_call = per_call
        self.per_text = per_text

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(self.per_call + self.per_text * len(texts))
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.per_call + self.per_text * len(texts))
        return self.inner.embed(texts)
