"""Ways to send the same SQL that did not pay: the record behind leaving capture and search as they are.

    uv run --extra dev python -m bench.statement_variants [--facts 10000] [--rounds 400]   # ~4 minutes

One embedded Postgres in a temporary directory, one session of `--facts` facts with seeded 768-d
vectors. Each variant runs interleaved with the library's own code on the same inputs (A B, then
B A), and is checked to do the same thing (the same rows written; the same candidates returned).

Capture (`memory.facts.insert_facts`, a message of 2 to 4 claims):
- prepared: every statement sent with `prepare=True` (the pools run with `prepare_threshold=None`);
- one statement: passages, facts and both vector tables written by one statement of data-modifying
  CTEs over `unnest()`ed arrays, in place of the pipelined statements.

Search (the candidate query of `memory.retrieval`, the part that plans for 1.5 to 3 ms):
- prepared: the library's statement with the candidate count inlined, prepared;
- generic plan: that, with `plan_cache_mode = force_generic_plan`, so that it is planned once per
  connection.
A third variant led to a change: the passage scan, off by default, used to stay in the statement,
switched off by a parameter; leaving it out of the SQL took the query from 4.19 to 3.79 ms p50 at
10,000 facts (same candidates for all 420 queries), and the library now does that.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from bench.scratch import scratch_database
from memory import facts as fact_sql
from memory import vectors
from memory.connection import CONNECTION_KWARGS, open_pool
from memory.embedders import FakeEmbedder
from memory.facts import (
    FACT_COLUMNS,
    INSERT_FACT,
    INSERT_PASSAGE,
    NewFact,
    Provenance,
    check_trust,
    fact_params,
    message_facts,
)
from memory.ids import fact_id, passage_id
from memory.model import Fact, Namespace, Source
from memory.retrieval import SearchOptions, candidate_query, ef_search_for, set_hnsw
from memory.store import FactStore
from memory.vectors import INSERT_FACT_VECTOR, INSERT_PASSAGE_VECTOR, MARK_WRITTEN

RESULTS = Path(__file__).parent / "results" / "statement_variants.md"
WORDS = """budget postgres team deadline vector index memory agent graph cluster region latency cost
user release review schema migration backup replica tenant quota invoice""".split()  # noqa: SIM905

# -- capture variants -------------------------------------------------------------------------------

Written = tuple[list[uuid.UUID], dict[uuid.UUID, Fact]]


def _passages(ns: Namespace, items: Sequence[NewFact]) -> dict[uuid.UUID, tuple[str, Any]]:
    out: dict[uuid.UUID, tuple[str, Any]] = {}
    for item in items:
        if item.passage is not None:
            out.setdefault(passage_id(ns.session_id, item.passage), (item.passage, item.passage_vector))
    return out


def insert_prepared(
    conn: psycopg.Connection, ns: Namespace, items: Sequence[NewFact], prov: Provenance, eid: int
) -> Written:
    """insert_facts' statements, each prepared."""
    for item in items:
        check_trust(item.source, item.kind)
    passages = _passages(ns, items)
    ids, cursors = [], []
    with conn.pipeline(), conn.transaction():
        for pid, (body, _) in passages.items():
            conn.execute(INSERT_PASSAGE, (pid, ns.session_id, body), prepare=True)
        for item in items:
            fid = fact_id(ns.session_id, ns.id, item.source.value, item.source_key, item.body)
            cursors.append(conn.execute(INSERT_FACT, fact_params(ns, item, prov, fid), prepare=True))
            ids.append(fid)
        for item, fid in zip(items, ids, strict=True):
            conn.execute(INSERT_FACT_VECTOR, (eid, fid, vectors.as_vector(item.claim_vector)), prepare=True)
        for pid, (_, vec) in passages.items():
            conn.execute(INSERT_PASSAGE_VECTOR, (eid, pid, vectors.as_vector(vec)), prepare=True)
        conn.execute(MARK_WRITTEN, (ns.session_id, eid), prepare=True)
    rows = [c.fetchone() for c in cursors]
    return ids, {r["id"]: Fact.from_row(r) for r in rows if r is not None}


