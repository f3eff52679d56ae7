"""Database outage: stop the app's Postgres in the middle of a turn, start it again, and check nothing
was lost.

The server is an embedded Postgres of the scenario's own in a temporary directory (never a shared
one). A turn is sent; once its reply is streaming, Postgres is stopped (a fast shutdown: every
connection is cut). While it is down the page answers 503 with a clear message and an open stream
says the database is unreachable. Once Postgres is back, the turn must finish on its own: each lane
done exactly once, an `interrupted` event saying why (shown on the page), the stream's event ids
dense across the outage, and the chat's facts and replies equal to a control chat without an outage.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import httpx

from bench.reliability import checks
from bench.reliability.client import TIMEOUT, SseEvent, new_chat, parse_sse, send
from bench.reliability.servers import AppProcess, OwnPostgres, create_database

FINISH_SECONDS = 180.0


class ChatFollower(threading.Thread):
    """Follows a chat's stream in the background, as an open browser tab would."""

    def __init__(self, base: str, chat_id: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{base}/chats/{chat_id}/events"
        self.events: list[SseEvent] = []
        self.stopping = threading.Event()
        self.failure: str | None = None

    def run(self) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0)) as client,
                client.stream("GET", self.url) as response,
            ):
                for event in parse_sse(_until(self.stopping, response.iter_lines())):
                    self.events.append(event)
        except httpx.HTTPError as exc:
            self.failure = repr(exc)


def _until(stopping: threading.Event, lines: Any) -> Any:
    for line in lines:  # keepalive pings arrive every second, so the flag is seen promptly
        if stopping.is_set():
            return
        yield line


def _turn_row(db_url: str, turn_id: str) -> tuple[str, int]:
    status, tokens = checks.query(
        db_url,
        "SELECT status, (SELECT count(*) FROM playground.events WHERE turn_id = t.id AND kind = 'token')"
        " FROM playground.turn_worker t WHERE id = %s",
        (turn_id,),
    )[0]
    return str(status), int(tokens)


def run_outage(
    *, down_seconds: tuple[float, ...] = (3.0,), token_delay_ms: int = 80, seed: int = 8
) -> dict[str, Any]:
    """One outage per entry of `down_seconds`, each that long, each in the middle of its own turn."""
    outages = len(down_seconds)
    rng = random.Random(seed)
    pg = OwnPostgres()
    violations: list[str] = []
    details: list[dict[str, Any]] = []
    try:
        db_url = create_database(pg.url)
        settings = {
            "scripted_token_delay_ms": token_delay_ms,
            "sse_ping_seconds": 1,
            "database_wait_seconds": 2,
        }
        app = AppProcess(db_url, **settings)
        try:
            app.start()
            with httpx.Client(timeout=TIMEOUT) as client:
                chat_id = new_chat(client, app.base)
                follower = ChatFollower(app.base, chat_id)
                follower.start()
                messages = []
                for n in range(outages):
                    statement = f"Project OUT{n} has a budget of {100 + n} units for the storage tier."
                    question = f"What is the budget of project OUT{n} for the storage tier?"
                    messages += [statement, question]
                    send(client, app.base, chat_id, statement, key=f"s{n}")
                    turn_id = send(client, app.base, chat_id, question, key=f"q{n}")
                    # a random moment while the answer streams (it is dozens of tokens long)
                    at_tokens = rng.randint(1, 12)
                    checks.wait_for(
                        lambda turn=turn_id, n=at_tokens: _turn_row(db_url, turn)[1] >= n,
                        60,
                        "the reply to stream",
                    )
                    status_before, tokens_before = _turn_row(db_url, turn_id)
                    pg.stop()
                    stopped = time.monotonic()
                    page = client.get(f"{app.base}/chats/{chat_id}")
                    stream = client.get(f"{app.base}/chats/{chat_id}/turns/{turn_id}/events")
                    time.sleep(max(0.0, down_seconds[n] - (time.monotonic() - stopped)))
                    pg.start()
                    restarted = time.monotonic()
                    checks.wait_for(
                        lambda turn=turn_id: _turn_row(db_url, turn)[0] == "done",
                        FINISH_SECONDS,
                        "the turn to finish",
                    )
                    details.append(
                        {
                            "stopped_at_tokens": tokens_before,
                            "turn_was_running": status_before == "running",
                            "down_seconds": round(restarted - stopped, 1),
                            "finished_seconds_after_restart": round(time.monotonic() - restarted, 1),
                            "page_while_down": page.status_code,
                            "stream_while_down": stream.status_code,
                        }
                    )
                    if page.status_code != 503 or "database is unreachable" not in page.text:
                        violations.append(f"the page while down: {page.status_code} {page.text[:100]!r}")
                    if stream.status_code != 503:
                        violations.append(f"a new stream while down: {stream.status_code}")
                    interrupted = checks.query(
                        db_url,
                        "SELECT payload->>'message' FROM playground.events WHERE turn_id = %s AND kind = 'interrupted'",
                        (turn_id,),
                    )
                    if status_before == "running" and not interrupted:
                        violations.append(f"outage {n + 1}: the turn logged no interruption")
                    if any("database became unreachable" not in (m or "") for (m,) in interrupted):
                        violations.append(f"outage {n + 1}: an unclear interruption {interrupted}")
                # the open stream saw the outage and went on with no gap
                last_event_no = checks.query(
                    db_url, "SELECT last_event_no FROM playground.chats WHERE id = %s", (chat_id,)
                )[0][0]
                checks.wait_for(
                    lambda: any(e.id == last_event_no for e in follower.events), 60, "the stream to catch up"
                )
                follower.stopping.set()
                page = client.get(f"{app.base}/chats/{chat_id}")
                if "The database became unreachable during this turn" not in page.text:
                    violations.append("the page does not show why the turn was interrupted")

                control_id = new_chat(client, app.base)
                for t, text in enumerate(messages):
                    send(client, app.base, control_id, text, key=f"c{t}")
                checks.wait_for(
                    lambda: (
                        all(r["status"] == "done" for r in checks.ledger(db_url, control_id))
                        and len(checks.ledger(db_url, control_id)) == len(messages)
                    ),
                    FINISH_SECONDS,
                    "the control chat",
                )
        finally:
            app.close()
        follower.join(timeout=10)
        ids = [e.id for e in follower.events if e.id is not None]
        notices = [e for e in follower.events if e.event == "unavailable"]
        if ids != list(range(1, len(ids) + 1)):
            violations.append(f"the open stream's ids are not dense: {ids[:5]}...{ids[-5:]}")
        if not notices:
            violations.append("the open stream never said the database was unreachable")
        violations += checks.exactly_once(db_url, chat_id, len(messages))
        violations += checks.differences_from_control(db_url, chat_id, control_id, "with outages")
        interrupted_turns = sum(r["interrupted"] > 0 for r in checks.ledger(db_url, chat_id))
        facts = checks.fact_counts(db_url, chat_id)
    finally:
        pg.close()
    return {
        "outages": outages,
        "turns_interrupted": interrupted_turns,
        "stream_notices": len(notices),
        "stream_events": len(ids),
        "details": details,
        "facts": facts,
        "violations": violations,
    }
