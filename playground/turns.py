"""Turns are jobs in Postgres: the turn row is the job, and the workers run inside the app process.

Why not a job library. procrastinate is psycopg-native and has per-key locks, and since 3.8 it can
defer on a caller's connection, so the message and its job could share a transaction. It still
keeps its own job row beside ours: the turn's state (per-lane status, thread ids, lease, event
numbering) would live in two tables that must agree, its schema is installed by its own tooling
rather than our numbered migrations, and a reclaimed stalled job is something we would have to
wire up anyway. What a turn needs is a few statements on one row:

- submit: the user's message, the turn and its first event are inserted in one transaction, under
  the chat's row lock; a unique (chat, idempotency key) turns a double submit into the same turn;
- claim: `FOR UPDATE SKIP LOCKED` on the oldest turn whose chat has nothing earlier unfinished,
  so one chat runs one turn at a time, in order, while other chats run in parallel;
- lease: a claimed turn carries its worker's id and a lease the worker renews. A turn is claimable
  again when its lease lapses, or at once when its worker is gone: each worker holds a session
  advisory lock for its lifetime, and a killed process's connections (and so its lock) vanish.
  The restarted turn resumes each unfinished lane from its LangGraph checkpoint (see lanes_runner).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from playground.events import EVENTS_CHANNEL, INSERT_EVENT, TURNS_CHANNEL, Hub

_log = logging.getLogger(__name__)

#: the first key of every worker's liveness lock (pg_advisory_lock(int, int)); "play" in ASCII
LIVENESS_LOCK_CLASS = 0x706C6179


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


async def submit_message(
    pool: AsyncConnectionPool, chat_id: uuid.UUID, text: str, idempotency_key: str
) -> Submitted | None:
    """Queue a turn for `text`; None if the chat does not exist (or is being deleted)."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "SELECT id FROM playground.chats WHERE id = %s AND deleted_at IS NULL FOR UPDATE", (chat_id,)
        )
        if await cur.fetchone() is None:
            return None
        cur = await conn.execute(
            "SELECT id, turn_no FROM playground.turns WHERE chat_id = %s AND idempotency_key = %s",
            (chat_id, idempotency_key),
        )
        existing = await cur.fetchone()
        if existing is not None:
            return Submitted(existing["id"], existing["turn_no"], created=False)  # type: ignore[call-overload]
        cur = await conn.execute(
            "UPDATE playground.chats SET last_turn_no = last_turn_no + 1, last_event_no = last_event_no + 1,"
            " updated_at = now() WHERE id = %s RETURNING last_turn_no, last_event_no",
            (chat_id,),
        )
        numbers = await cur.fetchone()
        turn_id, turn_no = uuid.uuid4(), numbers["last_turn_no"]  # type: ignore[index]
        await conn.execute(
            "INSERT INTO playground.turns (id, chat_id, turn_no, idempotency_key, stock_thread_id,"
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
        )  # type: ignore[index]
        await conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, str(chat_id)))
        await conn.execute("SELECT pg_notify(%s, '')", (TURNS_CHANNEL,))
    return Submitted(turn_id, turn_no, created=True)


# Each condition of the candidate scan, in order: the chat still exists; the turn is waiting, or its
# lease lapsed, or the worker that holds it no longer holds its liveness lock (it died); and nothing
# earlier in the same chat is unfinished. SKIP LOCKED lets two claimers pass each other.
_CLAIM = """
WITH candidate AS (
    SELECT t.id FROM playground.turns t
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
            SELECT 1 FROM playground.turns e
             WHERE e.chat_id = t.chat_id AND e.turn_no < t.turn_no AND e.status <> 'done')
       AND t.id <> ALL(%(mine)s::uuid[])
     ORDER BY t.created_at, t.turn_no
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED
)
UPDATE playground.turns t
   SET status = 'running', attempts = t.attempts + 1, lease_owner = %(owner)s, lease_key = %(key)s,
       lease_expires_at = now() + make_interval(secs => %(lease)s), started_at = coalesce(t.started_at, now())
  FROM candidate, playground.chats c
 WHERE t.id = candidate.id AND c.id = t.chat_id
RETURNING t.id, t.chat_id, c.session_id, t.turn_no, t.attempts, t.stock_status, t.beads_status,
          t.stock_thread_id, t.beads_thread_id
"""
_RENEW = """
UPDATE playground.turns SET lease_expires_at = now() + make_interval(secs => %s)
 WHERE id = %s AND lease_owner = %s AND status = 'running'
RETURNING id
"""
# A worker that stops on purpose hands its turns back at once rather than waiting out the lease.
_RELEASE = """
UPDATE playground.turns SET status = 'queued', lease_owner = NULL, lease_key = NULL, lease_expires_at = NULL
 WHERE lease_owner = %s AND status = 'running'
"""

