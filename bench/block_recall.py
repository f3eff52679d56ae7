"""Recall of the middleware's block (k=8, the library's defaults) with one nearest-neighbour scan
(claims) or two (claims and passages), on conversations the evaluation harness has ingested.

    python -m bench.block_recall --locomo DATA/locomo/locomo_dev.json --beam DATA/beam/100K [--sample 60]

For each answerable question (a stride sample per question type): is any evidence turn among the
messages the top-8 facts were carved from, and are the two top-8 lists the same. Reads the harness's
cached databases (run `python -m memory.eval run` on the same files first); writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memory.connection import resolve_database_url
from memory.embedders.select import embedder_from_name
from memory.eval.ingest import database_name, ensure_database
from memory.eval.loaders import LOADERS
from memory.eval.runner import open_stores, sample_questions
from memory.retrieval import SearchOptions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--beam", type=Path)
    parser.add_argument("--sample", type=int, default=60, help="questions per type (default 60)")
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args(argv)
    embedder = embedder_from_name(args.embedder)
    print("| dataset | questions | recall@8, two scans | recall@8, claims only | same top 8 |")
    print("|---|---:|---:|---:|---:|")
    for loader, path in (("locomo", args.locomo), ("beam", args.beam)):
        if path is None:
            continue
        dataset = LOADERS[loader](path)
        url = ensure_database(
            resolve_database_url(), database_name(dataset.name, str(path.resolve()), embedder.name)
        )
        questions = [
            q
            for q in sample_questions([q for c in dataset.conversations for q in c.questions], args.sample)
            if q.evidence_ids
        ]
        found = {True: 0, False: 0}
        same = 0
        with open_stores(url, embedder) as stores:
            for q in questions:
                ns = stores.ingestor.root(q.conversation_id)
                tops = {}
                for scan in (True, False):
                    hits = stores.facts.search(ns, q.question, SearchOptions(passage_scan=scan)).hits
                    tops[scan] = [h.fact.id for h in hits]
                    found[scan] += any(h.fact.message_id in q.evidence_ids for h in hits)
                same += tops[True] == tops[False]
        n = len(questions)
        print(
            f"| {dataset.name} | {n} | {100 * found[True] / n:.1f}% | {100 * found[False] / n:.1f}% "
            f"| {same} of {n} |"
        )


if __name__ == "__main__":
    main()
