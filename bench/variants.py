"""Changes to memory.retrieval's search, tried here before anyone edits memory/.

Each variant runs on the same queries as the library's search, interleaved with it, and is checked
against the library's answer (the same facts, scores and resolutions) on every query:

- candidates=48: the nearest 48 claims fetched before ranking instead of 32 (the library fetches
  max(candidates, 4k); the recall the library gave up for speed, so the "same answer" count says
  what 32 costs).
- two scans: the nearest passages fetched too (a second nearest-neighbour scan), so that a claim far
  from the query but carved from a near message is a candidate; the library no longer does this.
- vectors only: keyword search off (SearchOptions.keyword=False), the search before hybrid
  retrieval: what the keyword side costs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg

from memory import retrieval
from memory.model import SearchResult
from memory.retrieval import SearchOptions


def with_options(fn: Callable[..., SearchResult], **changes: Any) -> Callable[..., SearchResult]:
    def run(conn, ns, query, qvec, eid, dims, options):  # type: ignore[no-untyped-def]
        return fn(conn, ns, query, qvec, eid, dims, replace(options, **changes))

    return run


VARIANTS: dict[str, Callable[..., SearchResult]] = {
    "library": retrieval.search,
    "candidates=48": with_options(retrieval.search, candidates=48),
    "two scans": with_options(retrieval.search, passage_scan=True),
    "vectors only": with_options(retrieval.search, keyword=False),
}


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


def breakdown(
    conn: psycopg.Connection, systems: Any, data: Any, query_texts: list[str], options: SearchOptions
) -> dict[str, Any]:
    """Where one library search spends its time, step by step (ms, p50 and p95 over the queries), on
    a connection that already carries the HNSW settings, as the library's searches run: the candidate
    statement (the server's work and the transfer; prepared where the connection allows it, as search
    sends it), turning its rows into dicts, rank(), and building the hits (their facts, flags and
    same-slot order) from the chosen rows."""
    eid, dims, root = systems.store.embedder_id, systems.embedder.dims, data.root
    keys = ("execute", "fetch_rows", "rank", "build_hits")
    steps: dict[str, list[float]] = {k: [] for k in (*keys, "rows")}
    retrieval.set_hnsw(conn, retrieval.ef_search_for(options), local=False)  # as search leaves them
    for q in query_texts:
        qvec = systems.embedder.vector(q)
        common = retrieval.known_common_words(conn, root.session_id, q, options)
        statement, params = retrieval.candidate_query(root, q, qvec, eid, dims, options, common)
        t0 = time.perf_counter()
        cur = conn.execute(statement, params, prepare=True)  # the server's work and the transfer
        t1 = time.perf_counter()
        rows = cur.fetchall()  # turning the result into dicts
        t2 = time.perf_counter()
        ranked = retrieval.rank(rows, options)
        t3 = time.perf_counter()
        retrieval.search_result(q, ranked)
        t4 = time.perf_counter()
        for key, value in zip(keys, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            steps[key].append(value * 1000)
        steps["rows"].append(len(rows))
    out = {}
    for key, values in steps.items():
        p50, p95 = np.percentile(values, [50, 95])
        out[key] = {"p50": float(p50), "p95": float(p95)}
    return out
