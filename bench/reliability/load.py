"""Load: many chats at once, each sending its turns one after another over real HTTP.

Each chat makes itself, then per turn posts the message and reads the turn's stream to its end.
Measured: a turn's latency (the POST to the stream's end) and the stream's first-event latency (the
GET to its first event). Checked: no request failed, every turn finished exactly once, and no chat's
page shows another chat's code word. Requests are bounded in number (two per turn, one per chat,
one page per chat) and in time (per request, and a deadline for the whole run).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.reliability import checks
from bench.reliability.client import TIMEOUT, anew_chat, aread_turn, asend
from bench.reliability.conversation import code_for, conversation
from bench.reliability.stats import mb, ms, percentile


@dataclass
class LoadRun:
    turn_seconds: list[float] = field(default_factory=list)
    first_event_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    chat_ids: dict[str, str] = field(default_factory=dict)  # code -> chat id


async def _one_chat(
    client: httpx.AsyncClient, base: str, read_base: str, i: int, turns: int, run: LoadRun
) -> None:
    code = code_for(i)
    try:
        run.requests += 1
        chat_id = await anew_chat(client, base)
    except httpx.HTTPError as exc:
        run.errors.append(f"{code}: creating the chat failed: {exc!r}")
        return
    run.chat_ids[code] = chat_id
    for t, text in enumerate(conversation(code, turns)):
        started = time.monotonic()
        try:
            run.requests += 2
            turn_id = await asend(client, base, chat_id, text, key=f"{code}-{t}")
            read = await aread_turn(client, read_base, chat_id, turn_id)
        except httpx.HTTPError as exc:
            run.errors.append(f"{code} turn {t + 1}: {exc!r}")
            continue
        if not (read.ended and read.events and read.events[-1].turn_done):
            run.errors.append(f"{code} turn {t + 1}: the stream ended before the turn did")
            continue
        run.turn_seconds.append(time.monotonic() - started)
        if read.first_event_seconds is not None:
            run.first_event_seconds.append(read.first_event_seconds)


async def _cross_reads(client: httpx.AsyncClient, base: str, run: LoadRun) -> list[str]:
    """Each chat's page shows its own code word and no other chat's."""
    problems = []
    for code, chat_id in run.chat_ids.items():
        run.requests += 1
        page = await client.get(f"{base}/chats/{chat_id}")
        if page.status_code != 200:
            problems.append(f"{code}: its page answered {page.status_code}")
            continue
        others = [other for other in run.chat_ids if other != code and other in page.text]
        if code not in page.text or others:
            problems.append(f"{code}: own code shown: {code in page.text}; other chats' codes: {others}")
    return problems


async def run_load(
    base: str | list[str],
    db_url: str,
    *,
    chats: int = 50,
    turns: int = 10,
    rss: Callable[[], int] | None = None,
    deadline_seconds: float = 900.0,
) -> dict[str, Any]:
    """`base` may list several app processes on one database: chat i then posts to the i-th (mod
    their number) and reads its turns' streams from the next one."""
    bases = [base] if isinstance(base, str) else base
    run = LoadRun()
    rss_before = rss() if rss else None
    limits = httpx.Limits(max_connections=2 * chats + 10, max_keepalive_connections=2 * chats + 10)
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits) as client:
        async with asyncio.timeout(deadline_seconds):
            await asyncio.gather(
                *(
                    _one_chat(client, bases[i % len(bases)], bases[(i + 1) % len(bases)], i, turns, run)
                    for i in range(chats)
                )
            )
        elapsed = time.monotonic() - started
        cross = await _cross_reads(client, bases[-1], run)
    rss_after = rss() if rss else None
    lost = []
    for chat_id in run.chat_ids.values():
        lost += checks.exactly_once(db_url, chat_id, turns)
    sent = chats * turns
    return {
        "chats": chats,
        "turns_per_chat": turns,
        "turns_sent": sent,
        "turns_completed": len(run.turn_seconds),
        "requests": run.requests,
        "errors": run.errors,
        "lost_or_duplicated": lost,
        "cross_session_reads": cross,
        "seconds": round(elapsed, 1),
        "turns_per_second": round(len(run.turn_seconds) / elapsed, 2) if elapsed else None,
        "turn_ms_p50": ms(percentile(run.turn_seconds, 50)),
        "turn_ms_p95": ms(percentile(run.turn_seconds, 95)),
        "first_event_ms_p50": ms(percentile(run.first_event_seconds, 50)),
        "first_event_ms_p95": ms(percentile(run.first_event_seconds, 95)),
        "rss_mb_before": mb(rss_before) if rss_before else None,
        "rss_mb_after": mb(rss_after) if rss_after else None,
        "violations": run.errors + lost + cross,
    }