_ONE_STATEMENT = (
    """
WITH new_passages AS (
    INSERT INTO beads.passages (id, session_id, body)
    SELECT p.id, %(session)s, p.body FROM unnest(%(pids)s::uuid[], %(pbodies)s::text[]) AS p(id, body)
    ON CONFLICT (id) DO NOTHING
), new_passage_vectors AS (
    INSERT INTO beads.passage_vectors (embedder_id, passage_id, embedding)
    SELECT %(eid)s, p.id, p.embedding FROM unnest(%(pids)s::uuid[], %(pvecs)s::vector[]) AS p(id, embedding)
    ON CONFLICT DO NOTHING
), new_facts AS (
    INSERT INTO beads.facts (id, session_id, namespace_id, kind, source, source_key, agent_id,
        acting_on_behalf_of, body, passage_id, thread_id, message_id, span_start, span_end,
        head_id, valid_from, metadata)
    SELECT f.id, %(session)s, %(ns)s, f.kind, f.source, f.source_key, %(agent)s, %(behalf)s, f.body,
        f.passage_id, %(thread)s, %(message)s, f.span_start, f.span_end, f.id,
        coalesce(%(valid_from)s, now()), f.metadata
    FROM unnest(%(ids)s::uuid[], %(kinds)s::text[], %(sources)s::text[], %(keys)s::text[],
        %(bodies)s::text[], %(fpids)s::uuid[], %(starts)s::int[], %(ends)s::int[], %(metas)s::jsonb[])
        AS f(id, kind, source, source_key, body, passage_id, span_start, span_end, metadata)
    ON CONFLICT (id) DO NOTHING
    RETURNING """
    + FACT_COLUMNS
    + """
), new_fact_vectors AS (
    INSERT INTO beads.fact_vectors (embedder_id, fact_id, embedding)
    SELECT %(eid)s, v.id, v.embedding FROM unnest(%(ids)s::uuid[], %(fvecs)s::vector[]) AS v(id, embedding)
    ON CONFLICT DO NOTHING
), covered AS (
    DELETE FROM beads.vector_coverage WHERE session_id = %(session)s AND embedder_id <> %(eid)s
)
SELECT * FROM new_facts
"""
)


def insert_one_statement(
    conn: psycopg.Connection, ns: Namespace, items: Sequence[NewFact], prov: Provenance, eid: int
) -> Written:
    """Everything insert_facts writes, in one statement."""
    for item in items:
        check_trust(item.source, item.kind)
    passages = _passages(ns, items)
    ids = [fact_id(ns.session_id, ns.id, i.source.value, i.source_key, i.body) for i in items]
    params = {
        "session": ns.session_id,
        "ns": ns.id,
        "eid": eid,
        "agent": prov.agent_id,
        "behalf": prov.acting_on_behalf_of,
        "thread": prov.thread_id,
        "message": prov.message_id,
        "valid_from": prov.valid_from,
        "pids": list(passages),
        "pbodies": [body for body, _ in passages.values()],
        "pvecs": [Vector(vec) for _, vec in passages.values()],
        "ids": ids,
        "kinds": [i.kind.value for i in items],
        "sources": [i.source.value for i in items],
        "keys": [i.source_key for i in items],
        "bodies": [i.body for i in items],
        "fpids": [passage_id(ns.session_id, i.passage) if i.passage is not None else None for i in items],
        "starts": [i.span[0] if i.span else None for i in items],
        "ends": [i.span[1] if i.span else None for i in items],
        "metas": [Jsonb(i.metadata or {}) for i in items],
        "fvecs": [Vector(i.claim_vector) for i in items],
    }
    rows = conn.execute(_ONE_STATEMENT, params).fetchall()
    return ids, {r["id"]: Fact.from_row(r) for r in rows}


CAPTURE_VARIANTS: dict[str, Callable[..., Written]] = {
    "library (pipelined)": fact_sql.insert_facts,
    "prepared": insert_prepared,
    "one statement": insert_one_statement,
}

# -- search variants --------------------------------------------------------------------------------


def _inline_n(statement: sql.Composable, params: dict[str, Any], conn: psycopg.Connection) -> sql.SQL:
    """The statement with its candidate counts as literals (a generic plan cannot see a LIMIT $n)."""
    text = statement.as_string(conn)
    for name in ("n", "kn"):
        if name in params:
            text = text.replace(f"%({name})s", str(int(params[name])))
    return sql.SQL(text.replace("{", "{{").replace("}", "}}")).format()


# -- the run ----------------------------------------------------------------------------------------


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))).capitalize() + "."


def message(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(2, 4)))


def new_facts(text: str, embedder: FakeEmbedder) -> list[NewFact]:
    """What FactStore.capture_message hands insert_facts for `text` (vectors computed here, untimed)."""
    return message_facts(text, Source.PASSIVE_CAPTURE, uuid.uuid4().hex, embedder.embed)


def percentiles(samples: list[float]) -> str:
    a = np.asarray(samples)
    return f"{np.percentile(a, 50):.2f} / {np.percentile(a, 95):.2f}"


