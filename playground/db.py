"""The playground's schema and small query helpers.

Its migrations are numbered `.sql` files in `playground/migrations/`, applied with the library's
migration runner (`memory.migrate.MigrationSet`) into the `playground` schema under their own lock.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from memory.migrate import Migration, MigrationSet

# pg_advisory_lock takes a bigint; this one is "playgr" in ASCII (the library's is "beads").
MIGRATION_LOCK_KEY = 0x706C61796772

PLAYGROUND_MIGRATIONS = MigrationSet("playground.migrations", "playground", MIGRATION_LOCK_KEY)

#: NOTIFY channels: a chat's new events (the payload is its id), and a turn ready to be claimed
EVENTS_CHANNEL = "playground_events"
TURNS_CHANNEL = "playground_turns"

#: one row of the event log (playground.events)
INSERT_EVENT = """
INSERT INTO playground.events (chat_id, event_no, turn_id, seq, lane, kind, payload)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""


def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with the playground, in order."""
    return PLAYGROUND_MIGRATIONS.migrations()


async def setup(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Apply every pending migration; returns the versions applied by this call (autocommit `conn`)."""
    return await PLAYGROUND_MIGRATIONS.asetup(conn)


async def fetch_all(pool: AsyncConnectionPool, query: str, params: Any = None) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return list(await cur.fetchall())  # type: ignore[arg-type]


async def fetch_one(pool: AsyncConnectionPool, query: str, params: Any = None) -> dict[str, Any] | None:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)  # type: ignore[arg-type]
        return await cur.fetchone()  # type: ignore[return-value]
