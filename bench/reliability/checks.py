"""What the database says after a scenario: did every turn finish exactly once, and what was stored.

Each check returns the violations it found as sentences (an empty list means the invariant held).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg

_LEDGER = """
SELECT t.turn_no, t.status, t.stock_status, t.beads_status, t.attempts,
       (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id AND e.kind = 'done' AND e.lane = 'stock') AS stock_done,
       (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id AND e.kind = 'done' AND e.lane = 'beads') AS beads_done,
       (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id AND e.kind = 'turn_done') AS turn_done,
       (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id AND e.kind = 'error') AS errors,
       (SELECT count(*) FROM playground.events e WHERE e.turn_id = t.id AND e.kind = 'interrupted') AS interrupted,
       (SELECT count(*) = max(seq) AND min(seq) = 1 FROM playground.events e WHERE e.turn_id = t.id) AS dense,
       (SELECT string_agg(author, ',' ORDER BY author) FROM playground.messages m WHERE m.turn_id = t.id) AS authors
  FROM playground.turn_worker t WHERE t.chat_id = %s ORDER BY t.turn_no
"""


def query(db_url: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, params).fetchall()


def unfinished_turns(db_url: str, chat_id: str | None = None) -> int:
    """Turns not yet done: of one chat, or of the whole database."""
    if chat_id is None:
        return int(query(db_url, "SELECT count(*) FROM playground.turn_worker WHERE status <> 'done'")[0][0])
    sql = "SELECT count(*) FROM playground.turn_worker WHERE chat_id = %s AND status <> 'done'"
    return int(query(db_url, sql, (chat_id,))[0][0])


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll `condition` until it holds; TimeoutError naming `what` once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)


def wait_idle(db_url: str, chat_id: str | None = None, timeout: float = 120.0) -> None:
    """Until every turn (of `chat_id`, or in the database) is done."""
    wait_for(lambda: not unfinished_turns(db_url, chat_id), timeout, "the turns to finish")


def differences_from_control(db_url: str, chat_id: str, control_id: str, what: str) -> list[str]:
    """How a chat that went through `what` (crashes, outages) differs from a control chat that got the
    same messages undisturbed: the facts each stored, and the replies."""
    out = []
    counts, control = fact_counts(db_url, chat_id), fact_counts(db_url, control_id)
    bodies, control_bodies = fact_bodies(db_url, chat_id), fact_bodies(db_url, control_id)
    if counts != control or bodies != control_bodies:
        # only the counts that differ, first: a long message is cut short where it is read
        differ = {
            k: (counts.get(k, 0), control.get(k, 0))
            for k in {*counts, *control}
            if counts.get(k) != control.get(k)
        }
        out.append(
            f"stored {what} != without, (with, without): {dict(sorted(differ.items()))}; only {what} "
            f"{sorted((bodies - control_bodies).elements())[:5]}, only without "
            f"{sorted((control_bodies - bodies).elements())[:5]}"
        )
    mine, theirs = replies(db_url, chat_id), replies(db_url, control_id)
    if mine != theirs:
        out.append(
            f"replies differ from the control chat's in turns {[n for n in mine if mine[n] != theirs.get(n)]}"
        )
    return out


def ledger(db_url: str, chat_id: str) -> list[dict[str, Any]]:
    names = [
        "turn_no",
        "status",
        "stock_status",
        "beads_status",
        "attempts",
        "stock_done",
        "beads_done",
        "turn_done",
        "errors",
        "interrupted",
        "dense",
        "authors",
    ]
    return [dict(zip(names, row, strict=True)) for row in query(db_url, _LEDGER, (chat_id,))]


def exactly_once(db_url: str, chat_id: str, expected_turns: int) -> list[str]:
    """Every turn done, each lane done once with no error, one reply per lane, numbering dense."""
    rows = ledger(db_url, chat_id)
    problems = []
    if len(rows) != expected_turns:
        problems.append(f"chat {chat_id}: {len(rows)} turns stored, {expected_turns} sent")
    for row in rows:
        ok = (
            row["status"] == "done"
            and row["stock_status"] == row["beads_status"] == "done"
            and row["stock_done"] == row["beads_done"] == row["turn_done"] == 1
            and row["errors"] == 0
            and row["dense"]
            and row["authors"] == "beads,stock,user"
        )
        if not ok:
            problems.append(f"chat {chat_id} turn {row['turn_no']}: {row}")
    return problems


def replies(db_url: str, chat_id: str) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    rows = query(
        db_url,
        "SELECT t.turn_no, m.author, m.body FROM playground.messages m JOIN playground.turn_worker t ON t.id = m.turn_id"
        " WHERE t.chat_id = %s",
        (chat_id,),
    )
    for turn_no, author, body in rows:
        found.setdefault(turn_no, {})[author] = body
    return found


def session_of(chat_id: str) -> str:
    return chat_id.replace("-", "")


def fact_counts(db_url: str, chat_id: str) -> dict[str, int]:
    """The chat's facts in the fact graph by kind, source and status, and its stock store items."""
    rows = query(
        db_url,
        "SELECT kind, source, status, count(*) FROM beads.facts WHERE session_id = %s GROUP BY 1, 2, 3",
        (session_of(chat_id),),
    )
    counts = {f"{kind}/{source}/{status}": int(n) for kind, source, status, n in rows}
    counts["stock items"] = stock_items(db_url, chat_id)
    return dict(sorted(counts.items()))


def fact_bodies(db_url: str, chat_id: str) -> Counter[tuple[str, str, str, str]]:
    rows = query(
        db_url,
        "SELECT kind, source, status, body FROM beads.facts WHERE session_id = %s",
        (session_of(chat_id),),
    )
    return Counter(rows)  # type: ignore[arg-type]


def stock_items(db_url: str, chat_id: str) -> int:
    schemas = query(
        db_url,
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'store'"
        " AND table_schema LIKE 'lg\\_%%'",
    )
    total = 0
    for (schema,) in schemas:
        total += query(
            db_url,
            f'SELECT count(*) FROM "{schema}".store WHERE prefix = %s',
            (f"memories.{session_of(chat_id)}",),
        )[0][0]
    return int(total)
