"""Our conftest for LangGraph's own store tests (tests/test_upstream_store.py copies it into each
unpacked sdist as `tests/conftest.py`, replacing langgraph-checkpoint-postgres's, which only points
at a docker Postgres).

The test bodies are LangGraph's, unchanged. They build their stores with three names, and those
names are bound here to BeadsStore on our real embedded Postgres:

- `InMemoryStore(index=..., ttl=...)` (langgraph-checkpoint's tests/test_store.py): a BeadsStore on a
  fresh database cloned from our migrated template;
- `PostgresStore.from_conn_string(url, index=..., ttl=...)` and `AsyncPostgresStore` (their
  tests/test_store.py and tests/test_async_store.py, whose fixtures create the database at
  `DEFAULT_URI` and call `setup()`): `BeadsStore` and `AsyncBeadsStore` on that database.

A store without an `index` embeds with our seeded FakeEmbedder (LangGraph's would not embed at all);
with one, with the `embed` it names (their CharacterEmbeddings). `_cursor()` is PostgresStore's
private cursor, which some tests use to reach the `store` table: here a connection whose
search_path finds beads.store, the view of the same shape (migration 0010).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool
from tests.embed_test_utils import CharacterEmbeddings

from memory.doors.langgraph_store import AsyncBeadsStore, BeadsStore, IndexEmbedder
from memory.embedders import FakeEmbedder
from memory.embedders.base import Embedder
from memory.graph.store import FactStore
from memory.postgres.connection import open_pool
from memory.postgres.migrate import migrations

SERVER = os.environ["BEADS_UPSTREAM_SERVER_URL"]  # the maintenance URL of our test server
TEMPLATE = os.environ["BEADS_UPSTREAM_TEMPLATE"]  # a database with every migration applied
# BeadsStore's options (e.g. {"ranking": "beads"}), to see which of their tests an option fails
OPTIONS: dict[str, Any] = json.loads(os.environ.get("BEADS_UPSTREAM_OPTIONS") or "{}")


def _as_url(conninfo: str) -> str:
    """The server's URL in the one form their fixtures can cut (`base/dbname?params`): a socket
    directory goes into the host, percent-encoded."""
    parts = conninfo_to_dict(conninfo)
    user = quote(str(parts.get("user", "postgres")), safe="")
    password = f":{quote(str(parts['password']), safe='')}" if parts.get("password") else ""
    host = quote(str(parts.get("host", "localhost")), safe="")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{password}@{host}{port}/{parts.get('dbname', 'postgres')}"


DEFAULT_URI = _as_url(SERVER)
DEFAULT_POSTGRES_URI = DEFAULT_URI
VECTOR_TYPES = ["vector", "halfvec"]
MIGRATIONS = [m.sql for m in migrations()]

# InMemoryStore's databases: cloned once, emptied for each new store, handed back when its test
# ends (creating and dropping a database per store costs seconds each on a busy disk)
_databases: list[str] = []
_free: list[str] = []
_taken: list[tuple[str, ConnectionPool[psycopg.Connection[DictRow]]]] = []


def _empty_database() -> str:
    if _free:
        name = _free.pop()
        with psycopg.connect(make_conninfo(SERVER, dbname=name), autocommit=True) as conn:
            # every table of the fact graph hangs off these three (ON DELETE CASCADE)
            conn.execute("TRUNCATE beads.namespaces, beads.passages, beads.vector_coverage CASCADE")
        return name
    name = f"upstream_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(TEMPLATE))
        )
    _databases.append(name)
    return name


# Their tests that read PostgresStore's internals rather than the store's behaviour, and why each
# cannot pass on another store; strict, so one that starts passing fails the lane until removed here
NOT_THE_STORE_API = {
    "test_abatch_uses_single_pool_checkout": (
        "counts calls of langgraph.checkpoint.postgres._ainternal.get_connection, PostgresStore's private "
        "pool helper, which BeadsStore does not use; the behaviour it checks (one pool checkout per abatch) "
        "is held for BeadsStore by tests/test_beads_store.py::"
        "test_abatch_takes_one_connection_from_the_pool_whatever_its_ops, on a real pool"
    ),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        reason = NOT_THE_STORE_API.get(item.originalname if isinstance(item, pytest.Function) else item.name)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@pytest.fixture(autouse=True)
def _beads_in_place_of_langgraphs_stores(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, ours in (
        ("InMemoryStore", InMemoryStore),
        ("PostgresStore", PostgresStore),
        ("AsyncPostgresStore", AsyncPostgresStore),
    ):
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, ours)


@pytest.fixture(autouse=True)
def _hand_back_the_tests_databases() -> Iterator[None]:
    """A test's stores are done with when it ends: their connections close, their databases are free."""
    yield
    while _taken:
        name, pool = _taken.pop()
        pool.close()
        _free.append(name)


@pytest.fixture(scope="session", autouse=True)
def _drop_cloned_databases() -> Iterator[None]:
    yield
    with psycopg.connect(SERVER, autocommit=True) as admin:
        for name in _databases:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _embedder(index: Any) -> Embedder:
    return IndexEmbedder(index) if index and index.get("embed") is not None else FakeEmbedder(64)


def _max_size(pool_config: dict[str, Any] | None) -> int:
    return int((pool_config or {}).get("max_size", 4))


class InMemoryStore(BeadsStore):
    """langgraph-checkpoint's tests build `InMemoryStore(index=..., ttl=...)`: a fresh, empty store."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        name = _empty_database()
        pool = open_pool(make_conninfo(SERVER, dbname=name), min_size=1, max_size=2)
        _taken.append((name, pool))
        super().__init__(FactStore(pool, _embedder(index)), index=index, ttl=ttl, **OPTIONS)
        self.setup()


class PostgresStore(BeadsStore):
    """`PostgresStore.from_conn_string(...)` as their fixtures call it, on the database they made."""

    MIGRATIONS = MIGRATIONS
    url: str = ""

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
        index: Any = None,
        ttl: Any = None,
    ) -> Iterator[PostgresStore]:
        with open_pool(conn_string, min_size=1, max_size=_max_size(pool_config)) as pool:
            store = cls(FactStore(pool, _embedder(index)), index=index, ttl=ttl, **OPTIONS)
            store.url = conn_string
            try:
                yield store
            finally:
                store.stop_ttl_sweeper()

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[DictRow]]:
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            conn.execute("SET search_path = beads, public")
            with conn.cursor() as cur:
                yield cur


class AsyncPostgresStore(AsyncBeadsStore):
    """`AsyncPostgresStore.from_conn_string(...)` as their fixtures call it."""

    MIGRATIONS = MIGRATIONS
    url: str = ""

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
        index: Any = None,
        ttl: Any = None,
    ) -> AsyncIterator[AsyncPostgresStore]:
        pool = await asyncio.to_thread(open_pool, conn_string, min_size=1, max_size=_max_size(pool_config))
        store = cls(BeadsStore(FactStore(pool, _embedder(index)), index=index, ttl=ttl, **OPTIONS))
        store.url = conn_string
        try:
            yield store
        finally:
            await store.stop_ttl_sweeper()
            await asyncio.to_thread(pool.close)

    @contextlib.asynccontextmanager
    async def _cursor(self) -> AsyncIterator[psycopg.AsyncCursor[DictRow]]:
        async with await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, row_factory=dict_row
        ) as conn:
            await conn.execute("SET search_path = beads, public")
            async with conn.cursor() as cur:
                yield cur
