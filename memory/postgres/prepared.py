"""When the library prepares its hottest statements: where the pool allows it and the plan will hold.

A prepared statement is planned a few times, then (when its costs allow) once for good: its generic
plan. That saves search's candidate statement about 2 ms of planning a call at 10k facts. But the
generic plan is made from the statistics of that moment, and kept until they change (an ANALYZE, by
hand or by autovacuum, plans it again). Made while the fact tables have no statistics yet (a new
database filling up before autovacuum first analyzes it), it joined every fact to every vector: a
capture took 270 ms after 200 turns of a conversation, and more with each turn. So a statement is
prepared only once the vectors table has statistics, and at least MIN_ROWS rows in them: from there
autovacuum analyzes it again as it grows by a tenth, and each analyze plans it again.

Checked once per connection every RECHECK_S; the pool must allow prepared statements at all
(memory.postgres.connection; `prepare_threshold=None` never prepares).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import psycopg

MIN_ROWS = 1000
RECHECK_S = 60.0

# connection -> (when checked, time.monotonic(); whether to prepare)
_checked: weakref.WeakKeyDictionary[psycopg.Connection[Any], tuple[float, bool]] = weakref.WeakKeyDictionary()


def worth_preparing(conn: psycopg.Connection[Any]) -> bool:
    """Whether the library's statements should be prepared on `conn` now."""
    if conn.prepare_threshold is None:
        return False
    now = time.monotonic()
    checked = _checked.get(conn)
    if checked is not None and now - checked[0] < RECHECK_S:
        return checked[1]
    row = conn.execute(
        "SELECT c.reltuples AS rows FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'beads' AND c.relname = 'fact_vectors'"
    ).fetchone()
    rows = None if row is None else (row["rows"] if isinstance(row, dict) else row[0])
    worth = rows is not None and rows >= MIN_ROWS  # -1: never analyzed
    _checked[conn] = (now, worth)
    return worth


def forget(conn: psycopg.Connection[Any]) -> None:
    """Check again at the next call (tests, and a bench that has just analyzed its tables)."""
    _checked.pop(conn, None)
