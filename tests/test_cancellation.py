"""Stopping never hangs on a wake-up that arrives as it stops (playground.waits says why it could).

A supervisor's SIGTERM hung when another process handed its turns back (a NOTIFY) just as this one
stopped. These tests land the wake-up and the cancel together, in that order, every time. And a
stop that is itself cancelled ends cancelled, rather than swallowing the cancel with its task's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from playground_helpers import play_db, playground_template, running

from playground import events
from playground.chats import create_chat
from playground.events import EventRow, StreamScope, event_stream, read_after
from playground.jobs import ClaimedTurn

__all__ = ["play_db", "playground_template"]  # fixtures

#: far longer than a stop takes; a stop that swallowed its cancel never ends
STOP_LIMIT_S = 20


async def test_a_worker_stops_when_a_wake_up_lands_with_the_cancel(
    play_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(play_db, poll_seconds=30, lease_seconds=120) as rt:
        worker = rt.worker
        claimed = asyncio.Event()
        claim = worker.claim

        async def claim_and_say_so() -> ClaimedTurn | None:
            turn = await claim()
            claimed.set()
            return turn

        monkeypatch.setattr(worker, "claim", claim_and_say_so)
        rt.hub.turns_ready.set()
        await claimed.wait()  # the loop found nothing and is back to waiting for a wake-up
        rt.hub.turns_ready.set()  # a wake-up: another process handed a turn back...
        stopping = asyncio.create_task(worker.stop())  # ...in the same loop turn as this one stops
        # waited for, never cancelled: a limit that cancels the stop is itself swallowed by it
        await asyncio.wait([stopping], timeout=STOP_LIMIT_S)
        assert stopping.done(), "the worker's loop dropped its cancel and never stopped"
        assert worker._loop_task is not None and worker._loop_task.cancelled()


async def test_a_stream_ends_when_a_wake_up_lands_with_the_cancel(
    play_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(play_db, poll_seconds=30, lease_seconds=120) as rt:
        chat = await create_chat(rt.pool)
        read = asyncio.Event()

        async def read_and_say_so(*args: Any, **kwargs: Any) -> list[EventRow]:
            rows = await read_after(*args, **kwargs)
            read.set()
            return rows

        monkeypatch.setattr(events, "read_after", read_and_say_so)

        async def listen() -> None:
            stream = event_stream(rt.pool, rt.hub, StreamScope(chat.id), 0, render, poll_seconds=600)
            async for _ in stream:
                pass

        listener = asyncio.create_task(listen())
        await read.wait()  # the stream read (nothing) and is waiting for a wake-up
        rt.hub.wake(str(chat.id))  # an event committed...
        listener.cancel()  # ...in the same loop turn as the client goes away
        await asyncio.wait([listener], timeout=STOP_LIMIT_S)
        assert listener.cancelled(), "the stream dropped its cancel and went on waiting"


@pytest.mark.parametrize("part", ["worker", "hub"])
async def test_a_stop_that_is_cancelled_as_it_waits_ends_cancelled(play_db: str, part: str) -> None:
    async with running(play_db, poll_seconds=30, lease_seconds=120) as rt:
        stop = rt.worker.stop if part == "worker" else rt.hub.stop
        stopping = asyncio.create_task(stop())
        await asyncio.sleep(0)  # it has cancelled its task and waits for it to end
        stopping.cancel()
        await asyncio.wait([stopping], timeout=STOP_LIMIT_S)
        assert stopping.cancelled()


async def render(event: EventRow) -> str:
    return event.kind
