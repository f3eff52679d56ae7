"""Search latency of the fact graph against LangGraph's PostgresStore, side by side, at 1k to 100k facts.

    python -m bench.search_latency [--sizes 1000 10000 100000] [--queries 200] [--writes 200]
                                   [--out results/latency/search_latency.json]

One embedded Postgres in a temporary directory; per size a fresh database holding both systems (ours
in the `beads` schema, PostgresStore's tables in `public`, as an app that shares one database with
LangGraph's checkpointer and store would have them). Both hold the same 768-d claim vectors behind an
HNSW index built after the bulk load; every search is given its query vector up front, so what is
timed is the store's search call and nothing of the embedding. The systems' queries alternate
(A B C D, D C B A, ...) so machine noise lands on all of them. See bench/README.md.

Also measured, ours only: the capture write path (a message of 2 to 4 claims) and supersede, with
vectors computed in advance; the size of the block a search hands the model; and the plan of our
candidate query, written to results/latency/search_plan_<size>.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from langgraph.store.base import SearchOp
from langgraph.store.postgres import PostgresStore
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from bench import loader, writes
from bench.corpus import Corpus, build_corpus, queries
from bench.embedder import LookupEmbedder, TopicEmbedder
from bench.report import TARGETS, markdown, size_label
from bench.scratch import scratch_server
from memory import retrieval
from memory.graph.store import FactStore
from memory.model import Status
from memory.postgres import vectors
from memory.postgres.connection import CONNECTION_KWARGS, open_pool
from memory.retrieval import SearchOptions

RESULTS = Path(__file__).resolve().parent.parent / "results" / "latency"
SESSION = "bench-session"
WARMUP_QUERIES = 40
WARMUP_WRITES = 10
# enough for a 100k x 768-d HNSW graph (about 320 MB) to be built in memory; larger sizes get more
# (--maintenance-work-mem), or the build spills the graph to disk and takes many times longer
MAINTENANCE_WORK_MEM = "1GB"


def maintenance_work_mem_for(size: int, args: argparse.Namespace) -> str:
    return (
        str(args.maintenance_work_mem)
        if size > 100_000 and args.maintenance_work_mem
        else MAINTENANCE_WORK_MEM
    )


_started = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - _started:7.1f}s] {message}", flush=True)


class Phases:
    """Seconds per phase of one size, printed as they finish."""

    def __init__(self, size_label: str) -> None:
        self.size_label = size_label
        self.seconds: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        log(f"{self.size_label}: {name} ...")
        started = time.perf_counter()
        result = fn()
        self.seconds[name] = round(time.perf_counter() - started, 3)
        log(f"{self.size_label}: {name} done in {self.seconds[name]:.1f}s")
        return result


# -- machine ---------------------------------------------------------------------------------------


def machine_info(conn: psycopg.Connection) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    settings = {
        name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[name]
        for name in (
            "shared_buffers", "work_mem", "maintenance_work_mem", "effective_cache_size", "jit",
            "max_parallel_maintenance_workers", "max_parallel_workers_per_gather", "random_page_cost",
            "fsync", "synchronous_commit", "wal_sync_method",
        )
    }  # fmt: skip
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "postgres": conn.execute("SELECT version() AS v").fetchone()["v"],
        "pgvector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[
            "extversion"
        ],
        "postgres_settings": settings,
        "loadavg_at_start": _loadavg(),
        "packages": {
            p: metadata.version(p)
            for p in ("psycopg", "pgvector", "langgraph", "langgraph-checkpoint-postgres", "numpy")
        },
    }


# -- the two systems under test --------------------------------------------------------------------


@dataclass
class Systems:
    store: FactStore
    embedder: LookupEmbedder
    theirs: PostgresStore  # on the connection PostgresStore.from_conn_string opens
    their_conn: psycopg.Connection
    theirs_unprepared: PostgresStore  # on a connection configured like the library's pools


def open_theirs(url: str, lookup: LookupEmbedder, **connection: Any) -> tuple[PostgresStore, Any]:
    conn = psycopg.connect(url, **connection)
    # its embed function answers from the same precomputed vectors as ours
    store = PostgresStore(conn, index={"dims": lookup.dims, "embed": lookup.embed, "fields": ["content"]})
    return store, conn


# -- phases ----------------------------------------------------------------------------------------


def load_both(
    conn: psycopg.Connection,
    url: str,
    sys_: Systems,
    data: loader.Dataset,
    corpus: Corpus,
    maintenance_work_mem: str = "1GB",
) -> dict[str, Any]:
    eid = sys_.store.embedder_id
    ours_hnsw = loader.index_definitions(conn, f"%vectors_hnsw_{eid}")
    theirs_hnsw = loader.index_definitions(conn, "store_vectors_embedding_idx")
    loader.drop_indexes(conn, ours_hnsw)
    loader.drop_indexes(conn, theirs_hnsw)
    out: dict[str, Any] = {"index_definitions": [*ours_hnsw.values(), *theirs_hnsw.values()]}
    started = time.perf_counter()
    loader.copy_ours(conn, data, corpus, sys_.embedder.array, eid)
    out["load_ours_s"] = time.perf_counter() - started
    started = time.perf_counter()
    loader.load_theirs(url, data, sys_.embedder.array, sys_.embedder.dims)
    out["load_theirs_s"] = time.perf_counter() - started

    started = time.perf_counter()
    conn.execute(
        "VACUUM (ANALYZE) beads.namespaces, beads.passages, beads.facts, beads.edges, beads.fact_vectors, "
        "beads.passage_vectors, public.store, public.store_vectors"
    )
    out["vacuum_analyze_s"] = time.perf_counter() - started
    # pgvector says when an HNSW graph outgrows maintenance_work_mem (the build goes on, slower, on disk)
    notices: list[str] = []
    conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    out["maintenance_work_mem"] = maintenance_work_mem
    out["index_build_s"] = loader.build_indexes(conn, {**ours_hnsw, **theirs_hnsw}, maintenance_work_mem)
    out["index_build_notices"] = notices
    out["index_bytes"] = loader.index_sizes(conn, [name for _, name in [*ours_hnsw, *theirs_hnsw]])
    out["table_bytes"] = {
        r["name"]: int(r["bytes"])
        for r in conn.execute(
            "SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname IN ('beads', 'public')"
            " AND c.relname IN ('facts', 'passages', 'edges', 'fact_vectors', 'passage_vectors', 'store',"
            " 'store_vectors')"
        )
    }
    out["database_bytes"] = int(
        conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()["b"]
    )
    return out


def verify(conn: psycopg.Connection, sys_: Systems, data: loader.Dataset, corpus: Corpus, k: int) -> dict:
    """The bulk-loaded rows are the rows the library writes, and searches return k facts."""
    store, eid, checks = sys_.store, sys_.store.embedder_id, {}
    counts = conn.execute(
        """
        SELECT (SELECT count(*) FROM beads.facts) AS facts,
               (SELECT count(*) FROM beads.passages) AS passages,
               (SELECT count(*) FROM beads.fact_vectors) AS fact_vectors,
               (SELECT count(*) FROM beads.passage_vectors) AS passage_vectors,
               (SELECT count(*) FROM beads.edges WHERE relation = 'supersedes') AS supersedes_edges,
               (SELECT count(*) FROM public.store_vectors) AS their_vectors
        """
    ).fetchone()
    expected = {
        "facts": len(data.facts),
        "passages": len(data.passages),
        "fact_vectors": len(data.facts),
        "passage_vectors": len(data.passages),
        "supersedes_edges": len(data.supersedes),
        "their_vectors": len(data.facts),
    }
    checks["row_counts"] = {"found": dict(counts), "expected": expected, "ok": dict(counts) == expected}
    # every fact and passage has a vector in this space: nothing left for search to embed lazily
    checks["vectors_missing"] = vectors.ensure_coverage(conn, data.session_id, sys_.embedder, eid)

    # replaying loaded messages through capture_message writes nothing and yields the loaded ids
    rng = random.Random(5)
    replayed = []
    loaded_ids: dict[str, list[uuid.UUID]] = {}
    for f in data.facts:
        loaded_ids.setdefault(f.message.message_id, []).append(f.id)
    for message in rng.sample([m for m in corpus.messages if len(m.sentences) > 1], 6):
        ns = data.namespaces[message.agent]
        result = store.capture_message(
            ns,
            message.text,
            source=message.source,
            message_id=message.message_id,
            thread_id=message.thread_id,
        )
        replayed.append(
            result.written == 0 and [f.id for f in result.facts] == loaded_ids[message.message_id]
        )
    checks["capture_replay_matches"] = f"{sum(replayed)}/{len(replayed)}"

    # chains read back as supersede leaves them
    chains_ok = []
    for new, old in rng.sample(data.supersedes, min(6, len(data.supersedes))):
        history = store.audit.history(old.id)
        head = history[-1]
        chains_ok.append(
            head.id == old.head_id
            and store.get(old.id).status is Status.SUPERSEDED
            and new.id in {f.id for f in history}
            and head.status is Status.ACTIVE
        )
    checks["chains_match"] = f"{sum(chains_ok)}/{len(chains_ok)}"

    hits = [len(store.search(data.root, q)) for q in queries(random.Random(6), corpus, 8)]
    checks["search_hits"] = hits
    checks["search_returns_k"] = all(h == k for h in hits)
    checks["ok"] = (
        checks["row_counts"]["ok"]
        and checks["vectors_missing"] == 0
        and all(replayed)
        and all(chains_ok)
        and checks["search_returns_k"]
    )
    return checks


def measure_search(
    sys_: Systems, data: loader.Dataset, query_texts: list[str], warmup: list[str], options: SearchOptions
) -> dict[str, Any]:
    store, eid, dims, root = sys_.store, sys_.store.embedder_id, sys_.embedder.dims, data.root
    their_prefix = ("memories", data.session_id)
    qvec = {q: sys_.embedder.vector(q) for q in [*query_texts, *warmup]}
    fact_meta = {f.id: f.sentence for f in data.facts}
    superseded = {f.id.hex for f in data.facts if f.status is Status.SUPERSEDED}
    series: dict[str, list[float]] = {"ours": [], "theirs": [], "theirs_unprepared": [], "ours_store": []}
    blocks: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": []}

    with store.pool.connection() as conn:

        def ours(q: str) -> Any:
            return retrieval.search(conn, root, q, qvec[q], eid, dims, options)

        def theirs(q: str) -> Any:
            return sys_.theirs.search(their_prefix, query=q, limit=options.k)

        def theirs_unprepared(q: str) -> Any:
            return sys_.theirs_unprepared.search(their_prefix, query=q, limit=options.k)

        def ours_store(q: str) -> Any:
            return store.search(root, q, options)

        calls = {
            "ours": ours,
            "theirs": theirs,
            "theirs_unprepared": theirs_unprepared,
            "ours_store": ours_store,
        }
        for q in warmup:
            for fn in calls.values():
                fn(q)
        for i, q in enumerate(query_texts):
            # A B C D, then D C B A: no series always runs right after the same other one
            order = list(calls) if i % 2 == 0 else list(reversed(calls))
            for name in order:
                started = time.perf_counter()
                result = calls[name](q)
                series[name].append((time.perf_counter() - started) * 1000)
                if name == "ours":
                    blocks["ours"].append(_our_block(result, fact_meta, q))
                elif name == "theirs":
                    blocks["theirs"].append(_their_block(result, fact_meta, superseded, q))

    out: dict[str, Any] = {name: writes.summary(samples) for name, samples in series.items()}
    out["ratio_p50"] = out["ours"]["p50"] / out["theirs"]["p50"]
    out["ratio_p95"] = out["ours"]["p95"] / out["theirs"]["p95"]
    out["ratio_unprepared_p50"] = out["ours"]["p50"] / out["theirs_unprepared"]["p50"]
    out["ratio_unprepared_p95"] = out["ours"]["p95"] / out["theirs_unprepared"]["p95"]
    out["block"] = {name: _block_summary(rows) for name, rows in blocks.items()}
    out["raw_ms"] = {name: [round(x, 4) for x in samples] for name, samples in series.items()}
    return out


def _on_target(sentence: Any, query: str) -> bool:
    return sentence is not None and sentence.attr.lower() in query.lower() and sentence.topic in query.lower()


def _our_block(result: Any, fact_meta: dict, query: str) -> dict[str, Any]:
    hits = list(result.hits)
    return {
        "facts": len(hits),
        "chars": sum(len(h.fact.body) for h in hits),
        "resolved": sum(h.resolved_from is not None for h in hits),
        "demoted": sum(h.demoted for h in hits),
        "top_on_target": bool(hits) and _on_target(fact_meta.get(hits[0].fact.id), query),
    }


def _their_block(items: list, fact_meta: dict, superseded: set[str], query: str) -> dict[str, Any]:
    meta = [fact_meta.get(uuid.UUID(hex=item.key)) for item in items]
    return {
        "facts": len(items),
        "chars": sum(len(item.value["content"]) for item in items),
        "superseded_returned": sum(1 for item in items if item.key in superseded),
        "top_on_target": bool(items) and _on_target(meta[0], query),
    }


def _block_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in rows[0]:
        values = np.asarray([float(r[key]) for r in rows])
        out[key] = {"mean": float(values.mean()), "min": float(values.min()), "max": float(values.max())}
    return out


def explain(
    conn: psycopg.Connection, sys_: Systems, data: loader.Dataset, query: str, options: SearchOptions
) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of our candidate query and of PostgresStore's search, same vector."""
    eid, dims = sys_.store.embedder_id, sys_.embedder.dims
    qvec = sys_.embedder.vector(query)
    statement, params = retrieval.candidate_query(data.root, query, qvec, eid, dims, options)
    with conn.transaction():
        retrieval.set_hnsw_local(conn, retrieval.ef_search_for(options))
        rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement, params).fetchall()
    ours_plan = "\n".join(r["QUERY PLAN"] for r in rows)

    [(their_sql, their_params)], _ = sys_.theirs._prepare_batch_search_queries(
        [(0, SearchOp(("memories", data.session_id), None, options.k, 0, query))]
    )
    their_params = [qvec if p is _placeholder() else p for p in their_params]
    rows = sys_.their_conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + their_sql, their_params).fetchall()
    their_plan = "\n".join(r["QUERY PLAN"] for r in rows)

    # supersede re-points every version of a chain: check that this lookup is indexed
    update_plan = "\n".join(
        r["QUERY PLAN"]
        for r in conn.execute(
            "EXPLAIN UPDATE beads.facts SET head_id = %s WHERE head_id = %s",
            (data.facts[0].id, data.facts[1].id),
        ).fetchall()
    )
    return {
        "query": query,
        "ours": ours_plan,
        "theirs": their_plan,
        "supersede_update": update_plan,
        "fact_index_used": f"fact_vectors_hnsw_{eid}" in ours_plan,
        # the keyword side (SearchOptions.keyword): the GIN indexes of migration 0008
        "keyword_searched": options.keyword,
        "keyword_fact_index_used": "facts_body_tsv" in ours_plan,
        "keyword_passage_index_used": "passages_body_tsv" in ours_plan,
        "their_index_used": "store_vectors_embedding_idx" in their_plan,
        # facts carved from the candidate passages, and a chain's versions, found through an index
        "passage_branch_indexed": "Seq Scan on facts" not in ours_plan,
        "supersede_update_indexed": "Seq Scan" not in update_plan,
        "jit_in_ours": "JIT:" in ours_plan,
        "jit_in_theirs": "JIT:" in their_plan,
    }


