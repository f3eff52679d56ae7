"""Capture's cost against message length: peak memory growth and time of one `capture_message`.

    python -m bench.capture_size [--sizes 1024 16384 262144 1048576] [--embedder minilm|fake]
                                 [--out results/capture-size]

Each size runs in a fresh process (so one size's peak cannot hide another's) against one embedded
Postgres (or DATABASE_URL), in a fresh database per size: a message of ordinary sentences of that many
bytes, made from a fixed seed, captured once with no length limit (`max_chars=None`, the store's
default: all of it) and once at the middleware's default limit (what a live turn keeps). Peak growth is
the process's high-water mark during the call (VmHWM, reset just before it through
/proc/self/clear_refs) less its resident size before, with the embedding model already grown to its
largest batch (a fixed cost of the model, whatever the message); the server's memory is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.process_memory import status_bytes

SUBJECTS = [
    "The team",
    "Our vendor",
    "My manager",
    "The clinic",
    "The landlord",
    "Priya",
    "The school",
    "Dad",
]
VERBS = ["moved", "booked", "paid for", "cancelled", "asked about", "finished", "reviewed", "ordered"]
OBJECTS = [
    "the invoice",
    "the kitchen repair",
    "a new laptop",
    "the quarterly report",
    "the dentist visit",
    "two tickets",
    "the roof inspection",
    "the migration plan",
]
WHEN = [
    "on Monday",
    "last week",
    "in March",
    "before the deadline",
    "after lunch",
    "yesterday",
    "this morning",
]


def message_of(size: int, seed: int = 7) -> str:
    """Ordinary sentences, each with a number of its own, up to `size` bytes."""
    rng = random.Random(seed)
    out: list[str] = []
    total = 0
    while total < size:
        sentence = (
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} "
            f"for ${rng.randint(10, 9999)}."
        )
        if rng.random() < 0.15:
            sentence += "\n"
        out.append(sentence)
        total += len(sentence) + 1
    return " ".join(out)[:size]


def one(url: str, size: int, embedder_name: str, limit: str) -> dict[str, Any]:
    """In this process: capture one message of `size` bytes; its peak growth and seconds."""
    from memory.embedders import FakeEmbedder
    from memory.embedders.minilm import MiniLMEmbedder
    from memory.graph.store import FactStore
    from memory.postgres.connection import open_pool
    from memory.rules.clean_text import DEFAULT_MAX_MESSAGE_CHARS

    embedder = MiniLMEmbedder() if embedder_name == "minilm" else FakeEmbedder()
    text = message_of(size)
    with open_pool(url, min_size=1, max_size=2) as pool:
        store = FactStore(pool, embedder, index_in_background=False)
        store.setup()
        ns = store.root(f"size-{size}-{limit}")
        # the model's own working memory for its largest batch (16 texts of 256 tokens), a cost of
        # the model whatever the message: reach it before measuring what capture adds
        embedder.embed([message_of(2_000, seed=n) for n in range(64)])
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
        before = status_bytes("VmRSS")
        start = time.perf_counter()
        result = store.capture_message(
            ns, text, max_chars=None if limit == "none" else DEFAULT_MAX_MESSAGE_CHARS
        )
        seconds = time.perf_counter() - start
        peak = status_bytes("VmHWM")
    return {
        "bytes": size,
        "limit": limit,
        "embedder": embedder_name,
        "claims_written": result.written,
        "clipped_from": result.clipped_from,
        "seconds": round(seconds, 2),
        "peak_growth_mb": round((peak - before) / 2**20, 1),
    }


def _fresh_database(server: str, name: str) -> str:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server, dbname=name)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| message | limit | claims written | seconds | peak memory growth |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        size = f"{r['bytes'] // 1024} KB" if r["bytes"] < 2**20 else f"{r['bytes'] / 2**20:g} MB"
        limit = "none" if r["limit"] == "none" else "default (first 8,000 characters)"
        lines.append(
            f"| {size} | {limit} | {r['claims_written']} | {r['seconds']} | {r['peak_growth_mb']} MB |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 16384, 262144, 1048576])
    parser.add_argument("--embedder", choices=["minilm", "fake"], default="minilm")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--one", nargs=4, metavar=("URL", "SIZE", "EMBEDDER", "LIMIT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.one:
        url, size, embedder, limit = args.one
        print(json.dumps(one(url, int(size), embedder, limit)))
        return 0
    from bench.scratch import scratch_server

    rows: list[dict[str, Any]] = []
    server = os.environ.get("DATABASE_URL") or scratch_server("capture-size-")
    for size in args.sizes:
        for limit in ("none", "default"):
            url = _fresh_database(server, f"capture_size_{size}_{limit}")
            done = subprocess.run(
                [sys.executable, "-m", "bench.capture_size", "--one", url, str(size), args.embedder, limit],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = markdown(rows)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.out / "table.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
