"""What a question on a fresh thread is shown after the user stated a fact and then maybe changed it.
Our block and the stock store's search, side by side, with no chat model.

    uv run --extra dev python -m bench.fresh_thread [--sequences FILE] [--k 8] [--out results/fresh-thread]

This is the playground's setting: every message goes on a thread of its own, so the model sees memory
and nothing else. Each sequence (bench/eval/data/sequences_blind.jsonl, written apart from the rules;
sequences_blind2.jsonl, a second writer's, held out)
goes into a fresh session, message by message, an hour apart:

  ours   FactStore.capture_message (passive capture, as the middleware does), then FactStore.search
         for the question. We read the top `k` hits as the block shows them: resolved to their
         current version, some flagged possibly outdated. We run it twice, with automatic
         supersession on and off, to split what capture decides from what ranking does.
  stock  LangGraph's PostgresStore: one document per message, embedded with the same model, and
         the top `k` documents for the question (what a memory tool built on it retrieves).

A hit holds a value when its text contains it (case-insensitively). For an update, with the old and
new values:
  current first      of the hits holding either value, the first holds the new one and is not flagged;
  stale as current   some hit holds the old value but not the new one, and is not flagged.
For a look-alike (the first fact still true, a later message only resembles a change):
  fact first         of the hits holding the fact's value or the look-alike's, the first holds the fact's
                     and is not flagged;
  fact lost          no hit holds the fact's value unflagged (superseded away, or flagged outdated).
Stock hits carry no flags, so for them only the order and the presence count.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.postgres import PostgresStore
from psycopg.rows import dict_row

from bench.eval.loaders import SEQUENCE_START, SEQUENCE_STEP
from bench.eval.supersession_pairs import DATA_DIR, read_jsonl
from bench.scratch import scratch_database
from memory.context.block import shown_as_outdated
from memory.embedders.select import embedder_from_name
from memory.graph.store import FactStore
from memory.model import Namespace, Status
from memory.postgres.connection import open_pool

SEQUENCES = DATA_DIR / "sequences_blind.jsonl"
RESULTS = Path("results/fresh-thread")

Shown = list[tuple[str, bool]]  # (text, flagged) of the hits the question is shown, best first


def holds(text: str, value: str) -> bool:
    return value.lower() in text.lower()


def judge(row: dict[str, Any], shown: Shown) -> dict[str, bool]:
    """The figures of one sequence from what its question was shown."""
    current = row["current"]
    other = row["stale"] if row["kind"] == "update" else row["other"]
    either = [(t, f) for t, f in shown if holds(t, current) or holds(t, other)]
    first = bool(either) and holds(either[0][0], current) and not either[0][1]
    if row["kind"] == "update":
        stale = any(holds(t, other) and not holds(t, current) and not f for t, f in shown)
        return {"current_first": first, "stale_as_current": stale}
    return {"fact_first": first, "fact_lost": not any(holds(t, current) and not f for t, f in shown)}


def capture_sequence(store: FactStore, ns: Namespace, row: dict[str, Any]) -> None:
    """A sequence's messages into `ns` as passive capture stores them, an hour apart, indexed."""
    for i, message in enumerate(row["messages"], 1):
        store.capture_message(ns, message, message_id=f"m{i}", valid_from=SEQUENCE_START + i * SEQUENCE_STEP)
    store.index_pending()


def put_sequence(docs: PostgresStore, row: dict[str, Any]) -> tuple[str, str]:
    """A sequence's messages as the stock store's documents, one per message; their namespace."""
    namespace = ("sequences", row["id"])
    for i, message in enumerate(row["messages"], 1):
        docs.put(namespace, f"m{i}", {"content": message})
    return namespace


def ours(store: FactStore, row: dict[str, Any], k: int) -> Shown:
    ns = store.root(f"seq-{row['id']}-{int(store.auto_supersede)}")
    capture_sequence(store, ns, row)
    hits = store.search(ns, row["question"], k=k).hits
    return [(h.fact.body, shown_as_outdated(h) or h.fact.status is not Status.ACTIVE) for h in hits]


def stock(store: PostgresStore, row: dict[str, Any], k: int) -> Shown:
    namespace = put_sequence(store, row)
    return [
        (str(item.value["content"]), False)
        for item in store.search(namespace, query=row["question"], limit=k)
    ]


def tally(results: Sequence[dict[str, bool]]) -> dict[str, str]:
    keys = sorted({key for r in results for key in r})
    return {key: f"{sum(r[key] for r in results)}/{len(results)}" for key in keys}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequences", type=Path, default=SEQUENCES)
    parser.add_argument("--k", type=int, default=8, help="hits the question is shown (default 8)")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = read_jsonl(args.sequences)
    url = scratch_database("beads-fresh-thread-", "fresh_thread")
    embedder = embedder_from_name(args.embedder)
    shown: dict[str, list[tuple[dict[str, Any], Shown]]] = {}
    with open_pool(url, min_size=1, max_size=2) as pool:
        for auto in (True, False):
            store = FactStore(pool, embedder, index_in_background=False, auto_supersede=auto)
            store.setup()
            lane = "ours" if auto else "ours, automatic supersession off"
            shown[lane] = [(row, ours(store, row, args.k)) for row in rows]
        with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
            docs = PostgresStore(
                conn, index={"dims": embedder.dims, "embed": embedder.embed, "fields": ["content"]}
            )
            docs.setup()
            shown["stock PostgresStore"] = [(row, stock(docs, row, args.k)) for row in rows]

    table: dict[str, dict[str, dict[str, str]]] = {}
    for lane, seen in shown.items():
        for kind in ("update", "lookalike"):
            table.setdefault(lane, {})[kind] = tally([judge(r, s) for r, s in seen if r["kind"] == kind])
    updates = sum(r["kind"] == "update" for r in rows)
    lines = [
        f"# Fresh thread: what a question is shown ({args.sequences.name}, top {args.k}, {args.embedder})",
        "",
        f"| lane | updates ({updates}): current first | stale shown as current "
        f"| look-alikes ({len(rows) - updates}): fact first | fact lost |",
        "|---|---:|---:|---:|---:|",
    ]
    for lane, kinds in table.items():
        u, look = kinds["update"], kinds["lookalike"]
        lines.append(
            f"| {lane} | {u['current_first']} | {u['stale_as_current']} | {look['fact_first']} | {look['fact_lost']} |"
        )
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    # gzipped like every other committed rows file (plain rows.jsonl is ignored under results/)
    with gzip.open(args.out / "rows.jsonl.gz", "wt", encoding="utf-8") as out:
        for lane, seen in shown.items():
            for row, hits in seen:
                record = {"lane": lane, "id": row["id"], "kind": row["kind"], **judge(row, hits)}
                record["shown"] = [{"text": t, "flagged": f} for t, f in hits]
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
