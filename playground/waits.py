"""Waiting for something, or for a task to stop, without ever losing a cancel.

`asyncio.wait_for` on Python 3.11 returns the awaited result, and drops the cancellation, when what
it waits for finishes in the same loop turn as the cancel lands (CPython gh-86296, fixed in 3.12). A
turn worker's claim loop cancelled so went on forever, and its process never exited
(tests/test_cancellation.py). `asyncio.timeout` counts cancels and raises an outside one again.

Stopping a task by cancelling it and awaiting it inside `suppress(CancelledError)` has the same flaw
one level up: a cancel of the caller, arriving while it awaits, is swallowed with the task's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def wait_up_to(seconds: float, awaitable: Awaitable[object]) -> None:
    """Await `awaitable`, giving up quietly after `seconds`; a cancel always goes through."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await awaitable


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has ended. Its own cancellation ends quietly and its failure is
    raised here; a cancel of the caller goes through (`asyncio.wait` cancels nothing it waits on)."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled() and (failure := task.exception()) is not None:
        raise failure
