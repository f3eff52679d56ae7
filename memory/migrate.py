"""Ordered, forward-only schema migrations, applied by `setup()` under an advisory lock.

Migrations are the numbered `.sql` files in `memory/migrations/`; each one runs in its own transaction
and is recorded in `beads.schema_migrations`. Two processes starting together serialise on the lock:
the second finds everything applied and does nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import psycopg
from psycopg import sql

# pg_advisory_lock takes a bigint; this one is "beads" in ASCII.
MIGRATION_LOCK_KEY = 0x6265616473

_FILENAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS beads;
CREATE TABLE IF NOT EXISTS beads.schema_migrations (
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
    """Every migration shipped with the library, in order."""
    found = []
    for entry in resources.files("memory.migrations").iterdir():
        match = _FILENAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, found {versions}")
    return tuple(found)


def setup(conn: psycopg.Connection) -> list[int]:
    """Apply every pending migration; returns the versions applied by this call.

    `conn` must be in autocommit mode (as the library's pools are): each migration opens its own
    transaction so a failure leaves the schema at the last good version.
    """
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        # inside the lock: CREATE EXTENSION IF NOT EXISTS is not safe against a concurrent twin
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(_BOOTSTRAP)
        applied = {
            row[0] if isinstance(row, tuple) else row["version"]
            for row in conn.execute("SELECT version FROM beads.schema_migrations").fetchall()
        }
        done: list[int] = []
        for migration in migrations():
            if migration.version in applied:
                continue
            with conn.transaction():
                conn.execute(sql.SQL(migration.sql))  # type: ignore[arg-type]  # trusted file shipped with us
                conn.execute(
                    "INSERT INTO beads.schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            done.append(migration.version)
        return done
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


async def asetup(conn: psycopg.AsyncConnection) -> list[int]:
    """`setup()` for an async connection."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(_BOOTSTRAP)
        cur = await conn.execute("SELECT version FROM beads.schema_migrations")
        applied = {row[0] if isinstance(row, tuple) else row["version"] for row in await cur.fetchall()}
        done: list[int] = []
        for migration in migrations():
            if migration.version in applied:
                continue
            async with conn.transaction():
                await conn.execute(sql.SQL(migration.sql))  # type: ignore[arg-type]
                await conn.execute(
                    "INSERT INTO beads.schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            done.append(migration.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
