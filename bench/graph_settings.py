"""What an HNSW build setting costs and finds, on the claim vectors of a harness database.

    python -m bench.graph_settings --beam DATA/beam/500K [--settings 16:64 12:64 12:48] [--rounds 2]
                                   [--out results/long-sessions-39/graph/graph-settings.json]

Capture writes about three claim vectors a message, and each joins the claim graph (the partial HNSW
index of memory.postgres.vectors): an insert links the vector to its m nearest and re-prunes their
neighbour lists, so it costs more than linearly in m. This copies every claim vector of the tier's
harness database (`python -m bench.eval run` ingests it; this only reads it) into a table on a
throwaway server (bench.scratch) and, for each `m:ef_construction` setting:

- builds the graph over all but the last tenth of the vectors, then times adding that tenth the way
  the background indexer does (batches of 128 rows marked indexed): milliseconds a vector;
- asks each of the tier's questions for its chat's 32 nearest claims through the graph, as search
  walks it (pgvector's iterative scan, relaxed order, the chat's session as the filter), and counts
  how many of the exact 32 nearest it returned (recall@32), with the query's time.

Settings alternate round by round so that machine drift lands on each. Nothing of the harness
database is changed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.eval.ingest import dataset_database
from bench.eval.loaders import load_beam_tiered
from bench.scratch import scratch_database
from memory.embedders.select import embedder_from_name
from memory.postgres.embedded_postgres import resolve_database_url

NEAREST = 32
EF_SEARCH = 64
BATCH = 128


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beam", required=True, help="a BEAM tier's folder (e.g. DATA/beam/500K)")
    parser.add_argument("--embedder", default="minilm", help="the harness's embedder (its database's name)")
    parser.add_argument("--settings", nargs="+", default=["16:64", "12:64"], help="m:ef_construction")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    return parser.parse_args()


def _claim_vectors(url: str) -> list[tuple[str, np.ndarray]]:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT f.session_id, v.embedding FROM beads.fact_vectors v JOIN beads.facts f ON f.id = v.fact_id "
            "ORDER BY f.recorded_at, f.id"
        ).fetchall()
    return [(session, np.asarray(vec.to_numpy(), dtype=np.float32)) for session, vec in rows]


def _one_setting(
    conn: psycopg.Connection[Any],
    m: int,
    efc: int,
    dims: int,
    rows: int,
    queries: list[tuple[str, np.ndarray]],
    exact: list[set[int]],
) -> dict[str, float]:
    added = max(1, rows // 10)
    conn.execute("DROP INDEX IF EXISTS graph")
    conn.execute("UPDATE vectors SET indexed = id < %s", (rows - added,))
    started = time.perf_counter()
    conn.execute(
        sql.SQL(
            "CREATE INDEX graph ON vectors USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {efc}) WHERE indexed"
        ).format(dims=sql.Literal(dims), m=sql.Literal(m), efc=sql.Literal(efc))
    )
    build = time.perf_counter() - started
    started = time.perf_counter()
    for first in range(rows - added, rows, BATCH):
        conn.execute("UPDATE vectors SET indexed = true WHERE id >= %s AND id < %s", (first, first + BATCH))
    insert_ms = (time.perf_counter() - started) * 1000 / added
    conn.execute("SET hnsw.iterative_scan = 'relaxed_order'")
    conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(EF_SEARCH)))
    walk = sql.SQL(
        "SELECT id FROM vectors WHERE indexed AND session = %s "
        "ORDER BY embedding::vector({dims}) <=> %s::vector({dims}) LIMIT {n}"
    ).format(dims=sql.Literal(dims), n=sql.Literal(NEAREST))
    found, took = 0, []
    for (session, vector), want in zip(queries, exact, strict=True):
        started = time.perf_counter()
        got = {row[0] for row in conn.execute(walk, (session, vector)).fetchall()}
        took.append((time.perf_counter() - started) * 1000)
        found += len(got & want)
    return {
        "build_s": round(build, 2),
        "insert_ms": round(insert_ms, 3),
        "recall_at_32": round(found / sum(len(w) for w in exact), 4),
        "query_p50_ms": round(statistics.median(took), 2),
        "query_p95_ms": round(float(np.percentile(took, 95)), 2),
    }


def compare(
    conn: psycopg.Connection[Any],
    vectors: list[tuple[str, np.ndarray]],
    queries: list[tuple[str, np.ndarray]],
    settings: list[str],
    rounds: int,
) -> dict[str, list[dict[str, float]]]:
    """Each `m:ef_construction` setting's figures, a row a round, on a table of `vectors` (session,
    vector) made in `conn`'s database; `queries` (session, vector) ask for their session's nearest."""
    dims = len(vectors[0][1])
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    register_vector(conn)
    conn.execute(
        sql.SQL(
            "CREATE TABLE vectors (id int PRIMARY KEY, session text, embedding vector({}), indexed bool)"
        ).format(sql.Literal(dims))
    )
    with conn.cursor() as cur, cur.copy("COPY vectors FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "text", "vector", "bool"])
        for i, (session, vector) in enumerate(vectors):
            copy.write_row((i, session, vector, True))
    conn.execute("CREATE INDEX ON vectors (session)")
    conn.execute("ANALYZE vectors")
    nearest = sql.SQL("SELECT id FROM vectors WHERE session = %s ORDER BY embedding <=> %s LIMIT {}").format(
        sql.Literal(NEAREST)
    )
    exact = [{row[0] for row in conn.execute(nearest, q).fetchall()} for q in queries]
    results: dict[str, list[dict[str, float]]] = {s: [] for s in settings}
    for round_ in range(rounds):
        for setting in settings if round_ % 2 == 0 else list(reversed(settings)):
            m, efc = (int(x) for x in setting.split(":"))
            got = _one_setting(conn, m, efc, dims, len(vectors), queries, exact)
            results[setting].append(got)
            print(f"round {round_}, m = {m}, ef_construction = {efc}: {got}", flush=True)
    return results


def main() -> None:
    args = _args()
    dataset = load_beam_tiered(args.beam)
    embedder = embedder_from_name(args.embedder)
    server = resolve_database_url()
    source = make_conninfo(server, dbname=dataset_database(dataset, embedder.name))
    try:
        vectors = _claim_vectors(source)
    except psycopg.OperationalError:
        raise SystemExit(
            f"no harness database for {args.beam}: run `python -m bench.eval run --beam {args.beam}` first"
        ) from None
    if not vectors:
        raise SystemExit(f"the harness database for {args.beam} holds no claim vectors yet")
    sessions = {session for session, _ in vectors}
    asked = [(c.id, q.question) for c in dataset.conversations if c.id in sessions for q in c.questions]
    embedded = embedder.embed([text for _, text in asked])
    queries = [
        (session, np.asarray(v, dtype=np.float32)) for (session, _), v in zip(asked, embedded, strict=True)
    ]
    dims = len(vectors[0][1])
    print(
        f"{len(vectors)} claim vectors of {len(sessions)} chats, {len(queries)} questions, {dims} dimensions"
    )
    # a throwaway server of its own (bench.scratch): the harness's server is only read
    with psycopg.connect(scratch_database("graph-settings-", "graph"), autocommit=True) as conn:
        results = compare(conn, vectors, queries, args.settings, args.rounds)
    summary = {
        s: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for s, runs in results.items()
    }
    print("\nmedians over rounds (m:ef_construction):")
    for setting, figures in summary.items():
        print(f"  {setting}: {figures}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "tier": dataset.name,
                    "claim_vectors": len(vectors),
                    "chats": len(sessions),
                    "questions": len(queries),
                    "dims": dims,
                    "ef_search": EF_SEARCH,
                    "runs": results,
                    "medians": summary,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
