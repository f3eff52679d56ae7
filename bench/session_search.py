"""Search at the size one long session makes: a BEAM chat's memory, ours against PostgresStore.

    python -m bench.session_search --beam DATA/beam/1M --conversation beam-1m-6 \
        [--queries 200] [--rounds 3] [--out results/long-sessions/search-latency.json]

Both systems hold the same chat, in the evaluation harness's database for its tier (`python -m
bench.eval run` ingests it there; this ingests it too when it is not there yet): our fact graph (the
session's claims, one memory session per chat) and LangGraph's PostgresStore (one document per turn,
searched under the chat's namespace: the session filter). Queries are the chat's own user messages,
what the middleware searches with on each turn, drawn at random, and its probing questions. Every
query is embedded before the clock starts, so what is timed is each store's search and nothing of
the model: ours as `memory.retrieval.search` on a held connection (the statement and ranking, what
`FactStore.search` runs after embedding), theirs as `PostgresStore.search` (its query embedding a
cache hit). The calls alternate (A B, then B A) so machine noise lands on both. Each round prints
p50 / p95 and the ratio; the figure is the median over rounds. Also: how many hits each search
returned against k, and for ours, why candidates were left out when it returned fewer.

Then what the middleware waits for before each model call: our block for each query at each
`--block-budgets` retrieved budget (`plan_query`: as many searches as filling the budget takes, ranking,
the lines in reading order), twice over, the query's vector a cache hit as above. PostgresStore has no
block to set beside it.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from psycopg import sql

from bench import writes
from bench.eval.arms import docstore_namespace
from bench.eval.ingest import dataset_database, ensure_database
from bench.eval.loaders import load_beam_tiered
from bench.eval.runner import changed_options, open_stores
from memory import retrieval
from memory.context.assembler import Budgets
from memory.context.block import TierSettings
from memory.context.recall import plan_query
from memory.embedders.base import embed_query
from memory.embedders.select import embedder_from_name
from memory.graph.store import FactStore
from memory.model import Namespace
from memory.postgres.embedded_postgres import resolve_database_url
from memory.retrieval import SearchOptions
from memory.retrieval.hnsw import ef_search_for, set_hnsw_local
from memory.retrieval.keywords import keyword_words, known_common_words
from memory.retrieval.pipeline import find_candidates, hits_of
from memory.retrieval.statement import candidate_query


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beam", type=Path, required=True, help="the tier's folder (DATA/beam/1M)")
    p.add_argument("--conversation", required=True, help="the chat, as the harness names it (beam-1m-6)")
    p.add_argument(
        "--queries", type=int, default=200, help="user messages drawn as queries (and every question)"
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=Path("results/long-sessions/search-latency.json"))
    p.add_argument(
        "--as-ingested",
        action="store_true",
        help="search the chat as an earlier ingestion left it, even where ingestion has changed since"
        " (its fingerprint differs): search is timed, not what capture writes, and ingesting again"
        " costs minutes of CPU",
    )
    p.add_argument(
        "--search",
        default="",
        help="our search's options changed, option=value,... (as bench.eval run --search takes them, e.g."
        " keyword_candidates=16): what a variant would cost",
    )
    p.add_argument(
        "--block-budgets",
        type=int,
        nargs="*",
        default=[1200, 3000],
        help="time the middleware's block for each query at these retrieved budgets (none: skip)",
    )
    p.add_argument(
        "--tier",
        default="",
        help="the blocks' settings changed, option=value,... (as bench.eval run --tier takes them, e.g."
        " fill_gaps=True)",
    )
    p.add_argument(
        "--plan-cache-mode",
        choices=("auto", "force_generic_plan", "force_custom_plan"),
        default="auto",
        help="Postgres's plan_cache_mode on the connection our searches run on (auto: as the library runs; the"
        " other two tell what planning each search would cost, or save)",
    )
    return p.parse_args()


def time_parts(
    conn: Any,
    root: Namespace,
    texts: list[str],
    vectors: dict[str, Any],
    kind_of: dict[str, str],
    embedder_id: int,
    dims: int,
    options: SearchOptions,
) -> dict[str, dict[str, float]]:
    """Our search's two steps timed apart, as `memory.retrieval.search` runs them: the candidate
    statement (built, sent, its rows read) and ranking with the hits made of the chosen candidates
    (ranking in Python, the chosen rows' read with their messages' starts, the same-slot ordering among
    them), by kind of query; and how many candidates the statement returned."""
    samples: dict[str, list[float]] = {}
    for q in texts:
        t0 = time.perf_counter()
        candidates = find_candidates(conn, root, q, vectors[q], embedder_id, dims, options)
        t1 = time.perf_counter()
        hits_of(conn, root, q, candidates, options)
        t2 = time.perf_counter()
        samples.setdefault(f"statement_{kind_of[q]}s", []).append((t1 - t0) * 1000)
        samples.setdefault(f"ranking_{kind_of[q]}s", []).append((t2 - t1) * 1000)
        # not a time: the rows the statement returned, each one read, decoded and ranked
        samples.setdefault(f"candidates_{kind_of[q]}s", []).append(len(candidates.rows))
    return {key: writes.summary(s) for key, s in sorted(samples.items())}


def plan_summary(
    conn: Any, root: Namespace, q: str, vector: Any, embedder_id: int, dims: int, options: SearchOptions
) -> dict[str, float]:
    """Planning and execution time of our candidate statement for `q`, and the shares of the nearest
    claims' scan and of counting the query's words in the session (figures only: the plan names the
    query's words)."""
    common = known_common_words(conn, root.session_id, q, options)
    statement, params = candidate_query(root, q, vector, embedder_id, dims, options, common)
    with conn.transaction():
        set_hnsw_local(conn, ef_search_for(options))
        row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement, params).fetchone()
    [explained] = row["QUERY PLAN"]

    def cte_time(node: dict[str, Any], name: str) -> float | None:
        if node.get("Subplan Name") == f"CTE {name}":
            return float(node["Actual Total Time"])
        found = (cte_time(child, name) for child in node.get("Plans", ()))
        return next((t for t in found if t is not None), None)

    scan = cte_time(explained["Plan"], "claim_hits")
    counts = cte_time(explained["Plan"], "words")  # each word counted in the session: common or not
    return {
        # the words sent (the slots past them are NULL: memory.retrieval.statement.WORD_SLOTS)
        "words": float(sum(k.startswith("w") and v is not None for k, v in params.items())),
        "planning": float(explained["Planning Time"]),
        "execution": float(explained["Execution Time"]),
        "nearest_claims_scan": -1.0 if scan is None else scan,
        "keyword_counts": -1.0 if counts is None else counts,
    }


