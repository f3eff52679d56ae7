"""Ordered, forward-only schema migrations, applied by `setup()` under an advisory lock.

A `MigrationSet` is a package of numbered `.sql` files (`0001_name.sql`, ...) and the schema they
build; each file runs in its own transaction and is recorded in `<schema>.schema_migrations`. Two
processes starting together serialise on the set's lock: the second finds everything applied and does
nothing. The library's set is `memory/migrations/` in the `beads` schema; apps reuse the same class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

# pg_advisory_lock takes a bigint; this one is "beads" in ASCII.
MIGRATION_LOCK_KEY = 0x6265616473

_FILENAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")
_MIGRATIONS_TABLE = "SELECT to_regclass(%s) IS NOT NULL AS found"


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


@cache
def _load(package: str) -> tuple[Migration, ...]:
    found = []
    for entry in resources.files(package).iterdir():
        match = _FILENAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations in {package} must be numbered 1..n without gaps, found {versions}")
    return tuple(found)


def _version(row: Any) -> int:
    return int(row["version"] if isinstance(row, dict) else row[0])


@dataclass(frozen=True, slots=True)
class MigrationSet:
    package: str  # where the numbered .sql files live
    schema: str  # the schema they build (whitelisted: a plain lowercase identifier)
    lock_key: int
    extensions: tuple[str, ...] = ()  # created inside the lock: IF NOT EXISTS is not safe against a twin

    def __post_init__(self) -> None:
        if not _IDENTIFIER.match(self.schema) or not all(_IDENTIFIER.match(e) for e in self.extensions):
            raise ValueError("schema and extension names must be plain lowercase identifiers")

    def migrations(self) -> tuple[Migration, ...]:
        return _load(self.package)

    def _prologue(self) -> list[sql.Composed]:
        statements: list[sql.Composed] = [
            sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(e)) for e in self.extensions
        ]
        statements.append(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
        statements.append(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(self.schema))
        )
        return statements

    def _applied_query(self) -> sql.Composed:
        return sql.SQL("SELECT version FROM {}.schema_migrations").format(sql.Identifier(self.schema))

    def _record(self) -> sql.Composed:
        return sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, %s)").format(
            sql.Identifier(self.schema)
        )

    def pending(self, conn: psycopg.Connection[Any]) -> list[int]:
        """The versions shipped but not applied in `conn`'s database (all of them before the first
        setup); reads only, takes no lock."""
        exists = conn.execute(_MIGRATIONS_TABLE, (f"{self.schema}.schema_migrations",))
        row = exists.fetchone()
        if row is None or not (row["found"] if isinstance(row, dict) else row[0]):
            return [m.version for m in self.migrations()]
        applied = {_version(r) for r in conn.execute(self._applied_query()).fetchall()}
        return [m.version for m in self.migrations() if m.version not in applied]

    async def apending(self, conn: psycopg.AsyncConnection[Any]) -> list[int]:
        """`pending()` for an async connection."""
        cur = await conn.execute(_MIGRATIONS_TABLE, (f"{self.schema}.schema_migrations",))
        row = await cur.fetchone()
        if row is None or not (row["found"] if isinstance(row, dict) else row[0]):
            return [m.version for m in self.migrations()]
        cur = await conn.execute(self._applied_query())
        applied = {_version(r) for r in await cur.fetchall()}
        return [m.version for m in self.migrations() if m.version not in applied]

    def setup(self, conn: psycopg.Connection[Any]) -> list[int]:
        """Apply every pending migration; returns the versions applied by this call.

        `conn` must be in autocommit mode (as the library's pools are): each migration opens its own
        transaction so a failure leaves the schema at the last good version.
        """
        conn.execute("SELECT pg_advisory_lock(%s)", (self.lock_key,))
        try:
            for statement in self._prologue():
                conn.execute(statement)
            applied = {_version(r) for r in conn.execute(self._applied_query()).fetchall()}
            done: list[int] = []
            for migration in self.migrations():
                if migration.version not in applied:
                    with conn.transaction():
                        conn.execute(sql.SQL(migration.sql))  # not a literal, but a file shipped with us
                        conn.execute(self._record(), (migration.version, migration.name))
                    done.append(migration.version)
            return done
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.lock_key,))

    async def asetup(self, conn: psycopg.AsyncConnection[Any]) -> list[int]:
        """`setup()` for an async connection."""
        await conn.execute("SELECT pg_advisory_lock(%s)", (self.lock_key,))
        try:
            for statement in self._prologue():
                await conn.execute(statement)
            cur = await conn.execute(self._applied_query())
            applied = {_version(r) for r in await cur.fetchall()}
            done: list[int] = []
            for migration in self.migrations():
                if migration.version not in applied:
                    async with conn.transaction():
                        await conn.execute(sql.SQL(migration.sql))  # a file shipped with us
                        await conn.execute(self._record(), (migration.version, migration.name))
                    done.append(migration.version)
            return done
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (self.lock_key,))


LIBRARY_MIGRATIONS = MigrationSet("memory.migrations", "beads", MIGRATION_LOCK_KEY, extensions=("vector",))


def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with the library, in order."""
    return LIBRARY_MIGRATIONS.migrations()


def setup(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the library's pending migrations (see `MigrationSet.setup`)."""
    return LIBRARY_MIGRATIONS.setup(conn)


async def asetup(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Apply the library's pending migrations on an async connection."""
    return await LIBRARY_MIGRATIONS.asetup(conn)
