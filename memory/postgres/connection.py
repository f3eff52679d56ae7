"""One place that yields psycopg 3 pools for the memory library and the apps built on it.

A pool connects to the URL it is given, else to `DATABASE_URL`; with neither it refuses
(`NoDatabaseError`, which says how to choose). It never starts a server: the embedded Postgres is
started explicitly, `open_pool(start_embedded())` (memory.postgres.embedded_postgres). Every pool is
configured the way LangGraph's PostgresStore and PostgresSaver need too (autocommit, dict rows), so one pool can serve the fact graph, the checkpointer and the store.
"""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory.errors import ConfigurationError, DatabaseUnavailableError, NoDatabaseError
from memory.settings import MemorySettings

# autocommit: LangGraph's setup() runs CREATE INDEX CONCURRENTLY, which fails inside a transaction.
# prepare_threshold: psycopg prepares no statement by counting (one would have to run this many times
# on a connection), so the multi-statement migration files, which refuse it, and LangGraph's
# statements run unprepared. What is prepared: what asks for it, where planning costs more than
# running (search's candidate statement, capture's nearest earlier claims and supersede's echo
# lookup, planned once per connection instead of on every call, which is a large part of a search's
# time: docs/measured/benchmarks.md) once the tables have statistics (memory.postgres.prepared), and what psycopg's
# executemany sends (it always asks: the vector inserts).
PREPARE_ONLY_WHEN_ASKED = 2**31 - 1
CONNECTION_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "prepare_threshold": PREPARE_ONLY_WHEN_ASKED,
    "row_factory": dict_row,
}
# No server-side prepared statements at all (psycopg ignores prepare=True): for a pooler in
# transaction mode that cannot carry them (PgBouncer before 1.21, or without max_prepared_statements).
# BEADS_PREPARED_STATEMENTS=false gives open_pool's pools these.
UNPREPARED_KWARGS: dict[str, Any] = {**CONNECTION_KWARGS, "prepare_threshold": None}


def connection_kwargs(prepared_statements: bool | None = None) -> dict[str, Any]:
    """The pools' connection settings; `prepared_statements` None: BEADS_PREPARED_STATEMENTS."""
    if prepared_statements is None:
        prepared_statements = MemorySettings().prepared_statements
    return CONNECTION_KWARGS if prepared_statements else UNPREPARED_KWARGS


def configured_database_url(url: str | None = None, settings: MemorySettings | None = None) -> str:
    """`url` if given, else `DATABASE_URL`; `NoDatabaseError` with neither. Starts nothing."""
    if url:
        return url
    settings = settings or MemorySettings()
    if settings.database_url:
        return settings.database_url
    raise NoDatabaseError()


def ensure_vector_extension(url: str) -> None:
    """Create pgvector in the target database; pools register its type, which must exist first."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.UniqueViolation:
        pass  # a concurrent process created it between our check and our insert: that is fine
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            "the pgvector extension is not installed in this database and this role may not create it; "
            "ask an administrator to run CREATE EXTENSION vector"
        ) from exc
    except psycopg.errors.FeatureNotSupported as exc:
        first = str(exc).splitlines()[0]
        raise ConfigurationError(
            f"pgvector is not available on this Postgres server ({first}). Ways out: install it on the "
            "server (Debian/Ubuntu: the postgresql-NN-pgvector package where there is one, or build the "
            "pgvector source this package carries, memory/vendor/, with `make && make install`: "
            "docs/guide/production.md), use a server that has it (`docker compose up -d`, or a managed Postgres "
            "with pgvector), or leave DATABASE_URL unset to use the embedded server "
            "(pip install 'langgraph-beads-memory[embedded]')"
        ) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError(f"cannot connect to Postgres: {exc}") from exc


def open_pool(
    url: str | None = None,
    *,
    min_size: int = 1,
    max_size: int = 10,
    prepared_statements: bool | None = None,
    **kwargs: Any,
) -> ConnectionPool[psycopg.Connection[DictRow]]:
    """An open sync pool on `url` (else `DATABASE_URL`); the caller closes it (or uses it as a context
    manager). `prepared_statements=False` (or BEADS_PREPARED_STATEMENTS=false): none, for a pooler that
    cannot carry them."""
    url = configured_database_url(url)
    ensure_vector_extension(url)
    # rows are dicts (connection_kwargs' row_factory): the annotation says so to the type checker
    pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs=connection_kwargs(prepared_statements),
        configure=register_vector,
        open=False,
        **kwargs,
    )
    pool.open(wait=True, timeout=30)
    return pool


async def open_async_pool(
    url: str | None = None,
    *,
    min_size: int = 1,
    max_size: int = 10,
    prepared_statements: bool | None = None,
    **kwargs: Any,
) -> AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]:
    """An open async pool on `url` (else `DATABASE_URL`); the caller closes it (or uses it as an async
    context manager). `prepared_statements` as open_pool's."""
    import asyncio

    url = configured_database_url(url)
    await asyncio.to_thread(ensure_vector_extension, url)
    pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]] = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs=connection_kwargs(prepared_statements),
        configure=register_vector_async,
        open=False,
        **kwargs,
    )
    await pool.open(wait=True, timeout=30)
    return pool
