"""The per-turn event log, its writer, and the SSE streams that replay it and follow it live.

Every event of a turn (the user's message, tokens, tool calls and results, injected facts, usage,
done, error) is a row in `playground.events` with two exact numbers: `seq`, its place in the turn,
and `event_no`, its place in the chat. Both are handed out under row locks (the turn's, then the
chat's) in the transaction that inserts the rows, so numbers are dense and every row becomes visible
in number order: a reader that has seen event N has seen everything before it. A stream replays the
rows after the client's last id, then follows new ones. Postgres NOTIFY wakes it up; a slow poll
covers a lost notification. A subscriber's queue holds wake-ups, never data, so a full queue loses
nothing: the next read catches up from the log.

Tokens are not written one transaction each: the writer buffers events and flushes them in order
every `token_flush_ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb
from sse_starlette import ServerSentEvent

from playground import jobs
from playground.db import EVENTS_CHANNEL, INSERT_EVENT, STOPS_CHANNEL, TURNS_CHANNEL, AppPool
from playground.waits import cancel_and_wait, wait_up_to

_log = logging.getLogger(__name__)

LANES = ("stock", "beads")
Lane = Literal["turn", "stock", "beads"]
#: rows read from the log per query while replaying
REPLAY_BATCH = 500


class LeaseLostError(Exception):
    """Another worker holds this turn now: this one must stop writing to it."""


@dataclass(frozen=True, slots=True)
class EventRow:
    chat_id: uuid.UUID
    event_no: int
    turn_id: uuid.UUID
    seq: int
    lane: str
    kind: str
    payload: dict[str, Any]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EventRow:
        return cls(**{f: row[f] for f in cls.__slots__})


# -- writing -------------------------------------------------------------------------------------

# The chat's numbering (the turn's own, and the fence, is jobs.take_seq): the chat's row lock
# serialises its writers, so numbers are handed out in commit order.
_TAKE_EVENT_NO = """
UPDATE playground.chats SET last_event_no = last_event_no + %(n)s, updated_at = now()
 WHERE id = %(chat)s
