"""langgraph-beads-memory: durable, typed fact-graph memory for LangGraph agents on Postgres.

    from memory import BeadsMemoryMiddleware, FactStore, MiniLMEmbedder, open_pool

    pool = open_pool()  # DATABASE_URL; or open_pool(url), or open_pool(start_embedded())
    store = FactStore(pool, MiniLMEmbedder())
    store.setup()
    middleware = BeadsMemoryMiddleware(store)  # each run names its session: configurable["session_id"]

The vocabulary (kinds, statuses, sources, relations, the records searches return) and the exceptions
are imported with the package; everything else on first use, so that `import memory.errors` (or any
one submodule) does not pay for LangChain, the embedders and the rest. Nothing here imports an
optional extra (see memory.extras): the embedded Postgres loads only when it is started.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memory.errors import (
    BeadsMemoryError,
    ConfigurationError,
    CycleError,
    DatabaseUnavailableError,
    EmbedderUnavailableError,
    FactNotFoundError,
    InvalidCursorError,
    InvalidTextError,
    MissingExtraError,
    ModelCannotBindToolsError,
    ModelUnavailableError,
    NamespaceNotFoundError,
    NoDatabaseError,
    SchemaMissingError,
    SessionNotGivenError,
    SupersedeRefusedError,
    UntrustedWriteError,
)
from memory.model import (
    CaptureResult,
    Deleted,
    Fact,
    FactPage,
    Hit,
    Kind,
    ListedFact,
    Namespace,
    Relation,
    SearchResult,
    Source,
    Status,
)

if TYPE_CHECKING:
    from memory.context.assembler import InjectionMode
    from memory.doors.middleware import BeadsMemoryMiddleware, CaptureMode
    from memory.doors.scope import SessionScope
    from memory.doors.subagents import make_subagent_tool
    from memory.embedders import CachedEmbedder, Embedder, FakeEmbedder, MiniLMEmbedder, OllamaEmbedder
    from memory.events import CaptureEvent, InjectionEvent
    from memory.graph.reads import supersede_chains
    from memory.graph.store import AsyncFactStore, FactStore
    from memory.postgres.connection import open_async_pool, open_pool
    from memory.postgres.embedded_postgres import start_embedded
    from memory.retrieval import SearchOptions

_LAZY = {
    "AsyncFactStore": "memory.graph.store",
    "BeadsMemoryMiddleware": "memory.doors.middleware",
    "CachedEmbedder": "memory.embedders",
    "CaptureEvent": "memory.events",
    "CaptureMode": "memory.doors.middleware",
    "Embedder": "memory.embedders",
    "FactStore": "memory.graph.store",
    "FakeEmbedder": "memory.embedders",
    "InjectionEvent": "memory.events",
    "InjectionMode": "memory.context.assembler",
    "MiniLMEmbedder": "memory.embedders",
    "OllamaEmbedder": "memory.embedders",
    "SearchOptions": "memory.retrieval",
    "SessionScope": "memory.doors.scope",
    "make_subagent_tool": "memory.doors.subagents",
    "open_async_pool": "memory.postgres.connection",
    "open_pool": "memory.postgres.connection",
    "start_embedded": "memory.postgres.embedded_postgres",
    "supersede_chains": "memory.graph.reads",
}

__all__ = [
    "AsyncFactStore",
    "BeadsMemoryError",
    "BeadsMemoryMiddleware",
    "CachedEmbedder",
    "CaptureEvent",
    "CaptureMode",
    "CaptureResult",
    "ConfigurationError",
    "CycleError",
    "DatabaseUnavailableError",
    "Deleted",
    "Embedder",
    "EmbedderUnavailableError",
    "Fact",
    "FactNotFoundError",
    "FactPage",
    "FactStore",
    "FakeEmbedder",
    "Hit",
    "InjectionEvent",
    "InjectionMode",
    "InvalidCursorError",
    "InvalidTextError",
    "Kind",
    "ListedFact",
    "MiniLMEmbedder",
    "MissingExtraError",
    "ModelCannotBindToolsError",
    "ModelUnavailableError",
    "Namespace",
    "NamespaceNotFoundError",
    "NoDatabaseError",
    "OllamaEmbedder",
    "Relation",
    "SchemaMissingError",
    "SearchOptions",
    "SearchResult",
    "SessionNotGivenError",
    "SessionScope",
    "Source",
    "Status",
    "SupersedeRefusedError",
    "UntrustedWriteError",
    "make_subagent_tool",
    "open_async_pool",
    "open_pool",
    "start_embedded",
    "supersede_chains",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
