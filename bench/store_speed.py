"""BeadsStore against LangGraph's PostgresStore on LangGraph's store API, side by side in one run.

    python -m bench.store_speed [--items 2000] [--ops 200] [--runs 3] [--out results/store-speed/run.json]

One embedded Postgres in a temporary directory; per run a fresh database holding both stores (ours in
the `beads` schema, PostgresStore's tables in `public`), both indexing the `content` field with the
same embedding function (deterministic 384-d vectors from a hash of the text, so no model is timed,
and both pay the same for it). Each store is loaded with `--items` items in one namespace and as many
spread over ten namespaces under one prefix, then timed op by op, the two stores alternating (A B,
B A, ...) so machine noise lands on both:

- put: a new key's put; get: a get by key;
- search: a query in the one namespace (limit 10); search 10 ns: a query under the ten namespaces'
  prefix; listing: no query, newest first (limit 10) under that prefix;
- large batches: LangGraph's `test_large_batches_async` (N=1000, M=10: 60,000 concurrent aput, aget,
  alist_namespaces, asearch, aput, adelete on AsyncPostgresStore and AsyncBeadsStore), once per run.

Figures are medians per op; each run prints its ratios (ours / PostgresStore) and the last lines the
median over runs, since one run on a 2-core machine is inside its noise.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.scratch import scratch_server
from memory.doors.langgraph_store import AsyncBeadsStore, BeadsStore
from memory.postgres.connection import open_pool

RESULTS = Path(__file__).resolve().parent.parent / "results" / "store-speed"
DIMS = 384
WORDS = [
    "budget",
    "deadline",
    "vector",
    "database",
    "postgres",
    "latency",
    "region",
    "team",
    "hire",
    "owner",
    "cost",
    "plan",
    "launch",
]
OPS = ("put", "get", "search", "search 10 ns", "listing")


def embed(texts: list[str]) -> list[list[float]]:
    """Deterministic unit vectors from a hash of each text (what an embedding function returns)."""
    out = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vec = np.random.default_rng(seed).standard_normal(DIMS)
        out.append((vec / np.linalg.norm(vec)).tolist())
    return out


def sentence(i: int) -> str:
    return f"Item {i}: the {WORDS[i % len(WORDS)]} of {WORDS[(i * 7) % len(WORDS)]} is {i * 13 % 997}."


def index() -> Any:
    return {"dims": DIMS, "embed": embed, "fields": ["content"]}


ONE = ("bench", "one")
MULTI = [("bench", "multi", f"n{i}") for i in range(10)]


def load(store: Any, items: int) -> None:
    from langgraph.store.base import PutOp

    ops = [PutOp(ONE, f"k{i}", {"content": sentence(i), "i": i}) for i in range(items)]
    ops += [PutOp(MULTI[i % 10], f"k{i}", {"content": sentence(i), "i": i}) for i in range(items)]
    for start in range(0, len(ops), 500):
        store.batch(ops[start : start + 500])


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def workload(store: Any, n: int, tag: str) -> dict[str, Callable[[], Any]]:
    counter = iter(range(10**9))
    queries = [f"what is the {WORDS[i % len(WORDS)]} of {WORDS[(i * 5) % len(WORDS)]}" for i in range(n)]
    q = iter(queries * 10)
    return {
        "put": lambda: store.put(ONE, f"new-{tag}-{next(counter)}", {"content": sentence(next(counter))}),
        "get": lambda: store.get(ONE, f"k{next(counter) % 1000}"),
        "search": lambda: store.search(ONE, query=next(q), limit=10),
        "search 10 ns": lambda: store.search(("bench", "multi"), query=next(q), limit=10),
        "listing": lambda: store.search(("bench", "multi"), limit=10),
    }


async def large_batches(store: Any) -> None:
    """LangGraph's test_large_batches_async, as its body runs it."""
    n, m = 1000, 10
    coros = []
    for j in range(m):
        ns = ("test", "foo", "bar", "baz", str(j % 2))
        for i in range(n):
            coros += [
                store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                store.aget(ns, f"key{i}"),
                store.alist_namespaces(prefix=None, max_depth=j + 1),
                store.asearch(("test",)),
                store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                store.adelete(ns, f"key{i}"),
            ]
    assert len(await asyncio.gather(*coros)) == n * m * 6