def interleave(names: list[str], rounds: int, run: Callable[[str, int], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else list(reversed(names)):
            out[name].append(run(name, i))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000, help="facts in the session (default 10,000)")
    parser.add_argument("--rounds", type=int, default=400, help="timed calls per variant (default 400)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the table is written")
    args = parser.parse_args(argv)
    url = scratch_database("beads-variants-", "variants")
    embedder = FakeEmbedder(768)
    rng = random.Random(7)
    warmup = 20
    with open_pool(url, min_size=2, max_size=2) as pool:
        store = FactStore(pool, embedder, index_in_background=False)
        store.setup()
        root = store.root("variants")
        print(f"loading {args.facts:,} facts ...", flush=True)
        loaded = 0
        while loaded < args.facts:
            loaded += store.capture_message(root, message(rng)).written
        store.index_pending()
        with pool.connection() as conn:
            conn.execute("ANALYZE")  # as autovacuum would have by then: plans for the real row counts
        eid, prov = store.embedder_id, Provenance(agent_id=root.agent_id)

        # capture: every variant writes fresh messages; each must write what the library writes
        inputs = [
            new_facts(message(rng), embedder) for _ in range(len(CAPTURE_VARIANTS) * (args.rounds + warmup))
        ]
        feed = iter(inputs)
        with pool.connection() as conn:
            for name, variant in CAPTURE_VARIANTS.items():
                items = new_facts(message(rng), embedder)
                ids, new = variant(conn, root, items, prov, eid)
                again, none = variant(conn, root, items, prov, eid)
                vecs = conn.execute(
                    "SELECT count(*) AS n FROM beads.fact_vectors WHERE fact_id = ANY(%s)", (ids,)
                ).fetchone()["n"]
                if len(new) != len(items) or none or again != ids or vecs != len(items):
                    raise AssertionError(f"{name} does not write what insert_facts writes")

            def capture(name: str, i: int) -> float:
                items = next(feed)
                store.index_pending()  # as in a chat: the indexer is idle when a message arrives
                started = time.perf_counter()
                CAPTURE_VARIANTS[name](conn, root, items, prov, eid)
                return (time.perf_counter() - started) * 1000

            captured = interleave(list(CAPTURE_VARIANTS), args.rounds + warmup, capture)
        store.index_pending()

        # search: the candidate query only, as memory.retrieval.search sends it
        options = SearchOptions()
        texts = [f"{sentence(rng)} {i}" for i in range(args.rounds + warmup)]
        queries = embedder.embed(texts)
        with pool.connection() as conn, psycopg.connect(url, **CONNECTION_KWARGS) as generic:
            register_vector(generic)
            for c in (conn, generic):
                set_hnsw(c, ef_search_for(options), local=False)
            generic.execute("SET plan_cache_mode = force_generic_plan")
            library, params0 = candidate_query(root, texts[0], queries[0], eid, 768, options)
            inlined = _inline_n(library, params0, conn)
            statements: dict[str, tuple[psycopg.Connection, Any, bool]] = {
                "library": (conn, library, False),
                "prepared": (conn, inlined, True),
                "generic plan": (generic, inlined, True),
            }
            answers: dict[str, list[Any]] = {name: [] for name in statements}

            def search(name: str, i: int) -> float:
                c, statement, prepare = statements[name]
                _, params = candidate_query(root, texts[i], queries[i], eid, 768, options)
                started = time.perf_counter()
                rows = c.execute(statement, params, prepare=prepare).fetchall()
                elapsed = (time.perf_counter() - started) * 1000
                answers[name].append(sorted((r["hit_id"], round(r["claim_sim"] or 0.0, 5)) for r in rows))
                return elapsed

            searched = interleave(list(statements), args.rounds + warmup, search)

    lines = [
        "# Statement variants (bench/statement_variants.py)",
        "",
        f"{args.facts:,} facts, {args.rounds} timed calls per variant after {warmup} warm-up, ms p50 / p95.",
        "",
        "| capture (insert_facts) | p50 / p95 | same rows |",
        "|---|---:|---:|",
        *(f"| {name} | {percentiles(xs[warmup:])} | yes |" for name, xs in captured.items()),
        "",
        "| search (candidate query) | p50 / p95 | same candidates |",
        "|---|---:|---:|",
    ]
    for name, samples in searched.items():
        same = sum(a == b for a, b in zip(answers[name], answers["library"], strict=True))
        lines.append(f"| {name} | {percentiles(samples[warmup:])} | {same}/{len(answers[name])} |")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
