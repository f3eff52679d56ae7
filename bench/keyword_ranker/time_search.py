"""Time FactStore.search with each keyword ranker on one ingested harness conversation.

The questions asked are that conversation's own (the dataset is read in place; only figures are
printed), each embedded once beforehand: what is timed is memory.retrieval.search, the statement and
the reads after it. Both rankers answer the same questions, alternating, on one connection; the
first pass is a warm-up, not timed, that also counts how often their hits differ.

    DATABASE_URL=... python -m bench.keyword_ranker.time_search DATABASE CONVERSATION_ID \
        --locomo PATH | --beam PATH [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

from bench.eval.loaders import load_beam, load_locomo
from memory.connection import open_pool
from memory.embedders.base import embed_query
from memory.embedders.select import embedder_from_name
from memory.retrieval import SearchOptions, ensure_bm25_indexes, keyword_words, search
from memory.store import FactStore

# The claim side alone, three ways, on the same words (every content word: no common-word cutoff here):
# ts_rank_cd over the session's GIN matches (the default), BM25 over the same matches (the library's
# bm25 formulation), and BM25 in the bm25 index's order with the session filtered afterwards.
_QUERY = """(SELECT string_agg(plainto_tsquery('english', w)::text, ' | ')
                  FILTER (WHERE numnode(plainto_tsquery('english', w)) > 0)
             FROM unnest(%(words)s::text[]) AS w)::tsquery"""
SIDE = {
    "ts_rank_cd": f"""SELECT f.id, ts_rank_cd(f.body_tsv, {_QUERY})::float8 AS rank FROM beads.facts f
        WHERE f.body_tsv @@ {_QUERY} AND f.session_id = %(session)s ORDER BY rank DESC LIMIT %(kn)s""",
    "bm25 session first": f"""WITH m AS MATERIALIZED (SELECT f.id, f.body FROM beads.facts f
        WHERE f.body_tsv @@ {_QUERY} AND f.session_id = %(session)s)
        SELECT id, -(body <@> to_bm25query(%(text)s, 'beads.facts_body_bm25')) AS rank FROM m
        ORDER BY rank DESC LIMIT %(kn)s""",
    "bm25 index order": """SELECT f.id, -(f.body <@> to_bm25query(%(text)s, 'beads.facts_body_bm25')) AS rank
        FROM beads.facts f WHERE f.session_id = %(session)s
        ORDER BY f.body <@> to_bm25query(%(text)s, 'beads.facts_body_bm25') LIMIT %(kn)s""",
}


def database_url(server: str, name: str) -> str:
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{name}"))


def summary(ms: list[float]) -> str:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    return f"n={len(ms)} median {statistics.median(ms):.2f} ms  p95 {p95:.2f} ms"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("database")
    ap.add_argument("conversation")
    ap.add_argument("--locomo")
    ap.add_argument("--beam")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--server", default=None, help="default: DATABASE_URL")
    args = ap.parse_args()
    server = args.server or os.environ["DATABASE_URL"]
    dataset = load_locomo(args.locomo) if args.locomo else load_beam(args.beam)
    conversation = next(c for c in dataset.conversations if c.id == args.conversation)
    questions = [q.question for q in conversation.questions]
    embedder = embedder_from_name("minilm")
    with open_pool(database_url(server, args.database), min_size=1, max_size=4) as pool:
        with pool.connection() as conn:
            ensure_bm25_indexes(conn)
        store = FactStore(pool, embedder)
        ns = store.root(conversation.id)
        base = store.search_options
        rankers = {name: replace(base, keyword_ranker=name) for name in ("ts_rank_cd", "bm25")}
        # the statement alone: each question embedded once, beforehand
        vectors = {q: embed_query(embedder, q) for q in questions}
        times: dict[str, list[float]] = {name: [] for name in rankers}
        differ = 0
        with pool.connection() as conn:

            def run(q: str, options: SearchOptions) -> list[str]:
                result = search(conn, ns, q, vectors[q], store.embedder_id, embedder.dims, options)
                return [h.fact.short_id for h in result.hits]

            for q in questions:  # warm-up, and how often the two rankers' hits differ
                differ += run(q, rankers["ts_rank_cd"]) != run(q, rankers["bm25"])
            for _ in range(args.repeat):
                for q in questions:
                    for name, options in rankers.items():
                        started = time.perf_counter()
                        run(q, options)
                        times[name].append((time.perf_counter() - started) * 1000)
            side: dict[str, list[float]] = {name: [] for name in SIDE}
            matches: list[int] = []  # claims matching a question's words: what each ranker scores
            lost = 0  # questions where the index order's top ranks differ from the session-first ones
            for q in questions:
                words = keyword_words(q)
                if not words:
                    continue
                params = {"words": words, "text": " ".join(words), "session": ns.session_id, "kn": 32}
                found = {}
                for name, statement in SIDE.items():
                    found[name] = [round(r["rank"], 4) for r in conn.execute(statement, params)]
                lost += found["bm25 session first"] != found["bm25 index order"]
                count = f"SELECT count(*) AS n FROM beads.facts f WHERE f.body_tsv @@ {_QUERY} AND f.session_id = %(session)s"
                row = conn.execute(count, params).fetchone()  # type: ignore[call-overload]
                matches.append(row["n"] if row else 0)
                for _ in range(args.repeat):
                    for name, statement in SIDE.items():
                        started = time.perf_counter()
                        conn.execute(statement, params).fetchall()
                        side[name].append((time.perf_counter() - started) * 1000)
    print(f"{args.database} {args.conversation}: {len(questions)} questions x {args.repeat}")
    print(f"  hits differ (ids or order) for {differ} of {len(questions)} questions")
    for name, ms in times.items():
        print(f"  search, {name:18s} {summary(ms)}")
    print(
        f"  claim side alone, {len(matches)} questions with a content word, matching claims scored: median"
        f" {statistics.median(matches):.0f}, max {max(matches)} (ranks differ, index order vs session first:"
        f" {lost} questions)"
    )
    for name, ms in side.items():
        print(f"    {name:18s} {summary(ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
