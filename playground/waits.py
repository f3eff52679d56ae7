"""Waiting at most so long, without ever losing a cancel.

`asyncio.wait_for` on Python 3.11 returns the awaited result, and drops the cancellation, when what
it waits for finishes in the same loop turn as the cancel lands (CPython gh-86296, fixed in 3.12). A
turn worker's claim loop cancelled so went on forever, and its process never exited
(tests/test_cancellation.py). `asyncio.timeout` counts cancels and raises an outside one again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable


async def wait_up_to(seconds: float, awaitable: Awaitable[object]) -> None:
    """Await `awaitable`, giving up quietly after `seconds`; a cancel always goes through."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await awaitable