async def time_large_batches(url: str) -> dict[str, float]:
    ms: dict[str, float] = {}
    async with AsyncPostgresStore.from_conn_string(url) as theirs:
        await theirs.setup()
        started = time.perf_counter()
        await large_batches(theirs)
        ms["PostgresStore"] = (time.perf_counter() - started) * 1000
    pool = await asyncio.to_thread(open_pool, url, min_size=1, max_size=4)
    try:
        ours = AsyncBeadsStore(BeadsStore.from_pool(pool, index=index()))
        await ours.setup()
        started = time.perf_counter()
        await large_batches(ours)
        ms["BeadsStore"] = (time.perf_counter() - started) * 1000
    finally:
        await asyncio.to_thread(pool.close)
    return ms


def one_run(server: str, run: int, items: int, n: int) -> dict[str, Any]:
    name = f"store_speed_{os.getpid()}_{run}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(server, dbname=name)
    samples: dict[str, dict[str, list[float]]] = {
        s: {op: [] for op in OPS} for s in ("BeadsStore", "PostgresStore")
    }
    with (
        PostgresStore.from_conn_string(url, index=index()) as theirs,
        open_pool(url, min_size=1, max_size=4) as pool,
    ):
        theirs.setup()
        ours = BeadsStore.from_pool(pool, index=index())
        ours.setup()
        stores = {"BeadsStore": ours, "PostgresStore": theirs}
        for store in stores.values():
            load(store, items)
        ours.facts.index_pending()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        calls = {s: workload(store, n, s) for s, store in stores.items()}
        for op in OPS:
            for i in range(n):
                order = ["BeadsStore", "PostgresStore"] if i % 2 == 0 else ["PostgresStore", "BeadsStore"]
                for s in order:
                    samples[s][op].append(timed(calls[s][op]))
    batches = asyncio.run(time_large_batches(url))
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    medians = {s: {op: statistics.median(v) for op, v in ops.items()} for s, ops in samples.items()}
    for s in medians:
        medians[s]["large batches"] = batches[s]
    ratios = {op: medians["BeadsStore"][op] / medians["PostgresStore"][op] for op in medians["BeadsStore"]}
    return {"run": run, "medians_ms": medians, "ratios": ratios, "load": os.getloadavg()}


def table(runs: list[dict[str, Any]]) -> str:
    ops = list(runs[0]["ratios"])
    lines = [
        "| op | BeadsStore ms | PostgresStore ms | ratio (median of runs) | ratios per run |",
        "|---|---:|---:|---:|---|",
    ]
    for op in ops:
        ours = statistics.median(r["medians_ms"]["BeadsStore"][op] for r in runs)
        theirs = statistics.median(r["medians_ms"]["PostgresStore"][op] for r in runs)
        ratio = statistics.median(r["ratios"][op] for r in runs)
        per_run = ", ".join(f"{r['ratios'][op]:.2f}" for r in runs)
        lines.append(f"| {op} | {ours:.2f} | {theirs:.2f} | {ratio:.2f}x | {per_run} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--items", type=int, default=2000, help="items in the one namespace, and again over ten"
    )
    parser.add_argument("--ops", type=int, default=200, help="timed calls per op and store")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "run.json")
    args = parser.parse_args()
    server = scratch_server("beads-store-speed-")
    runs = []
    for run in range(args.runs):
        result = one_run(server, run, args.items, args.ops)
        print(
            f"run {run}: load {result['load']}",
            json.dumps({k: round(v, 2) for k, v in result["ratios"].items()}),
        )
        runs.append(result)
    report = table(runs)
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "runs": runs}, indent=1))
    args.out.with_suffix(".md").write_text(report + "\n")


if __name__ == "__main__":
    main()
