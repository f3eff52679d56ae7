"""The playground's schema: ordered, forward-only migrations, applied under an advisory lock.

The same scheme as the library's (`memory.migrate`): numbered `.sql` files in
`playground/migrations/`, each run in its own transaction and recorded in
`playground.schema_migrations`. Two processes starting together serialise on the lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

# pg_advisory_lock takes a bigint; this one is "playgr" in ASCII (the library's is "beads").
MIGRATION_LOCK_KEY = 0x706C61796772

_FILENAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS playground;
CREATE TABLE IF NOT EXISTS playground.schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
"""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with the playground, in order."""
    found = []
    for entry in resources.files("playground.migrations").iterdir():
        match = _FILENAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return tuple(found)


async def setup(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Apply every pending migration; returns the versions applied by this call (autocommit `conn`)."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        await conn.execute(_BOOTSTRAP)
        cur = await conn.execute("SELECT version FROM playground.schema_migrations")
        applied = {row["version"] if isinstance(row, dict) else row[0] for row in await cur.fetchall()}
        done: list[int] = []
        for migration in migrations():
            if migration.version in applied:
                continue
            async with conn.transaction():
                await conn.execute(sql.SQL(migration.sql))  # type: ignore[arg-type]  # a file shipped with us
                await conn.execute(
                    "INSERT INTO playground.schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            done.append(migration.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


async def fetch_all(pool: AsyncConnectionPool, query: str, params: Any = None) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return list(await cur.fetchall())  # type: ignore[arg-type]


async def fetch_one(pool: AsyncConnectionPool, query: str, params: Any = None) -> dict[str, Any] | None:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchone()  # type: ignore[return-value]
