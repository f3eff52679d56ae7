"""Recall of the middleware's block (k=8, the library's defaults otherwise) under variants of the search
options, on conversations the evaluation harness has ingested.

    python -m bench.block_recall --locomo DATA/locomo/locomo_dev.json --beam DATA/beam/100K [--sample 60]
        [--variant NAME:option=value,option=value ...]

For each answerable question (a stride sample per question type): is any evidence turn among the
messages the top-8 facts were carved from, under each variant, and how many questions get the same
top 8 as the first variant. The variants by default: hybrid search as shipped, vectors alone
(keyword=False) and vectors with the passage scan. Reads the harness's cached databases (run
`python -m bench.eval run` on the same files first); each question is embedded once.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.eval.ingest import database_name, ensure_database
from bench.eval.loaders import LOADERS
from bench.eval.runner import changed_options, open_stores, sample_questions
from memory import retrieval
from memory.embedded import resolve_database_url
from memory.embedders.base import embed_query
from memory.embedders.select import embedder_from_name
from memory.retrieval import SearchOptions

DEFAULT_VARIANTS = (
    "hybrid:",
    "vectors only:keyword=False",
    "vectors, two scans:keyword=False,passage_scan=True",
)


def parse_variant(spec: str) -> tuple[str, SearchOptions]:
    """`name:option=value,...` as search options (the library's defaults for what is not named)."""
    name, _, assignments = spec.partition(":")
    return name, changed_options(SearchOptions(), assignments)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--beam", type=Path)
    parser.add_argument("--sample", type=int, default=60, help="questions per type (default 60)")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--variant", action="append", help="NAME:option=value,... (repeatable)")
    args = parser.parse_args(argv)
    variants = dict(parse_variant(v) for v in args.variant or DEFAULT_VARIANTS)
    first = next(iter(variants))
    embedder = embedder_from_name(args.embedder)
    print(
        "| dataset | questions | "
        + " | ".join(f"recall@8, {name}" for name in variants)
        + f" | same top 8 as {first} |"
    )
    print("|---|---:|" + "---:|" * len(variants) + "---|")
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
        found = dict.fromkeys(variants, 0)
        same = dict.fromkeys(variants, 0)
        with open_stores(url, embedder) as stores, stores.facts.pool.connection() as conn:
            facts = stores.facts
            for q in questions:
                ns = stores.ingestor.root(q.conversation_id)
                qvec = embed_query(embedder, q.question)
                tops = {}
                for name, options in variants.items():
                    hits = retrieval.search(
                        conn, ns, q.question, qvec, facts.embedder_id, embedder.dims, options
                    )
                    tops[name] = [h.fact.id for h in hits]
                    found[name] += any(h.fact.message_id in q.evidence_ids for h in hits)
                    same[name] += tops[name] == tops[first]
        n = len(questions)
        recalls = " | ".join(f"{100 * found[name] / n:.1f}%" for name in variants)
        sames = ", ".join(f"{name} {same[name]}" for name in variants if name != first)
        print(f"| {dataset.name} | {n} | {recalls} | {sames} (of {n}) |")


if __name__ == "__main__":
    main()
