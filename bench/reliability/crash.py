"""Crash: SIGKILL the server at random moments while a chat's turns run, and start it again each time.

All the chat's messages are queued at once (the worker runs them one after another), with the scripted
model pausing on every token; the server is killed once inside each turn, after a random number of
its events, so a kill lands anywhere: in a model call, a tool call, a checkpoint write. After the last restart every turn must have finished exactly once, and what the
chat stored (facts by kind, source and status; stock store items; the replies) must equal a control
chat that sent the same messages on a server nobody killed.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

from bench.reliability import checks
from bench.reliability.client import TIMEOUT, new_chat, send
from bench.reliability.conversation import conversation
from bench.reliability.servers import AppProcess

#: the longest wait for the chat's turns to finish once the server is left running
SETTLE_SECONDS = 300.0


def _settles(db_url: str, chat_id: str) -> bool:
    try:
        checks.wait_idle(db_url, chat_id, SETTLE_SECONDS)
    except TimeoutError:
        return False
    return True


def _turn_progress(db_url: str, chat_id: str, turn_no: int) -> tuple[str, int]:
    """(status, events logged) of one turn of the chat."""
    rows = checks.query(
        db_url,
        "SELECT t.status, (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id)"
        " FROM playground.turn_worker t WHERE t.chat_id = %s AND t.turn_no = %s",
        (chat_id, turn_no),
    )
    return (str(rows[0][0]), int(rows[0][1])) if rows else ("missing", 0)


def _wait_into_turn(db_url: str, chat_id: str, turn_no: int, events: int, timeout: float = 120.0) -> bool:
    """Until the turn has logged `events` events; False if it finished first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, logged = _turn_progress(db_url, chat_id, turn_no)
        if status == "done":
            return False
        if logged >= events:
            return True
        time.sleep(0.01)
    raise TimeoutError(f"turn {turn_no} made no progress in {timeout:.0f} s")


def run_crash(
    db_url: str,
    *,
    turns: int = 20,
    kills: int = 20,
    token_delay_ms: int = 60,
    seed: int = 8,
) -> dict[str, Any]:
    """Kill the server once inside each of the first `kills` turns, at a random point of it (after a
    random number of its events, plus a random fraction of a second), and start it again."""
    rng = random.Random(seed)
    messages = conversation("CRASH", turns)
    settings = {"scripted_token_delay_ms": token_delay_ms, "max_attempts": 10, "lease_seconds": 30}
    app = AppProcess(db_url, **settings)
    kill_points: list[dict[str, Any]] = []
    try:
        app.start()
        with httpx.Client(timeout=TIMEOUT) as client:
            chat_id = new_chat(client, app.base)
            for t, text in enumerate(messages):
                send(client, app.base, chat_id, text, key=f"crash-{t}")
        for turn_no in range(1, turns + 1):
            if len(kill_points) >= kills:
                break
            if not _wait_into_turn(db_url, chat_id, turn_no, rng.randint(1, 30)):
                continue  # it finished before the chosen point: no kill in this turn
            time.sleep(rng.uniform(0.0, 0.3))
            status, events = _turn_progress(db_url, chat_id, turn_no)
            app.kill()
            kill_points.append({"turn": turn_no, "events_logged": events, "turn_status": status})
            app.start()
        finished = _settles(db_url, chat_id)

        # the control: the same messages in a fresh chat, on a server left alone
        with httpx.Client(timeout=TIMEOUT) as client:
            control_id = new_chat(client, app.base)
            for t, text in enumerate(messages):
                send(client, app.base, control_id, text, key=f"control-{t}")
        control_finished = _settles(db_url, control_id)
    finally:
        app.close()

    violations: list[str] = []
    if not finished or not control_finished:
        violations.append(f"turns did not finish within {SETTLE_SECONDS:.0f} s")
    violations += checks.exactly_once(db_url, chat_id, turns)
    violations += checks.exactly_once(db_url, control_id, turns)
    violations += checks.differences_from_control(db_url, chat_id, control_id, "with crashes")
    attempts = [row["attempts"] for row in checks.ledger(db_url, chat_id)]
    return {
        "turns": turns,
        "kills": len(kill_points),
        "kill_points": kill_points,
        "turns_interrupted": sum(a > 1 for a in attempts),
        "max_attempts_of_a_turn": max(attempts, default=0),
        "facts": checks.fact_counts(db_url, chat_id),
        "control_facts": checks.fact_counts(db_url, control_id),
        "violations": violations,
    }
