"""LangGraph's stock memory, set up the way a user of it would: `PostgresStore` with a pgvector index
over LangMem's `content` field.

The store fixes its vector dimension at its first `setup()`, so each embedder gets its own schema
(`lg_<embedder>`): a user who switches from the offline embedder (384-d) to Ollama (768-d) keeps both.

As an option (`PLAYGROUND_STOCK_STORE=beads`) the same lane, tools and prompt run on `BeadsStore`
(memory.doors.langgraph_store) instead: LangGraph's store API over our fact graph, where the lane's
namespace ("memories", session) is the session "memories.<session>", apart from our lane's own.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

import psycopg
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory.doors.langgraph_store import BeadsStore
from memory.embedders.base import Embedder
from memory.graph.store import FactStore
from memory.postgres.connection import open_pool

STOCK_NAMESPACE_ROOT = "memories"
StockBackend = Literal["postgres", "beads"]
#: the stock store's pools: their connections return rows as dicts (_kwargs), as LangGraph's stores need
SyncStockPool = ConnectionPool[psycopg.Connection[DictRow]]
AsyncStockPool = AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]


def stock_schema(embedder: Embedder) -> str:
    """`lg_` plus the embedder's name reduced to identifier characters (a whitelist, never quoted input)."""
    return "lg_" + re.sub(r"[^a-z0-9]+", "_", embedder.name.lower()).strip("_")[:50]


def _index(embedder: Embedder) -> PostgresIndexConfig:
    return {"dims": embedder.dims, "embed": embedder.embed, "fields": ["content"]}


def _kwargs(schema: str) -> dict[str, Any]:
    # the store's SQL names its tables unqualified: the search path puts them in this embedder's schema
    return {
        "autocommit": True,
        "prepare_threshold": None,
        "row_factory": dict_row,
        "options": f"-c search_path={schema},public",
    }


def _create_schema(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))


def open_stock_store(url: str, embedder: Embedder, max_size: int = 4) -> tuple[PostgresStore, SyncStockPool]:
    """A set-up PostgresStore for `embedder` and the pool behind it (close the pool when done)."""
    schema = stock_schema(embedder)
    _create_schema(url, schema)
    pool: SyncStockPool = ConnectionPool(
        url, min_size=1, max_size=max_size, kwargs=_kwargs(schema), open=True
    )
    store = PostgresStore(pool, index=_index(embedder))
    store.setup()
    return store, pool


class _SyncPoolHandle:
    """A sync pool behind the two calls the app makes on the stock lane's pool (close, check)."""

    def __init__(self, pool: SyncStockPool) -> None:
        self.pool = pool

    async def close(self) -> None:
        await asyncio.to_thread(self.pool.close)

    async def check(self) -> None:
        await asyncio.to_thread(self.pool.check)


async def open_async_beads_stock_store(
    url: str, embedder: Embedder, max_size: int = 4
) -> tuple[BeadsStore, _SyncPoolHandle]:
    """The stock lane's store as BeadsStore, ranking LangMem's `content` field, on a pool of its own."""
    pool = await asyncio.to_thread(open_pool, url, min_size=1, max_size=max_size)
    facts = FactStore(pool, embedder)
    await asyncio.to_thread(facts.setup)
    return BeadsStore(facts, fields=["content"]), _SyncPoolHandle(pool)


async def open_async_stock_store(
    url: str, embedder: Embedder, max_size: int = 4, backend: StockBackend = "postgres"
) -> tuple[Any, Any]:
    """The stock lane's store and its pool: LangGraph's AsyncPostgresStore, or with `backend="beads"`
    BeadsStore (close the pool when done)."""
    if backend == "beads":
        return await open_async_beads_stock_store(url, embedder, max_size)
    schema = stock_schema(embedder)
    await asyncio.to_thread(_create_schema, url, schema)
    pool: AsyncStockPool = AsyncConnectionPool(
        url, min_size=1, max_size=max_size, kwargs=_kwargs(schema), open=False
    )
    await pool.open()
    store = AsyncPostgresStore(pool, index={**_index(embedder), "embed": embedder.aembed})
    await store.setup()
    return store, pool
