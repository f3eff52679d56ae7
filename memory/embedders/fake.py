"""A deterministic embedder for tests: no model, no network, the same vectors in every process.

It is a hashed bag of features (lowercased words and the character trigrams of each word), each
feature mapped to its own pseudo-random direction and the directions summed. Texts that share words
and spellings therefore point the same way, which is enough similarity structure for tests of
supersede checks and ranking, while unrelated texts stay near orthogonal.

Directions come from sha256 of (seed, feature), never from Python's ``hash()``, which is salted per
process and would make vectors differ between runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache

_WORD = re.compile(r"\w+")
#: A word counts this much more than one of its trigrams: a shared word is stronger evidence of
#: shared meaning than a shared spelling fragment.
_WORD_WEIGHT = 2.0
_TRIGRAM_WEIGHT = 1.0
#: The feature of a text with no words at all, so that even "" has a unit vector.
_EMPTY_FEATURE = "\x00empty"


class FakeEmbedder:
    """Deterministic unit vectors of ``dims`` dimensions; ``seed`` picks a different vector space."""

    def __init__(self, dims: int = 64, seed: int = 0) -> None:
        if dims < 1:
            raise ValueError("dims must be at least 1")
        self.dims = dims
        self.seed = seed
        self.name = f"fake-{dims}-s{seed}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        return [self._embed_one(text) for text in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`; cheap enough to run on the event loop."""
        await asyncio.sleep(0)
        return self.embed(texts)

    def _embed_one(self, text: str) -> list[float]:
        total = [0.0] * self.dims
        for feature, weight in _features(text).items():
            for i, component in enumerate(_direction(self.seed, self.dims, feature)):
                total[i] += weight * component
        norm = math.sqrt(math.fsum(x * x for x in total))
        if not norm:
            # Features whose directions cancel exactly: astronomically unlikely, but never divide by 0.
            return list(_direction(self.seed, self.dims, _EMPTY_FEATURE))
        return [x / norm for x in total]


def _features(text: str) -> dict[str, float]:
    """The weighted features of ``text``: its words and the trigrams of each word."""
    features: defaultdict[str, float] = defaultdict(float)
    for word in _WORD.findall(text.lower()):
        features["w:" + word] += _WORD_WEIGHT
        # Pad so that a word's start and end are features of their own ("<bu", "et>").
        padded = f"<{word}>"
        for i in range(len(padded) - 2):
            features["t:" + padded[i : i + 3]] += _TRIGRAM_WEIGHT
    if not features:
        features[_EMPTY_FEATURE] = 1.0
    return features


@lru_cache(maxsize=65_536)
def _direction(seed: int, dims: int, feature: str) -> tuple[float, ...]:
    """A unit-length Gaussian direction for ``feature``, the same in every process."""
    digest = hashlib.sha256(f"{seed}\x00{feature}".encode()).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(math.fsum(x * x for x in vector)) or 1.0
    return tuple(x / norm for x in vector)