def time_blocks(
    facts: FactStore, root: Namespace, texts: list[str], budgets: list[int], tier: TierSettings
) -> dict[str, dict[str, Any]]:
    """What the middleware waits for before each model call, by retrieved budget: the block for each
    query (`plan_query`: the searches it takes to fill the budget, ranking, the lines), twice over.
    The first pass meets lines the searches above did not return; the second is warm."""
    figures: dict[str, dict[str, Any]] = {}
    for budget in budgets:
        for label in ("first", "warm"):
            took: list[float] = []
            searches: Counter[int] = Counter()
            for q in texts:
                t0 = time.perf_counter()
                plan = plan_query(facts, root, q, budgets=Budgets(retrieved=budget), tier=tier)
                took.append((time.perf_counter() - t0) * 1000)
                searches[plan.tier.searches if plan.tier else 0] += 1
            figures[f"{budget}_{label}"] = writes.summary(took) | {
                "searches": {str(n): c for n, c in sorted(searches.items())}
            }
        warm = figures[f"{budget}_warm"]
        print(
            f"  blocks of {budget} tokens: p50 {warm['p50']:.1f} / p95 {warm['p95']:.1f} ms warm, searches {warm['searches']}"
        )
    return figures


def main() -> None:
    args = _args()
    dataset = load_beam_tiered(args.beam)
    conversation = next((c for c in dataset.conversations if c.id == args.conversation), None)
    if conversation is None:
        ids = ", ".join(c.id for c in dataset.conversations)
        raise SystemExit(f"no conversation {args.conversation} in {args.beam} (it holds {ids})")
    embedder = embedder_from_name(args.embedder)
    server = resolve_database_url()
    name = dataset_database(dataset, embedder.name)
    url = ensure_database(server, name)
    users = [t.text for t in conversation.turns if t.role == "user"]
    rng = random.Random(args.seed)
    messages = rng.sample(users, min(args.queries, len(users)))
    questions = [q.question for q in conversation.questions]
    texts = messages + questions
    # a query's kind, to time them apart: a whole user message (BEAM's run to hundreds of words) or
    # one of the chat's short probing questions
    kind_of = {q: "message" for q in messages} | {q: "question" for q in questions}
    options = changed_options(SearchOptions(k=args.k), args.search)
    started = time.perf_counter()
    with open_stores(url, embedder) as stores:
        ingested_before = (
            args.as_ingested
            and stores.ingestor.conn.execute(
                "SELECT 1 FROM beads_eval.ingested WHERE conversation_id = %s", (conversation.id,)
            ).fetchone()
        )
        fingerprint_current = stores.ingestor.is_current(conversation)
        if not ingested_before:
            stores.ingestor.ingest(conversation)
        root = stores.ingestor.root(conversation.id)
        facts = stores.facts
        namespace = docstore_namespace(conversation.id)
        with facts.pool.connection() as conn:
            size = conn.execute(
                "SELECT count(*) AS n, count(*) FILTER (WHERE status = 'active') AS active "
                "FROM beads.facts WHERE session_id = %s",
                (conversation.id,),
            ).fetchone()
        documents = len(stores.docs.search(namespace, limit=100_000))
        vectors = {q: embed_query(embedder, q) for q in texts}
        embedder.embed(texts)  # PostgresStore embeds its query through embed(): a cache hit from here

        def ours(conn: Any, q: str) -> int:
            result = retrieval.search(conn, root, q, vectors[q], facts.embedder_id, embedder.dims, options)
            if len(result.hits) < args.k:
                short.append(len(result.hits))
                reasons.update(why.split(" (")[0] for _, why in result.dropped)
            return len(result.hits)

        def theirs(conn: Any, q: str) -> int:
            return len(stores.docs.search(namespace, query=q, limit=args.k))

        rounds: list[dict[str, Any]] = []
        short: list[int] = []
        reasons: Counter[str] = Counter()
        hits: dict[str, list[int]] = {"ours": [], "theirs": []}
        by_words: dict[int, list[float]] = {}  # ours after the first round, by the words it sent
        with facts.pool.connection() as conn:
            conn.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Literal(args.plan_cache_mode)))
            for q in texts[:40]:  # warm-up: plans, caches, the HNSW pages
                ours(conn, q)
                theirs(conn, q)
            short.clear()
            reasons.clear()
            calls = {"ours": ours, "theirs": theirs}
            for n_round in range(args.rounds):
                series: dict[str, list[float]] = {"ours": [], "theirs": []}
                by_kind: dict[str, list[float]] = {}
                order = texts[:]
                random.Random(args.seed + n_round).shuffle(order)
                for i, q in enumerate(order):
                    for label in list(calls) if i % 2 == 0 else list(reversed(calls)):
                        if label == "ours" and n_round > 0:
                            # the content words our statement will send (those known common left out)
                            common = known_common_words(conn, root.session_id, q, options)
                            sent = sum(w not in common for w in keyword_words(q))
                        t0 = time.perf_counter()
                        found = calls[label](conn, q)
                        series[label].append((time.perf_counter() - t0) * 1000)
                        if label == "ours" and n_round > 0:
                            by_words.setdefault(sent, []).append(series[label][-1])
                        by_kind.setdefault(f"{label}_{kind_of[q]}s", []).append(series[label][-1])
                        if n_round == 0:
                            hits[label].append(found)
                figures: dict[str, Any] = {label: writes.summary(s) for label, s in series.items()}
                figures["ratio_p50"] = figures["ours"]["p50"] / figures["theirs"]["p50"]
                figures["ratio_p95"] = figures["ours"]["p95"] / figures["theirs"]["p95"]
                figures["by_kind"] = {key: writes.summary(s) for key, s in sorted(by_kind.items())}
                for kind in ("messages", "questions"):
                    for p in ("p50", "p95"):
                        figures["by_kind"][f"ratio_{kind}_{p}"] = (
                            figures["by_kind"][f"ours_{kind}"][p] / figures["by_kind"][f"theirs_{kind}"][p]
                        )
                rounds.append(figures)
                print(
                    f"round {n_round + 1}: ours {figures['ours']['p50']:.2f} / {figures['ours']['p95']:.2f} ms, "
                    f"PostgresStore {figures['theirs']['p50']:.2f} / {figures['theirs']['p95']:.2f} ms, "
                    f"ratio p50 {figures['ratio_p50']:.2f}, p95 {figures['ratio_p95']:.2f}"
                )
                for kind in ("messages", "questions"):
                    o, t = figures["by_kind"][f"ours_{kind}"], figures["by_kind"][f"theirs_{kind}"]
                    print(
                        f"  {kind}: ours {o['p50']:.2f} / {o['p95']:.2f} ms, "
                        f"PostgresStore {t['p50']:.2f} / {t['p95']:.2f} ms"
                    )
            parts = time_parts(conn, root, texts, vectors, kind_of, facts.embedder_id, embedder.dims, options)
        blocks = time_blocks(
            facts, root, texts, args.block_budgets, changed_options(TierSettings(), args.tier)
        )
        with facts.pool.connection() as conn:
            longest = max(messages, key=lambda q: len(q.split()))
            plans = {
                label: plan_summary(conn, root, q, vectors[q], facts.embedder_id, embedder.dims, options)
                for label, q in (("longest_message", longest), ("first_question", questions[0]))
                if q
            }
            # the same figures over a sample of the queries: the median of each
            sampled = [
                plan_summary(conn, root, q, vectors[q], facts.embedder_id, embedder.dims, options)
                for q in random.Random(args.seed).sample(texts, min(40, len(texts)))
            ]
            plans["median_of_40_queries"] = {
                key: statistics.median(p[key] for p in sampled) for key in sampled[0]
            }
            for label, plan in plans.items():
                print(f"  plan of the {label.replace('_', ' ')}: {plan}")
    median = (
        {key: statistics.median(r[key] for r in rounds) for key in ("ratio_p50", "ratio_p95")}
        | {
            f"{key}": statistics.median(r["by_kind"][key] for r in rounds)
            for key in rounds[0]["by_kind"]
            if key.startswith("ratio_")
        }
        | {
            f"{key}_{p}": statistics.median(r["by_kind"][key][p] for r in rounds)
            for key in rounds[0]["by_kind"]
            if not key.startswith("ratio_")
            for p in ("p50", "p95")
        }
        | {
            f"{label}_{p}": statistics.median(r[label][p] for r in rounds)
            for label in ("ours", "theirs")
            for p in ("p50", "p95")
        }
    )
    result = {
        "conversation": conversation.id,
        "database": name,
        "facts_in_session": size["n"] if size else None,
        "active_facts_in_session": size["active"] if size else None,
        "documents_in_namespace": documents,
        "turns": len(conversation.turns),
        "queries": len(texts),
        "k": args.k,
        "rounds": rounds,
        "median_of_rounds": median,
        "hits_returned": {
            label: {"mean": statistics.fmean(h), "min": min(h), "short_of_k": sum(x < args.k for x in h)}
            for label, h in hits.items()
            if h
        },
        "ours_short_blocks_dropped_reasons": dict(reasons.most_common()),
        # ours once more, its two steps timed apart (after the rounds: every cache as warm as theirs)
        "ours_parts_ms": parts,
        # EXPLAIN ANALYZE of our candidate statement: its planning, its execution, and the part of
        # the execution that the nearest claims' scan (the claim_hits CTE) took
        "ours_plans_ms": plans,
        # the middleware's block for each query, by retrieved budget (`time_blocks`)
        "ours_blocks_ms": blocks,
        # ours in the rounds after the first, by how many content words the statement sent: each word
        # not yet known common is counted in the session and ranks its matches
        "ours_after_round_1_by_words_sent": {
            str(n): {"searches": len(ms), "p50": statistics.median(ms), "p95": writes.summary(ms)["p95"]}
            for n, ms in sorted(by_words.items())
        },
        "plan_cache_mode": args.plan_cache_mode,
        "search_changes": args.search,
        "tier_changes": args.tier,
        "ingested_now": not ingested_before and not fingerprint_current,
        # False: searched as an earlier ingestion left the chat (--as-ingested)
        "ingestion_current": fingerprint_current,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": f"{platform.machine()}, {platform.system()}",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))


if __name__ == "__main__":
    main()
