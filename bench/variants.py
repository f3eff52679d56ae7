"""Changes to memory.retrieval's search, tried here before anyone edits memory/.

Each variant runs on the same queries as the library's search, interleaved with it, and is checked
against the library's answer (the same facts, scores and resolutions) on every query:

- candidates=48: the nearest 48 claims and 48 passages fetched before ranking instead of 32 (the
  library fetches max(candidates, 4k); the recall the library gave up for speed, so the "same
  answer" count says what 32 costs).
- two scans: the nearest passages fetched too (a second nearest-neighbour scan), so that a claim far
  from the query but carved from a near message is a candidate; the library no longer does this.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from memory import retrieval
from memory.model import Namespace, SearchResult
from memory.retrieval import SearchOptions
from memory.vectors import as_vector


def candidate_statement(
    template: str, ns: Namespace, qvec: Sequence[float], eid: int, dims: int, options: SearchOptions
) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement and parameters memory.retrieval.search builds, for any candidate-query template."""
    statement = sql.SQL(template).format(eid=sql.Literal(int(eid)), dims=sql.Literal(int(dims)))
    params = {
        "session": ns.session_id,
        "lineage": list(ns.lineage),
        "ns": ns.id,
        "q": as_vector(qvec),
        "n": max(options.candidates, options.k * 4),
        "passage_scan": options.passage_scan,
    }
    return statement, params


def set_hnsw(conn: psycopg.Connection, candidates: int, one_round_trip: bool = False) -> None:
    """The HNSW settings inside the caller's transaction: two SET LOCALs, or one set_config round trip
    (what the library sends)."""
    ef_search = max(40, candidates)
    if one_round_trip:
        conn.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true)",
            (str(ef_search),),
        )
    else:
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))


def with_candidates(fn: Callable[..., SearchResult], candidates: int) -> Callable[..., SearchResult]:
    def run(conn, ns, query, qvec, eid, dims, options):  # type: ignore[no-untyped-def]
        return fn(conn, ns, query, qvec, eid, dims, replace(options, candidates=candidates))

    return run


def with_options(fn: Callable[..., SearchResult], **changes: Any) -> Callable[..., SearchResult]:
    def run(conn, ns, query, qvec, eid, dims, options):  # type: ignore[no-untyped-def]
        return fn(conn, ns, query, qvec, eid, dims, replace(options, **changes))

    return run


VARIANTS: dict[str, Callable[..., SearchResult]] = {
    "library": retrieval.search,
    "candidates=48": with_candidates(retrieval.search, 48),
    "two scans": with_options(retrieval.search, passage_scan=True),
}


def variant_names() -> list[str]:
    return list(VARIANTS)


def measure_variants(
    conn: psycopg.Connection,
    systems: Any,
    data: Any,
    query_texts: list[str],
    warmup: list[str],
    options: SearchOptions,
) -> dict[str, Any]:
    """Every variant on the same queries, interleaved, on the schema as shipped."""
    out: dict[str, Any] = {"queries": len(query_texts)}
    out["library_breakdown_ms"] = breakdown(conn, systems, data, query_texts, options)
    out.update(_interleave(conn, VARIANTS, systems, data, query_texts, warmup, options))
    return out


def _interleave(
    conn: psycopg.Connection,
    variants: dict[str, Callable[..., SearchResult]],
    systems: Any,
    data: Any,
    query_texts: list[str],
    warmup: list[str],
    options: SearchOptions,
) -> dict[str, Any]:
    eid, dims, root, vector = (
        systems.store.embedder_id,
        systems.embedder.dims,
        data.root,
        systems.embedder.vector,
    )
    samples: dict[str, list[float]] = {name: [] for name in variants}
    same_hits: dict[str, int] = dict.fromkeys(variants, 0)
    for q in warmup:
        for fn in variants.values():
            fn(conn, root, q, vector(q), eid, dims, options)
    names = list(variants)
    for i, q in enumerate(query_texts):
        qvec = vector(q)
        answers = {}
        for name in names if i % 2 == 0 else reversed(names):
            started = time.perf_counter()
            result = variants[name](conn, root, q, qvec, eid, dims, options)
            samples[name].append((time.perf_counter() - started) * 1000)
            answers[name] = [
                (h.fact.id, round(h.score, 6), h.resolved_from and h.resolved_from.id) for h in result
            ]
        for name, hits in answers.items():
            same_hits[name] += hits == answers["library"]
    out: dict[str, Any] = {}
    for name, values in samples.items():
        p50, p95 = np.percentile(values, [50, 95])
        out[name] = {"p50": float(p50), "p95": float(p95), "same_hits_as_library": same_hits[name]}
    return out


def explain(
    conn: psycopg.Connection, template: str, systems: Any, data: Any, query: str, options: SearchOptions
) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of a candidate query, with the library's HNSW settings."""
    eid, dims = systems.store.embedder_id, systems.embedder.dims
    statement, params = candidate_statement(
        template, data.root, systems.embedder.vector(query), eid, dims, options
    )
    with conn.transaction():
        set_hnsw(conn, params["n"], one_round_trip=True)
        rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement, params).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


def breakdown(
    conn: psycopg.Connection, systems: Any, data: Any, query_texts: list[str], options: SearchOptions
) -> dict[str, Any]:
    """Where one library search spends its time, step by step (ms, p50 and p95 over the queries)."""
    eid, dims, root = systems.store.embedder_id, systems.embedder.dims, data.root
    keys = ("begin_and_sets", "execute", "fetch_rows", "commit", "rank")
    steps: dict[str, list[float]] = {k: [] for k in (*keys, "rows")}
    for q in query_texts:
        statement, params = candidate_statement(
            retrieval._CANDIDATES, root, systems.embedder.vector(q), eid, dims, options
        )
        t0 = time.perf_counter()
        with conn.transaction():
            set_hnsw(conn, params["n"], one_round_trip=True)
            t1 = time.perf_counter()
            cur = conn.execute(statement, params)  # the server's work and the transfer
            t2 = time.perf_counter()
            rows = cur.fetchall()  # turning the result into dicts
            t3 = time.perf_counter()
        t4 = time.perf_counter()
        retrieval.rank(rows, options)
        t5 = time.perf_counter()
        for key, value in zip(keys, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            steps[key].append(value * 1000)
        steps["rows"].append(len(rows))
    out = {}
    for key, values in steps.items():
        p50, p95 = np.percentile(values, [50, 95])
        out[key] = {"p50": float(p50), "p95": float(p95)}
    return out
