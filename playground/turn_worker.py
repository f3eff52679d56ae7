"""The turn worker: claims turns from Postgres and runs them inside the app process.

Why not a job library. procrastinate is psycopg-native and has per-key locks, and since 3.8 it can
defer on a caller's connection, so the message and its job could share a transaction. It still
keeps its own job row beside ours: the turn's state (per-lane status, thread ids, lease, event
numbering) would live in two tables that must agree, its schema is installed by its own tooling
rather than our numbered migrations, and a reclaimed stalled job is something we would have to
wire up anyway. What a turn needs is a few statements on one row; they are in `playground.jobs`
(submit, claim, renew, release, finish, hand back). This module is the loop around them: a
liveness lock held for the worker's life, claims up to `concurrency` turns, a lease renewed while
each runs. The restarted turn resumes each unfinished lane from its LangGraph checkpoint (see
turn_runner).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import psycopg

from playground import jobs
from playground.db import AppPool, conninfo_of
from playground.events import EventWriter, Hub, LeaseLostError
from playground.jobs import ClaimedTurn
from playground.waits import cancel_and_wait, wait_up_to

_log = logging.getLogger(__name__)

#: the `interrupted` event of a turn cut off by its process stopping (SIGTERM, Ctrl+C)
STOPPED_MESSAGE = "The server process running this turn stopped; the turn goes on from its last checkpoint."

#: runs one claimed turn; a coroutine function, since each turn is scheduled as its own task
TurnRunner = Callable[[ClaimedTurn, uuid.UUID], Coroutine[Any, Any, None]]


class TurnWorker:
    """Claims turns and runs up to `concurrency` of them at once (never two of one chat)."""

    def __init__(
        self,
        pool: AppPool,
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
        conn = await psycopg.AsyncConnection.connect(conninfo_of(self.pool), autocommit=True)
        await jobs.hold_liveness(conn, self.lock_key)
        self._liveness, self._liveness_checked = conn, time.monotonic()
        if previous is not None and self.on_reconnect is not None:
            await self.on_reconnect()

    async def stop(self) -> None:
        if self._loop_task is not None:
            await cancel_and_wait(self._loop_task)
        running = [(turn_id, chat_id, task) for turn_id, (chat_id, task) in self._running.items()]
        for _, _, task in running:
            task.cancel()
        await asyncio.gather(*(task for _, _, task in running), return_exceptions=True)
        # each turn cut off goes back to the queue at once, with an event saying why (another process,
        # or the next start, resumes it from its checkpoints); what could not be handed back so, is
        # released below, and a turn neither reaches is reclaimed when this worker's lock is gone
        for turn_id, chat_id, _ in running:
            with contextlib.suppress(psycopg.Error, LeaseLostError):
                async with EventWriter(self.pool, turn_id, chat_id, self.owner) as writer:
                    await writer.hand_back(STOPPED_MESSAGE)
        with contextlib.suppress(psycopg.Error):
            await jobs.release(self.pool, self.owner)
        if self._liveness is not None:
            await self._liveness.close()

    async def stop_chat(self, chat_id: uuid.UUID) -> None:
        """Cancel this chat's running turns here, and never start another of its turns."""
        self._stopped_chats.add(chat_id)
        mine = [(turn_id, task) for turn_id, (chat, task) in self._running.items() if chat == chat_id]
        for _, task in mine:
            task.cancel()
        await asyncio.gather(*(task for _, task in mine), return_exceptions=True)
        if mine:  # let go of them, so a process waiting to delete the chat sees them stopped
            with contextlib.suppress(psycopg.Error):
                await jobs.release_turns(self.pool, self.owner, [turn_id for turn_id, _ in mine])

    async def stop_chat_everywhere(self, chat_id: uuid.UUID) -> None:
        """Stop the chat's turns here and in every other process on the database, and wait until no
        live worker runs one (at most a lease: by then a silent holder's lease has lapsed)."""
        await self.stop_chat(chat_id)
        await jobs.stop_everywhere(self.pool, chat_id)
        deadline = time.monotonic() + self.lease_seconds
        while await jobs.held_turns(self.pool, chat_id) and time.monotonic() < deadline:
            await asyncio.sleep(min(self.poll_seconds, 0.1))

    @property
    def busy(self) -> int:
        return len(self._running)

    async def claim(self) -> ClaimedTurn | None:
        return await jobs.claim(self.pool, self.owner, self.lock_key, self.lease_seconds, list(self._running))

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
            await wait_up_to(self.poll_seconds, self.hub.turns_ready.wait())

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
                held = await jobs.renew(self.pool, turn.id, self.owner, self.lease_seconds)
            except psycopg.Error as exc:
                _log.warning("renewing the lease of turn %s failed: %s", turn.id, exc)
                continue
            if not held:  # another worker took it over: stop writing to it
                work.cancel()
                return
