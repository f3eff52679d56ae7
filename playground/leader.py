"""One leader among the app processes on a database, for the jobs that must run in one place at a time.

The turn workers need no leader (a turn is claimed with SKIP LOCKED); the periodic jobs do: two
processes consolidating the same chat at once would race each other for nothing. Leadership is a
session advisory lock, `pg_try_advisory_lock`, taken on a connection of its own and held while the
process leads. A process that dies (or loses its connection) loses the lock with it, and the next
process to ask becomes the leader; nobody waits, nobody has to know who the others are.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psycopg

_log = logging.getLogger(__name__)

#: pg_advisory_lock's bigint key of the periodic jobs' leader: "lead" in ASCII under "play"
LEADER_LOCK_KEY = 0x706C61796C656164


class Leadership:
    """`await lead()` before each round of a periodic job: True while this process holds the lock."""

    def __init__(self, conninfo: str, key: int = LEADER_LOCK_KEY) -> None:
        self.conninfo = conninfo
        self.key = key
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self.leading = False

    async def lead(self) -> bool:
        """Take the lock if nobody holds it, check it is still held if we do; never waits."""
        try:
            if self._conn is not None and not self._conn.closed:
                if self.leading:
                    await self._conn.execute("SELECT 1")  # the lock lives as long as this session
                    return True
            else:
                self._conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            cur = await self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
            row = await cur.fetchone()
            took = bool(row and row[0])
        except psycopg.OperationalError as exc:
            _log.warning("the leader lock's connection failed: %s", exc)
            await self.close()
            return False
        if took and not self.leading:
            _log.info("this process leads the periodic jobs now")
        self.leading = took
        return took

    async def close(self) -> None:
        """Let go. The lock is released explicitly first: closing the session releases it too, but
        the server ends a closed session a moment later, and a process asking right after a graceful
        stop would still find it held (a process that dies leaves it to the server's cleanup)."""
        leading, self.leading = self.leading, False
        if self._conn is not None:
            conn, self._conn = self._conn, None
            if leading and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
            await conn.close()
