"""The HNSW settings a search needs on its connection (pgvector's iterative scan and its width)."""

from __future__ import annotations

import weakref

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow

from memory.retrieval.options import SearchOptions, candidate_count

HNSW_EF_SEARCH_MAX = 1000

# Connections whose session already has our HNSW settings, and the ef_search they carry. The scan
# must keep walking until enough rows pass the session/scope filter (pgvector 0.8's iterative scan).
# Set once per pooled connection instead of per search: a search is then a single statement, with no
# BEGIN, SET LOCAL or COMMIT round trips (docs/internals/ranking.md, "Figures behind the defaults").
_CONFIGURED: weakref.WeakKeyDictionary[psycopg.Connection[DictRow], int] = weakref.WeakKeyDictionary()


def session_settings_hold(conn: psycopg.Connection[DictRow], ef_search: int) -> bool:
    """Make sure the session carries the settings; False when it cannot (a transaction is open, whose
    rollback would undo a SET: then the caller scopes them to its transaction instead)."""
    if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    if _CONFIGURED.get(conn) != ef_search:
        set_hnsw(conn, ef_search, local=False)
        _CONFIGURED[conn] = ef_search
    return True


def ef_search_for(options: SearchOptions) -> int:
    # pgvector caps ef_search at 1,000; past it the iterative scan keeps walking for the rest
    return min(HNSW_EF_SEARCH_MAX, max(40, candidate_count(options)))


def set_hnsw(conn: psycopg.Connection[DictRow], ef_search: int, *, local: bool) -> None:
    """The HNSW settings a search needs: for the current transaction only (`local`), or the session."""
    conn.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', %s), set_config('hnsw.ef_search', %s, %s)",
        (local, str(ef_search), local),
    )


def set_hnsw_local(conn: psycopg.Connection[DictRow], ef_search: int) -> None:
    """The HNSW settings for the current transaction only."""
    set_hnsw(conn, ef_search, local=True)
