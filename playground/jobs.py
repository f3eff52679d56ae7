"""The turn job: every statement that moves a turn through its life, in one place.

The turn row is the job. Its life, and the function for each step:

- `submit_message`: the user's message, the turn and its first event are inserted in one
  transaction, under the chat's row lock; a unique (chat, idempotency key) turns a double submit
  into the same turn;
- `claim`: `FOR UPDATE SKIP LOCKED` on the oldest turn whose chat has nothing earlier unfinished,
  so one chat runs one turn at a time, in order, while other chats run in parallel, and two
  claimers (in one process or many) never take the same turn;
- `renew`: a claimed turn carries its worker's id and a lease the worker renews. A turn is
  claimable again when its lease lapses, or at once when its worker is gone: each worker holds a
  session advisory lock (`LIVENESS_LOCK_CLASS`, its `lease_key`) for its lifetime, and a killed
  process's connections (and so its lock) vanish;
- `take_seq`: the fence on every write of the turn's event log: no numbers come back once another
  worker owns the turn;
- `lane_done` / `finish` / `hand_back`: statements the event writer runs in the transaction of the
  lane's or turn's final event (a lane's status and reply; the turn done; the turn queued again);
- `release`: a worker that stops on purpose hands its turns back at once, not after the lease;
- `stop_everywhere` / `held_turns`: a chat being deleted asks every process to stop its turns, and
  waits until no live worker holds one.

The turn worker (`playground.turn_worker`) and the event writer (`playground.events`) call these; nothing
else writes a turn's status or lease.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from playground.db import EVENTS_CHANNEL, INSERT_EVENT, STOPS_CHANNEL, TURNS_CHANNEL, AppPool

#: the first key of every worker's liveness lock (pg_advisory_lock(int, int)); "play" in ASCII
LIVENESS_LOCK_CLASS = 0x706C6179

AsyncConn = psycopg.AsyncConnection[Any]
LaneName = Literal["stock", "beads"]


@dataclass(frozen=True, slots=True)
class Submitted:
    turn_id: uuid.UUID
    turn_no: int
    created: bool  # False: the idempotency key had already made this turn


@dataclass(frozen=True, slots=True)
class ClaimedTurn:
    id: uuid.UUID
    chat_id: uuid.UUID
    session_id: str
    turn_no: int
    attempts: int
    stock_status: str
    beads_status: str
    stock_thread_id: str
    beads_thread_id: str

    def lane_status(self, lane: str) -> str:
        return self.stock_status if lane == "stock" else self.beads_status

    def thread_id(self, lane: str) -> str:
        return self.stock_thread_id if lane == "stock" else self.beads_thread_id


# -- submit --------------------------------------------------------------------------------------


async def submit_message(
    pool: AppPool, chat_id: uuid.UUID, text: str, idempotency_key: str
) -> Submitted | None:
    """Queue a turn for `text`; None if the chat does not exist (or is being deleted)."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "SELECT id FROM playground.chats WHERE id = %s AND deleted_at IS NULL FOR UPDATE", (chat_id,)
        )
        if await cur.fetchone() is None:
            return None
        cur = await conn.execute(
            "SELECT id, turn_no FROM playground.turn_worker WHERE chat_id = %s AND idempotency_key = %s",
            (chat_id, idempotency_key),
        )
        existing = await cur.fetchone()
        if existing is not None:
            return Submitted(existing["id"], existing["turn_no"], created=False)
        cur = await conn.execute(
            "UPDATE playground.chats SET last_turn_no = last_turn_no + 1, last_event_no = last_event_no + 1,"
            " updated_at = now() WHERE id = %s RETURNING last_turn_no, last_event_no",
            (chat_id,),
        )
        numbers = await cur.fetchone()
        assert numbers is not None  # the chat's row, locked above
        turn_id, turn_no = uuid.uuid4(), numbers["last_turn_no"]
        await conn.execute(
            "INSERT INTO playground.turn_worker (id, chat_id, turn_no, idempotency_key, stock_thread_id,"
            " beads_thread_id, last_seq) VALUES (%s, %s, %s, %s, %s, %s, 1)",
            (turn_id, chat_id, turn_no, idempotency_key, str(uuid.uuid4()), str(uuid.uuid4())),
        )
        await conn.execute(
            "INSERT INTO playground.messages (turn_id, chat_id, author, body) VALUES (%s, %s, 'user', %s)",
            (turn_id, chat_id, text),
        )
        payload = Jsonb({"text": text, "turn_no": turn_no})
        await conn.execute(
            INSERT_EVENT, (chat_id, numbers["last_event_no"], turn_id, 1, "turn", "turn", payload)
        )
        await conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, str(chat_id)))
        await conn.execute("SELECT pg_notify(%s, '')", (TURNS_CHANNEL,))
    return Submitted(turn_id, turn_no, created=True)


# -- claim, renew, release -----------------------------------------------------------------------

