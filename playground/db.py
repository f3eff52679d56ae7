"""The playground's schema and small query helpers.

Its migrations are numbered `.sql` files in `playground/migrations/`, applied with the library's
migration runner (`memory.postgres.migrate.MigrationSet`) into the `playground` schema under their own lock.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeAlias

import psycopg
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from memory.errors import ConfigurationError
from memory.postgres.migrate import Migration, MigrationSet

# pg_advisory_lock takes a bigint; this one is "playgr" in ASCII (the library's is "beads").
MIGRATION_LOCK_KEY = 0x706C61796772

#: the app's pool (memory.postgres.connection.open_async_pool): its connections return rows as dicts
AppPool: TypeAlias = AsyncConnectionPool[psycopg.AsyncConnection[DictRow]]

PLAYGROUND_MIGRATIONS = MigrationSet("playground.migrations", "playground", MIGRATION_LOCK_KEY)

#: NOTIFY channels: a chat's new events (the payload is its id), and a turn ready to be claimed
EVENTS_CHANNEL = "playground_events"
TURNS_CHANNEL = "playground_turns"
#: a chat being deleted (the payload is its id): every process stops its turns
STOPS_CHANNEL = "playground_stops"

#: one row of the event log (playground.events)
INSERT_EVENT = """
INSERT INTO playground.events (chat_id, event_no, turn_id, seq, lane, kind, payload)
VALUES (%s, %s, %s, %s, %s, %s, %s)
"""


#: held by a starting process while it sets up every schema it uses (the library's, ours, LangGraph's
#: checkpointer and store): LangGraph's setup takes no lock, and processes starting together on a
#: fresh database (uvicorn --workers N) failed on its migrations table's primary key
SETUP_LOCK_KEY = 0x706C61797365  # "playse"


async def hold_setup_lock(conninfo: str, retry_seconds: float = 0.2) -> psycopg.AsyncConnection[Any]:
    """A connection holding the setup lock (waiting for it if another process holds it); close it
    to let go.

    It waits by trying again, never inside `pg_advisory_lock`: a statement waiting there holds a
    snapshot, which the holder's CREATE INDEX CONCURRENTLY (LangGraph's setup runs some) waits out,
    while the holder waits for its index before letting go: a deadlock Postgres cannot see, since the
    lock is held by another of the holder's connections."""
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        while True:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK_KEY,))
            row = await cur.fetchone()
            if row and row[0]:
                return conn
            await asyncio.sleep(retry_seconds)
    except BaseException:
        await conn.close()
        raise


def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with the playground, in order."""
    return PLAYGROUND_MIGRATIONS.migrations()


async def setup(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Apply every pending migration; returns the versions applied by this call (autocommit `conn`)."""
    return await PLAYGROUND_MIGRATIONS.asetup(conn)


async def fetch_all(pool: AppPool, query: str, params: Any = None) -> list[dict[str, Any]]:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)
        return list(await cur.fetchall())


async def fetch_one(pool: AppPool, query: str, params: Any = None) -> dict[str, Any] | None:
    async with pool.connection() as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchone()


def conninfo_of(pool: AsyncConnectionPool[Any]) -> str:
    """The connection string `pool` was opened on. psycopg_pool also takes a function that makes one;
    the app's pools are always opened on a string, and a dedicated connection (a listener, a lock
    holder) is opened on the same one."""
    conninfo = pool.conninfo
    if not isinstance(conninfo, str):
        raise TypeError(f"the app's pools are opened on a connection string, not {conninfo!r}")
    return conninfo


# what the server allows: its slots, those kept for superusers (and, from Postgres 16, for roles with
# pg_use_reserved_connections), and the client connections open now (less the one asking)
_CONNECTION_ROOM = """
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int
         + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int - 1 AS in_use
"""

_ADVICE = (
    "lower PLAYGROUND_WORKERS or the PLAYGROUND_*POOL_SIZE settings, or raise the server's max_connections"
)


async def check_connection_room(conninfo: str, per_process: int, processes: int) -> dict[str, int]:
    """Refuse to start (ConfigurationError, saying by how much) when this process's connections, or
    `processes` times them, cannot fit the server's max_connections; else the figures it checked.

    Without the check an oversized deployment starts fine and then fails under load, when the pools
    grow: requests wait for a connection the server refuses, then answer 503."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(_CONNECTION_ROOM)
        row = await cur.fetchone()
    assert row is not None
    room = dict(zip(("max_connections", "reserved", "in_use"), row, strict=True))
    usable = room["max_connections"] - room["reserved"]
    where = f"max_connections {room['max_connections']}, {room['reserved']} reserved"
    if processes * per_process > usable:
        raise ConfigurationError(
            f"{processes} app processes (PLAYGROUND_PROCESSES) of up to {per_process} connections each"
            f" need {processes * per_process}, more than the {usable} this server allows ({where}): {_ADVICE}"
        )
    if per_process > usable - room["in_use"]:
        raise ConfigurationError(
            f"this process may open up to {per_process} connections, but the server has"
            f" {usable - room['in_use']} left ({where}, {room['in_use']} in use): {_ADVICE}"
        )
    return room