RETURNING last_event_no
"""
#: a step of the turn job (playground.jobs) run in the transaction of the events before it
JobStep = Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]


class EventWriter:
    """Appends one turn's events in order; both lanes share it. Use as an async context manager."""

    def __init__(
        self,
        pool: AppPool,
        turn_id: uuid.UUID,
        chat_id: uuid.UUID,
        owner: uuid.UUID,
        flush_seconds: float = 0.05,
    ) -> None:
        self.pool = pool
        self.turn_id = turn_id
        self.chat_id = chat_id
        self.owner = owner
        self.flush_seconds = flush_seconds
        self._buffer: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    async def __aenter__(self) -> EventWriter:
        self._flusher = asyncio.create_task(self._flush_periodically())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._flusher is not None:
            await cancel_and_wait(self._flusher)
        if exc[0] is None:
            await self.flush()

    def emit(self, lane: Lane, kind: str, payload: dict[str, Any] | None = None) -> None:
        """Queue an event; it is numbered and written at the next flush, in the order emitted."""
        if self._failure is not None:
            raise self._failure
        self._buffer.append((lane, kind, payload or {}))

    async def flush(self) -> None:
        await self._write(None)

    async def finish_lane(
        self,
        lane: Literal["stock", "beads"],
        status: Literal["done", "error"],
        kind: str,
        payload: dict[str, Any],
    ) -> None:
        """The lane's last event, its status and its final reply, in one transaction with what is pending."""
        reply = payload.get("text") if status == "done" else None
        reply = reply if isinstance(reply, str) else None
        await self._write(
            lambda conn: jobs.lane_done(conn, self.turn_id, self.chat_id, lane, status, reply),
            (lane, kind, payload),
        )

    async def finish_turn(self) -> None:
        """The turn's `turn_done` event, and the turn marked done (its lease released), together."""
        await self._write(lambda conn: jobs.finish(conn, self.turn_id), ("turn", "turn_done", {}))

    async def hand_back(self, message: str) -> None:
        """This attempt cannot go on (the database went away): log what it had emitted and why it
        stopped, and put the turn back in the queue, in one transaction."""
        self.emit("turn", "interrupted", {"message": message})
        await self._write(lambda conn: jobs.hand_back(conn, self.turn_id))

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.flush_seconds)
            if not self._buffer:
                continue
            try:
                await self.flush()
            except psycopg.OperationalError as exc:  # the database blinked: keep the batch, try again
                _log.warning("event flush for turn %s failed, retrying: %s", self.turn_id, exc)
            except (LeaseLostError, psycopg.Error) as exc:  # the next emit or flush raises it in the lane
                self._failure = exc
                return

    async def _write(
        self, then: JobStep | None, final: tuple[str, str, dict[str, Any]] | None = None
    ) -> None:
        """Write what is pending, then `final` and `then` in the same transaction. A final event joins
        the batch only here, under the lock: left in the shared buffer while its writer waited (or was
        cancelled waiting), another write (the hand-back after an outage) would log the lane `done`
        without its status, and the next attempt would finish the lane and log it again."""
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            pending, self._buffer = self._buffer, []
            try:
                await self._insert(pending if final is None else [*pending, final], then)
            except BaseException:
                # nothing was committed: keep the order for the next try, but not the final event,
                # which goes with its status or not at all (whoever finishes the lane or turn writes it)
                self._buffer[:0] = pending
                raise

    async def _insert(self, batch: list[tuple[str, str, dict[str, Any]]], then: JobStep | None) -> None:
        if not batch and then is None:
            return
        n = len(batch)
        async with self.pool.connection() as conn, conn.transaction():
            last_seq = await jobs.take_seq(conn, self.turn_id, self.owner, n)
            if last_seq is None:
                raise LeaseLostError()
            if n:
                cur = await conn.execute(_TAKE_EVENT_NO, {"n": n, "chat": self.chat_id})
                last_no = (await cur.fetchone())["last_event_no"]  # type: ignore[index]
                rows = [
                    (
                        self.chat_id,
                        last_no - n + 1 + i,
                        self.turn_id,
                        last_seq - n + 1 + i,
                        lane,
                        kind,
                        Jsonb(p),
                    )
                    for i, (lane, kind, p) in enumerate(batch)
                ]
                async with conn.cursor() as insert:
                    await insert.executemany(INSERT_EVENT, rows)
            if then is not None:
                await then(conn)
            await conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, str(self.chat_id)))


# -- following -----------------------------------------------------------------------------------