# Each condition of the candidate scan, in order: the chat still exists; the turn is waiting, or its
# lease lapsed, or the worker that holds it no longer holds its liveness lock (it died); and nothing
# earlier in the same chat is unfinished. SKIP LOCKED lets two claimers pass each other.
# started_at is clock_timestamp(), read after the statement's snapshot: now() is when the transaction
# began (for a lone statement, when the server read its Parse), which can come before the commit of
# the previous turn's finish that the snapshot sees, so a turn could be recorded as starting first.
_CLAIM = """
WITH candidate AS (
    SELECT t.id FROM playground.turn_worker t
      JOIN playground.chats c ON c.id = t.chat_id AND c.deleted_at IS NULL
     WHERE t.status <> 'done'
       AND (t.status = 'queued'
            OR t.lease_expires_at < now()
            OR NOT EXISTS (
                SELECT 1 FROM pg_locks l
                 WHERE l.locktype = 'advisory' AND l.granted
                   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND l.classid = %(lock_class)s::oid AND l.objid = t.lease_key::oid AND l.objsubid = 2))
       AND NOT EXISTS (
            SELECT 1 FROM playground.turn_worker e
             WHERE e.chat_id = t.chat_id AND e.turn_no < t.turn_no AND e.status <> 'done')
       AND t.id <> ALL(%(mine)s::uuid[])
     ORDER BY t.created_at, t.turn_no
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED
)
UPDATE playground.turn_worker t
   SET status = 'running', attempts = t.attempts + 1, lease_owner = %(owner)s, lease_key = %(key)s,
       lease_expires_at = now() + make_interval(secs => %(lease)s),
       started_at = coalesce(t.started_at, clock_timestamp())
  FROM candidate, playground.chats c
 WHERE t.id = candidate.id AND c.id = t.chat_id
RETURNING t.id, t.chat_id, c.session_id, t.turn_no, t.attempts, t.stock_status, t.beads_status,
          t.stock_thread_id, t.beads_thread_id
"""
_RENEW = """
UPDATE playground.turn_worker SET lease_expires_at = now() + make_interval(secs => %s)
 WHERE id = %s AND lease_owner = %s AND status = 'running'
RETURNING id
"""
_RELEASE = """
UPDATE playground.turn_worker SET status = 'queued', lease_owner = NULL, lease_key = NULL, lease_expires_at = NULL
 WHERE lease_owner = %s AND status = 'running'
"""


async def claim(
    pool: AppPool,
    owner: uuid.UUID,
    lock_key: int,
    lease_seconds: float,
    running: list[uuid.UUID],
) -> ClaimedTurn | None:
    """The next runnable turn, leased to `owner` (whose liveness lock is `lock_key`), or None;
    never one of `running` (the turns this worker runs already)."""
    params = {
        "owner": owner,
        "key": lock_key,
        "lease": lease_seconds,
        "lock_class": LIVENESS_LOCK_CLASS,
        "mine": running,
    }
    async with pool.connection() as conn:
        cur = await conn.execute(_CLAIM, params)
        row = await cur.fetchone()
    return ClaimedTurn(**row) if row else None


async def hold_liveness(conn: AsyncConn, lock_key: int) -> None:
    """Take the worker's liveness lock on `conn` (a dedicated connection, held for the worker's life)."""
    await conn.execute("SELECT pg_advisory_lock(%s, %s)", (LIVENESS_LOCK_CLASS, lock_key))


async def renew(pool: AppPool, turn_id: uuid.UUID, owner: uuid.UUID, lease_seconds: float) -> bool:
    """Extend the lease; False if `owner` no longer holds the turn (another worker took it over)."""
    async with pool.connection() as conn:
        cur = await conn.execute(_RENEW, (lease_seconds, turn_id, owner))
        return await cur.fetchone() is not None


async def release(pool: AppPool, owner: uuid.UUID) -> None:
    """Queue every turn `owner` is running again, at once (a worker stopping on purpose)."""
    async with pool.connection() as conn:
        await conn.execute(_RELEASE, (owner,))
        await conn.execute("SELECT pg_notify(%s, '')", (TURNS_CHANNEL,))  # another process takes them


_RELEASE_TURNS = """
UPDATE playground.turn_worker SET status = 'queued', lease_owner = NULL, lease_key = NULL, lease_expires_at = NULL
 WHERE lease_owner = %s AND status = 'running' AND id = ANY(%s::uuid[])
"""
# running turns of a chat whose lease holds and whose worker is alive (the claim's test, inverted)
_HELD = """
SELECT count(*) AS held FROM playground.turn_worker t
 WHERE t.chat_id = %(chat)s AND t.status = 'running' AND t.lease_expires_at >= now()
   AND EXISTS (
        SELECT 1 FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.classid = %(lock_class)s::oid AND l.objid = t.lease_key::oid AND l.objsubid = 2)
"""


async def release_turns(pool: AppPool, owner: uuid.UUID, turn_ids: list[uuid.UUID]) -> None:
    """Queue these turns of `owner` again (their chat is being deleted: nobody claims them)."""
    async with pool.connection() as conn:
        await conn.execute(_RELEASE_TURNS, (owner, turn_ids))


