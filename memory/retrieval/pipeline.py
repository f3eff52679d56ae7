"""A search from start to end: the candidate statement on the caller's connection, ranking, the chosen
candidates' rows, hits: two round trips."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg.rows import DictRow

from memory.model import Namespace, SearchResult
from memory.postgres.prepared import worth_preparing
from memory.retrieval.hits import search_result
from memory.retrieval.hnsw import ef_search_for, session_settings_hold, set_hnsw_local
from memory.retrieval.keywords import known_common_words, remember_common_words
from memory.retrieval.options import SearchOptions
from memory.retrieval.ranking import rank
from memory.retrieval.statement import candidate_query, read_chosen

_DEFAULTS = SearchOptions()  # frozen, so one shared default is safe

# A prepared candidate statement runs on its generic plan. Left to choose, Postgres plans a prepared
# statement afresh for each of its first five runs, then keeps its generic plan only where that
# plan's estimated cost is no higher than the custom plans' average. For the statements of five or
# more query words (memory.retrieval.statement.WORD_SLOTS) it never was: each search of a 1M-token
# session planned its statement again, about 3 ms of a 9 ms search (results/long-sessions-41).
# Set in a transaction of the search's own, never for the session or a caller's transaction: for
# one-off statements, a forced generic plan ignores the values it is given.
_GENERIC_PLAN = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


def search(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions = _DEFAULTS,
) -> SearchResult:
    """The facts `ns` may read that best answer `query` (embedded as `query_vector` by embedder
    `embedder_id`), ranked as memory.retrieval describes: the candidate statement on `conn`, ranking,
    then the chosen candidates' rows.
    Inside a transaction of the caller's, the HNSW settings are scoped to it."""
    candidates = find_candidates(conn, ns, query, query_vector, embedder_id, dims, options)
    return hits_of(conn, ns, query, candidates, options)


@dataclass(frozen=True, slots=True)
class Candidates:
    """What the candidate statement returned, and whether the search's statements are prepared."""

    rows: list[DictRow]
    prepare: bool


def find_candidates(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions = _DEFAULTS,
) -> Candidates:
    """A search's first step: the candidate statement on `conn`, with the HNSW settings it needs
    (bench.session_search times it apart from the second, `hits_of`)."""
    common = known_common_words(conn, ns.session_id, query, options)
    statement, params = candidate_query(ns, query, query_vector, embedder_id, dims, options, common)
    ef_search = ef_search_for(options)
    prepare = worth_preparing(conn)  # planned once per connection, where the plan will hold
    own_session = session_settings_hold(conn, ef_search)
    if own_session and not prepare:
        # one statement, one round trip, no BEGIN/COMMIT; never prepared, whatever the connection's
        # own prepare_threshold: a plan made before the tables have statistics would be kept
        rows = conn.execute(statement, params, prepare=False).fetchall()
    else:
        # the setting and the query in one transaction and one round trip, and the setting ends with
        # it. In a transaction of the search's own: the generic plan. Inside a caller's transaction:
        # the HNSW settings scoped to it, and the plan left to Postgres (a plan setting made there
        # would outlast the search, to the caller's commit).
        with conn.pipeline(), conn.transaction():
            if own_session:
                conn.execute(_GENERIC_PLAN)
            else:
                set_hnsw_local(conn, ef_search)
            rows = conn.execute(statement, params, prepare=prepare).fetchall()
    remember_common_words(conn, ns.session_id, options, params, rows)
    return Candidates(rows, prepare)


def hits_of(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    query: str,
    candidates: Candidates,
    options: SearchOptions = _DEFAULTS,
) -> SearchResult:
    """A search's second step: ranking, the chosen candidates' rows, the hits."""
    ranked = rank(candidates.rows, options, query)
    chosen = read_chosen(
        conn, ns.session_id, [(c["hit_id"], c["head_id"]) for c in ranked.chosen], prepare=candidates.prepare
    )
    return search_result(query, ranked, chosen)