class Hub:
    """One LISTEN connection per process: wakes SSE subscribers per chat and the turn worker, and
    passes on a chat's stop (it is being deleted, maybe through another process) to `on_chat_stop`.

    NOTIFY reaches every process listening on the database, so a subscriber in one process wakes
    for events another process wrote."""

    def __init__(self, conninfo: str, poll_seconds: float = 1.0) -> None:
        self.conninfo = conninfo
        self.poll_seconds = poll_seconds
        self.turns_ready = asyncio.Event()
        self._subscribers: dict[str, set[asyncio.Queue[None]]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        self.on_chat_stop: Callable[[uuid.UUID], Coroutine[Any, Any, None]] | None = None
        self._stopping: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen_forever())
        # a subscriber that connects before LISTEN runs still catches up by polling; wait briefly anyway
        await wait_up_to(5, self.listening.wait())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    def subscribe(self, chat_id: uuid.UUID, maxsize: int) -> asyncio.Queue[None]:
        queue: asyncio.Queue[None] = asyncio.Queue(maxsize=maxsize)
        self._subscribers[str(chat_id)].add(queue)
        return queue

    def unsubscribe(self, chat_id: uuid.UUID, queue: asyncio.Queue[None]) -> None:
        subscribers = self._subscribers.get(str(chat_id))
        if subscribers is not None:
            subscribers.discard(queue)
            if not subscribers:
                del self._subscribers[str(chat_id)]

    def wake(self, chat_id: str) -> None:
        for queue in list(self._subscribers.get(chat_id, ())):
            with contextlib.suppress(asyncio.QueueFull):  # it already has a wake-up pending: enough
                queue.put_nowait(None)

    def _chat_stopped(self, chat_id: str) -> None:
        if self.on_chat_stop is None:
            return
        with contextlib.suppress(ValueError):
            task = asyncio.create_task(self.on_chat_stop(uuid.UUID(chat_id)))
            self._stopping.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._stopping.discard)

    async def _listen_forever(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    await conn.execute(f"LISTEN {TURNS_CHANNEL}")
                    await conn.execute(f"LISTEN {STOPS_CHANNEL}")
                    self.listening.set()
                    async for note in conn.notifies():
                        if note.channel == TURNS_CHANNEL:
                            self.turns_ready.set()
                        elif note.channel == STOPS_CHANNEL:
                            self._chat_stopped(note.payload)
                        else:
                            self.wake(note.payload)
            except psycopg.OperationalError as exc:
                self.listening.clear()
                _log.warning("LISTEN connection lost (%s); subscribers poll until it is back", exc)
                await asyncio.sleep(self.poll_seconds)


_CHAT_AFTER = """
SELECT chat_id, event_no, turn_id, seq, lane, kind, payload FROM playground.events
 WHERE chat_id = %s AND event_no > %s ORDER BY event_no LIMIT %s
"""
_TURN_AFTER = """
SELECT chat_id, event_no, turn_id, seq, lane, kind, payload FROM playground.events
 WHERE turn_id = %s AND seq > %s ORDER BY seq LIMIT %s
"""


@dataclass(frozen=True, slots=True)
class StreamScope:
    """A chat's stream (ids are event numbers; it never ends) or one turn's (ids are seqs; it ends
    after `turn_done`)."""

    chat_id: uuid.UUID
    turn_id: uuid.UUID | None = None

    def cursor(self, event: EventRow) -> int:
        return event.seq if self.turn_id is not None else event.event_no


Renderer = Callable[[EventRow], Awaitable[str]]


#: what a stream says (once) while the database is unreachable; it goes on when the database is back
DATABASE_UNREACHABLE = "The database is unreachable; this stream resumes where it was when it is back."


async def read_after(
    pool: AppPool, scope: StreamScope, after: int, timeout: float | None = None
) -> list[EventRow]:
    query, key = (_TURN_AFTER, scope.turn_id) if scope.turn_id is not None else (_CHAT_AFTER, scope.chat_id)
    async with pool.connection(timeout=timeout) as conn:
        cur = await conn.execute(query, (key, after, REPLAY_BATCH))
        return [EventRow.from_row(r) for r in await cur.fetchall()]


async def event_stream(
    pool: AppPool,
    hub: Hub,
    scope: StreamScope,
    after: int,
    render: Renderer,
    *,
    retry_ms: int = 2_000,
    queue_size: int = 64,
    poll_seconds: float = 1.0,
) -> AsyncIterator[ServerSentEvent]:
    """Every event after `after`, then each new one as it is committed; ids are the scope's cursor."""
    wake = hub.subscribe(scope.chat_id, queue_size)  # before the first read: no wake-up is missed
    unreachable = False
    try:
        yield ServerSentEvent(retry=retry_ms, comment="stream open")
        while True:
            try:
                rows = await read_after(pool, scope, after, timeout=max(5.0, poll_seconds))
                if not rows and scope.turn_id is not None and await jobs.is_finished(pool, scope.turn_id):
                    # everything the finished turn logged is visible now: read once more, and if
                    # nothing is there the client is past its end (a resume after its last event)
                    rows = await read_after(pool, scope, after)
                    if not rows:
                        return
            except psycopg.OperationalError:
                if not unreachable:  # say it once per outage, then keep trying from the same place
                    yield ServerSentEvent(event="unavailable", data=DATABASE_UNREACHABLE)
                unreachable = True
                await asyncio.sleep(poll_seconds)
                continue
            unreachable = False
            for event in rows:
                after = scope.cursor(event)
                yield ServerSentEvent(id=str(after), event="ev", data=await render(event))
                if scope.turn_id is not None and event.kind == "turn_done":
                    return
            if len(rows) == REPLAY_BATCH:
                continue
            await wait_up_to(poll_seconds, wake.get())
            while not wake.empty():
                wake.get_nowait()
    finally:
        hub.unsubscribe(scope.chat_id, wake)


def parse_last_event_id(header: str | None, after: int | None) -> int:
    """The client's position: the Last-Event-ID header (a browser's own reconnect) or `after`
    (htmx's SSE extension reconnects with a new EventSource, which sends no header)."""
    for value in (header, after):
        if value is None:
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            continue
        if number >= 0:
            return number
    return 0