async def stop_everywhere(pool: AppPool, chat_id: uuid.UUID) -> None:
    """Ask every app process on the database to stop the chat's running turns."""
    async with pool.connection() as conn:
        await conn.execute("SELECT pg_notify(%s, %s)", (STOPS_CHANNEL, str(chat_id)))


async def held_turns(pool: AppPool, chat_id: uuid.UUID) -> int:
    """How many of the chat's turns a live worker (in any process) is running now."""
    async with pool.connection() as conn:
        cur = await conn.execute(_HELD, {"chat": chat_id, "lock_class": LIVENESS_LOCK_CLASS})
        row = await cur.fetchone()
    return int(row["held"]) if row else 0


# -- inside a turn's write transactions ----------------------------------------------------------

# The fence and the numbering in one statement: the row lock taken here serialises the turn's
# writers, so numbers are handed out in commit order.
_TAKE_SEQ = """
UPDATE playground.turn_worker SET last_seq = last_seq + %(n)s
 WHERE id = %(turn)s AND lease_owner = %(owner)s AND status = 'running'
RETURNING last_seq
"""
_LANE_STATUS = {
    "stock": "UPDATE playground.turn_worker SET stock_status = %s WHERE id = %s",
    "beads": "UPDATE playground.turn_worker SET beads_status = %s WHERE id = %s",
}
_SAVE_REPLY = """
INSERT INTO playground.messages (turn_id, chat_id, author, body) VALUES (%s, %s, %s, %s)
ON CONFLICT (turn_id, author) DO NOTHING
"""
_FINISH = """
UPDATE playground.turn_worker
   SET status = 'done', finished_at = clock_timestamp(), lease_owner = NULL, lease_key = NULL, lease_expires_at = NULL
 WHERE id = %s
"""
_HAND_BACK = """
UPDATE playground.turn_worker SET status = 'queued', lease_owner = NULL, lease_key = NULL, lease_expires_at = NULL
 WHERE id = %s
"""


async def take_seq(conn: AsyncConn, turn_id: uuid.UUID, owner: uuid.UUID, n: int) -> int | None:
    """Reserve `n` event numbers of the turn (the last one comes back), or None if `owner` lost it."""
    cur = await conn.execute(_TAKE_SEQ, {"n": n, "turn": turn_id, "owner": owner})
    row = await cur.fetchone()
    return None if row is None else int(row["last_seq"])


async def lane_done(
    conn: AsyncConn,
    turn_id: uuid.UUID,
    chat_id: uuid.UUID,
    lane: LaneName,
    status: Literal["done", "error"],
    reply: str | None,
) -> None:
    """A lane's status, and its reply when it has one."""
    await conn.execute(_LANE_STATUS[lane], (status, turn_id))
    if reply is not None:
        await conn.execute(_SAVE_REPLY, (turn_id, chat_id, lane, reply))


async def finish(conn: AsyncConn, turn_id: uuid.UUID) -> None:
    """The turn done, its lease released."""
    await conn.execute(_FINISH, (turn_id,))


async def hand_back(conn: AsyncConn, turn_id: uuid.UUID) -> None:
    """The turn queued again, and every worker woken to claim it."""
    await conn.execute(_HAND_BACK, (turn_id,))
    await conn.execute("SELECT pg_notify(%s, '')", (TURNS_CHANNEL,))


# -- reads ---------------------------------------------------------------------------------------


async def is_finished(pool: AppPool, turn_id: uuid.UUID) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT status = 'done' AS done FROM playground.turn_worker WHERE id = %s", (turn_id,)
        )
        row = await cur.fetchone()
    return bool(row and row["done"])


async def in_chat(pool: AppPool, chat_id: uuid.UUID, turn_id: uuid.UUID) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT 1 FROM playground.turn_worker WHERE id = %s AND chat_id = %s", (turn_id, chat_id)
        )
        return await cur.fetchone() is not None


async def user_text(pool: AppPool, turn_id: uuid.UUID) -> str:
    """The message the turn answers."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT body FROM playground.messages WHERE turn_id = %s AND author = 'user'", (turn_id,)
        )
        row = await cur.fetchone()
    return row["body"] if row else ""


# chats with no turn queued or running (and not being deleted), newest first; or just `session`
_IDLE_SESSIONS = """
SELECT c.session_id FROM playground.chats c
 WHERE c.deleted_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM playground.turn_worker t WHERE t.chat_id = c.id AND t.status <> 'done')
   AND (%(session)s::text IS NULL OR c.session_id = %(session)s)
 ORDER BY c.updated_at DESC
"""


async def idle_sessions(pool: AppPool, session: str | None = None) -> list[str]:
    """The sessions of chats with no unfinished turn (only `session`, if given and idle)."""
    async with pool.connection() as conn:
        cur = await conn.execute(_IDLE_SESSIONS, {"session": session})
        return [row["session_id"] for row in await cur.fetchall()]
