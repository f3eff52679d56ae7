"""SSE: hang up and reconnect a turn's stream many times at random offsets, while it streams.

Each connection reads a random number of events, then hangs up; the next resumes after the last id
it saw, alternately by the Last-Event-ID header (a browser's own reconnect) and by `?after=` (htmx's).
Per turn, the ids read across all connections must be exactly 1..N, the events identical to one
uninterrupted read of the same stream, and each lane's tokens, concatenated, equal to its reply.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from bench.reliability.client import TIMEOUT, SseEvent, new_chat, read_turn, send

WORDS = [
    "storage",
    "tier",
    "replication",
    "snapshot",
    "latency",
    "budget",
    "quorum",
    "region",
    "failover",
    "index",
    "vector",
    "shard",
    "backup",
    "retention",
    "throughput",
    "cache",
]


def _statement(rng: random.Random, n: int) -> str:
    """A long claim, so its recall streams as many tokens."""
    words = " ".join(rng.choice(WORDS) for _ in range(120))
    return f"Project SSE{n} notes: the storage tier plan covers {words}."


def lane_tokens(events: list[SseEvent]) -> dict[str, str]:
    text = {"stock": "", "beads": ""}
    for event in events:
        for lane, token in event.tokens:
            text[lane] += token
    return text


def lane_replies(events: list[SseEvent]) -> dict[str, str]:
    return dict(reply for event in events if (reply := event.reply) is not None)


def run_sse_reconnects(
    base: str, *, reconnects: int = 100, max_events_per_connection: int = 6, seed: int = 8
) -> dict[str, Any]:
    rng = random.Random(seed)
    violations: list[str] = []
    drops = turns = events_read = 0
    with httpx.Client(timeout=TIMEOUT) as client:
        chat_id = new_chat(client, base)
        while drops < reconnects and turns < 50:
            send(client, base, chat_id, _statement(rng, turns), key=f"s{turns}")
            turn_id = send(
                client,
                base,
                chat_id,
                f"What does the storage tier plan of project SSE{turns} cover?",
                key=f"q{turns}",
            )
            turns += 1
            collected: list[SseEvent] = []
            after = 0
            while True:
                limit = rng.randint(1, max_events_per_connection) if drops < reconnects else None
                read = read_turn(
                    client, base, chat_id, turn_id, after=after, by_header=drops % 2 == 1, max_events=limit
                )
                collected += read.events
                if read.events:
                    after = read.events[-1].id or after
                if read.ended:
                    break
                drops += 1
            events_read += len(collected)
            whole = read_turn(client, base, chat_id, turn_id)  # the same stream, uninterrupted
            ids = [e.id for e in collected]
            if ids != list(range(1, len(ids) + 1)):
                violations.append(f"turn {turns}: ids across reconnects are not 1..N: {ids}")
            if [(e.id, e.data) for e in collected] != [(e.id, e.data) for e in whole.events]:
                violations.append(f"turn {turns}: the reconnected events differ from an uninterrupted read")
            tokens, replies = lane_tokens(collected), lane_replies(whole.events)
            if tokens != replies:
                violations.append(f"turn {turns}: tokens {tokens} != replies {replies}")
            if not all(tokens.values()):
                violations.append(f"turn {turns}: a lane streamed no tokens: {tokens}")
    return {
        "reconnects": drops,
        "turns": turns,
        "events_read": events_read,
        "violations": violations,
    }