TurnRunner = Callable[[ClaimedTurn, uuid.UUID], Awaitable[None]]


class TurnWorker:
    """Claims turns and runs up to `concurrency` of them at once (never two of one chat)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        hub: Hub,
        run: TurnRunner,
        *,
        concurrency: int = 4,
        lease_seconds: float = 30.0,
        poll_seconds: float = 1.0,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.pool = pool
        self.hub = hub
        self.run = run
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        #: called after the liveness lock was taken again (the database came back): refresh the pools
        self.on_reconnect = on_reconnect
        self.owner = uuid.uuid4()
        self.lock_key = secrets.randbelow(2**31 - 1) + 1
        self._running: dict[uuid.UUID, tuple[uuid.UUID, asyncio.Task[None]]] = {}
        self._stopped_chats: set[uuid.UUID] = set()
        self._liveness: psycopg.AsyncConnection[Any] | None = None
        self._liveness_checked = 0.0
        self._loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._hold_liveness()
        self._loop_task = asyncio.create_task(self._claim_forever())

    async def _hold_liveness(self) -> None:
        """Hold this worker's liveness lock, taking it again if its connection died with a database
        restart: without it every turn this worker runs looks abandoned to every claimer."""
        previous = self._liveness
        if previous is not None and not previous.closed:
            if time.monotonic() - self._liveness_checked < self.poll_seconds:
                return
            try:
                await previous.execute("SELECT 1")
                self._liveness_checked = time.monotonic()
                return
            except psycopg.OperationalError:
                await previous.close()
        conn = await psycopg.AsyncConnection.connect(self.pool.conninfo, autocommit=True)
        await conn.execute("SELECT pg_advisory_lock(%s, %s)", (LIVENESS_LOCK_CLASS, self.lock_key))
        self._liveness, self._liveness_checked = conn, time.monotonic()
        if previous is not None and self.on_reconnect is not None:
            await self.on_reconnect()

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(psycopg.Error):
            async with self.pool.connection() as conn:
                await conn.execute(_RELEASE, (self.owner,))
        if self._liveness is not None:
            await self._liveness.close()

    async def stop_chat(self, chat_id: uuid.UUID) -> None:
        """Cancel this chat's running turns here, and never start another of its turns."""
        self._stopped_chats.add(chat_id)
        tasks = [task for chat, task in self._running.values() if chat == chat_id]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def busy(self) -> int:
        return len(self._running)

    async def claim(self) -> ClaimedTurn | None:
        params = {
            "owner": self.owner,
            "key": self.lock_key,
            "lease": self.lease_seconds,
            "lock_class": LIVENESS_LOCK_CLASS,
            "mine": list(self._running),  # never a turn this worker is running already
        }
        async with self.pool.connection() as conn:
            cur = await conn.execute(_CLAIM, params)
            row = await cur.fetchone()
        return ClaimedTurn(**row) if row else None  # type: ignore[arg-type]

    async def _claim_forever(self) -> None:
        while True:
            self.hub.turns_ready.clear()
            try:
                await self._hold_liveness()
                while len(self._running) < self.concurrency:
                    turn = await self.claim()
                    if turn is None:
                        break
                    self._start(turn)
            except psycopg.Error as exc:
                _log.warning("claiming a turn failed, retrying: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.hub.turns_ready.wait(), timeout=self.poll_seconds)

    def _start(self, turn: ClaimedTurn) -> None:
        # no await between the claim and this check: stop_chat sees the task or we see its mark
        if turn.chat_id in self._stopped_chats:
            return
        task = asyncio.create_task(self._run_leased(turn), name=f"turn-{turn.id}")
        self._running[turn.id] = (turn.chat_id, task)

    async def _run_leased(self, turn: ClaimedTurn) -> None:
        work = asyncio.create_task(self.run(turn, self.owner))
        renew = asyncio.create_task(self._renew(turn, work))
        try:
            await work
        except asyncio.CancelledError:
            work.cancel()
            await asyncio.wait([work])  # let the lanes unwind before whoever cancelled us goes on
            raise
        except Exception:
            _log.exception("turn %s failed outside its lanes", turn.id)
        finally:
            renew.cancel()
            self._running.pop(turn.id, None)
            self.hub.turns_ready.set()  # a slot is free, and the chat's next turn may be ready

    async def _renew(self, turn: ClaimedTurn, work: asyncio.Task[None]) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                async with self.pool.connection() as conn:
                    cur = await conn.execute(_RENEW, (self.lease_seconds, turn.id, self.owner))
                    held = await cur.fetchone()
            except psycopg.Error as exc:
                _log.warning("renewing the lease of turn %s failed: %s", turn.id, exc)
                continue
            if held is None:  # another worker took it over: stop writing to it
                work.cancel()
                return