def _placeholder() -> object:
    from langgraph.store.postgres.base import PLACEHOLDER

    return PLACEHOLDER


# -- one size --------------------------------------------------------------------------------------


def run_size(server_uri: str, size: int, args: argparse.Namespace, base: TopicEmbedder) -> dict[str, Any]:
    name = size_label(size)
    phases = Phases(name)
    dbname = f"bench_{name}"
    with psycopg.connect(server_uri, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    url = make_conninfo(server_uri, dbname=dbname)
    options = search_options(args)
    out: dict[str, Any] = {"size": size, "k": args.k, "database": dbname, "loadavg": _loadavg()}

    corpus = phases.run("corpus", lambda: build_corpus(size, seed=args.seed))
    rng = random.Random(args.seed)
    query_texts = queries(rng, corpus, args.queries + WARMUP_QUERIES)
    warmup, query_texts = query_texts[:WARMUP_QUERIES], query_texts[WARMUP_QUERIES:]
    lookup = LookupEmbedder(base)

    pool = open_pool(url, min_size=2, max_size=4)
    try:
        store = FactStore(pool, lookup, search_options=options)
        store.setup()
        spaces = loader.make_namespaces(store, SESSION)
        data = phases.run("split messages into fact rows", lambda: loader.plan_rows(corpus, spaces, SESSION))
        out["dataset"] = data.counts()

        def embed_all() -> None:
            lookup.precompute([f.sentence.text for f in data.facts] + list(data.passages.values()))
            lookup.pin([*warmup, *query_texts])

        log(f"{name}: {len(data.facts):,} facts, {len(data.passages):,} passages, {len(query_texts)} queries")
        phases.run("embedding (untimed in results)", embed_all)
        # as PostgresStore.from_conn_string connects (prepared statements from the first execution)
        theirs, their_conn = open_theirs(
            url, lookup, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        theirs.setup()
        # as the playground runs it: on a connection configured like the library's pools (no prepares)
        theirs_unprepared, unprepared_conn = open_theirs(url, lookup, **CONNECTION_KWARGS)
        sys_ = Systems(store, lookup, theirs, their_conn, theirs_unprepared)
        with pool.connection() as conn:
            out["load"] = phases.run(
                "bulk load both systems + HNSW builds",
                lambda: load_both(conn, url, sys_, data, corpus, maintenance_work_mem_for(size, args)),
            )
            for index, seconds in out["load"]["index_build_s"].items():
                log(
                    f"{name}:   {index}: {seconds:.1f}s, {out['load']['index_bytes'].get(index, 0) / 1e6:.0f} MB"
                )
            out["verify"] = phases.run(
                "verify loaded rows and searches", lambda: verify(conn, sys_, data, corpus, args.k)
            )
            log(
                f"{name}:   checks: {json.dumps({k: v for k, v in out['verify'].items() if k != 'row_counts'})}"
            )
            out["search"] = phases.run(
                f"search x{len(query_texts)} (interleaved)",
                lambda: measure_search(sys_, data, query_texts, warmup, options),
            )
            out["plan"] = phases.run(
                "EXPLAIN ANALYZE", lambda: explain(conn, sys_, data, query_texts[0], options)
            )
        out["writes"] = phases.run(
            f"writes x{args.writes}",
            lambda: writes.measure_writes(store, lookup, data, corpus, args.writes, WARMUP_WRITES),
        )
        their_conn.close()
        unprepared_conn.close()
    finally:
        pool.close()
    with psycopg.connect(server_uri, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
    out["phases_s"] = phases.seconds
    out["loadavg_at_end"] = _loadavg()
    # the largest this process grew (the corpus, its rows and every vector are held in memory)
    out["bench_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    _write_plan(name, out["plan"], args.out.parent)
    return out


def _loadavg() -> list[str]:
    try:
        return Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return ["?", "?", "?"]


_VECTOR_LITERAL = re.compile(r"'\[[-+0-9.e,]+\]'")


def _write_plan(name: str, plan: dict[str, Any], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    plan = {
        k: _VECTOR_LITERAL.sub("'[768-d query vector]'", v) if isinstance(v, str) else v
        for k, v in plan.items()
    }
    lines = [
        f"# Query: {plan['query']!r}",
        f"# fact_vectors HNSW index used: {plan['fact_index_used']}",
        "# keyword side GIN indexes used (facts_body_tsv, passages_body_tsv): "
        + (
            f"{plan['keyword_fact_index_used']}, {plan['keyword_passage_index_used']}"
            if plan.get("keyword_searched")
            else "keyword search off"
        ),
        f"# PostgresStore HNSW index used: {plan['their_index_used']}",
        f"# no sequential scan of beads.facts in our query: {plan['passage_branch_indexed']}",
        f"# supersede's head_id UPDATE uses an index: {plan['supersede_update_indexed']}",
        "",
        "## ours: memory.retrieval candidate query (hnsw.iterative_scan = relaxed_order, ef_search as set)",
        plan["ours"],
        "",
        "## PostgresStore.search",
        plan["theirs"],
        "",
        "## supersede: UPDATE beads.facts SET head_id = new WHERE head_id = old (EXPLAIN only)",
        plan["supersede_update"],
        "",
    ]
    (folder / f"search_plan_{name}.txt").write_text("\n".join(lines))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200, help="messages captured and supersedes per size")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--no-keyword", dest="keyword", action="store_false",
                        help="our search without its keyword side (SearchOptions.keyword=False)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--maintenance-work-mem", default="4GB",
                        help="for the HNSW builds of sizes above 100k (1GB below)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS / "search_latency.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log("starting an embedded Postgres in a temporary directory")
    server_uri = scratch_server("beads-bench-")
    with psycopg.connect(server_uri, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        machine = machine_info(conn)
    log(f"{machine['nproc']} x {machine['cpu_model']}, load average {machine['loadavg_at_start']}")
    results: dict[str, Any] = {
        "parameters": {
            "sizes": args.sizes,
            "queries": args.queries,
            "warmup_queries": WARMUP_QUERIES,
            "writes": args.writes,
            "warmup_writes": WARMUP_WRITES,
            "k": args.k,
            "seed": args.seed,
            "dims": 768,
            "search_options": {
                k: (sorted(v) if isinstance(v, frozenset) else v)
                for k, v in vars_of(search_options(args)).items()
            },
            "maintenance_work_mem_for_builds": {
                str(size): maintenance_work_mem_for(size, args) for size in args.sizes
            },
            "targets": TARGETS,
        },
        "machine": machine,
        "sizes": [],
    }
    base = TopicEmbedder()
    results["parameters"]["embedder"] = base.name
    for size in args.sizes:
        results["sizes"].append(run_size(server_uri, size, args, base))
        _write_outputs(results, args.out)
    results["machine"]["loadavg_at_end"] = _loadavg()
    table = _write_outputs(results, args.out)
    print()
    print(table)
    log(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


def search_options(args: argparse.Namespace) -> SearchOptions:
    return SearchOptions(k=args.k, keyword=args.keyword)


def vars_of(options: SearchOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def _write_outputs(results: dict[str, Any], out: Path) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    table = markdown(results)
    # beside the JSON: a run written elsewhere (--out) leaves the committed tables alone
    out.with_suffix(".md").write_text(table)
    return table


if __name__ == "__main__":
    sys.exit(main())
