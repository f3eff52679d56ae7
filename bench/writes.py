"""The write path, ours only: capture a message of 2 to 4 claims, and supersede, with vectors computed
in advance so that no embedding is timed.

Three streams of new messages, interleaved: the public `FactStore.capture_message`; its SQL layer
`memory.graph.facts.insert_facts`, split statement by statement by a timing wrapper; and the same layer
with `synchronous_commit = off`, to show what waiting for the WAL flush costs a capture.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import psycopg

from bench.corpus import Corpus, Message, build_corpus, sentence_about
from bench.embedder import LookupEmbedder
from bench.loader import Dataset
from memory.errors import CycleError, SupersedeRefusedError
from memory.graph import earlier_claims, restatements, supersession
from memory.graph import facts as fact_sql
from memory.graph import revisions as revision_sql
from memory.graph.facts import NewFact, Provenance, message_facts
from memory.graph.store import FactStore
from memory.ids import fact_id
from memory.model import Kind, Namespace, Source, Status
from memory.postgres import vectors
from memory.rules import corrections
from memory.rules.splitting import split_message

# -- where insert_facts spends its time ------------------------------------------------------------


class TimingConnection:
    """A connection that adds up the time of each kind of statement run through it (ms by label)."""

    LABELS = (
        ("INSERT INTO beads.passages", "insert passage"),
        ("INSERT INTO beads.facts", "insert facts"),
        ("INSERT INTO beads.fact_vectors", "insert fact vectors"),
        ("INSERT INTO beads.passage_vectors", "insert passage vectors"),
        ("DELETE FROM beads.vector_coverage", "mark written"),
        ("SELECT id, session_id,", "read or lock facts"),
        ("SELECT 1 - (va.embedding <=> vb.embedding)", "similarity guard"),
        ("INSERT INTO beads.edges", "insert edge"),
        ("UPDATE beads.facts SET status", "retire old version"),
        ("UPDATE beads.facts SET head_id", "re-point chain"),
    )

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn
        self.ms: dict[str, float] = {}

    def label(self, query: Any) -> str:
        text = " ".join(str(query).split())
        return next((name for prefix, name in self.LABELS if text.startswith(prefix)), "other")

    def add(self, label: str, started: float) -> None:
        self.ms[label] = self.ms.get(label, 0.0) + (time.perf_counter() - started) * 1000

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._conn.execute(query, params, **kwargs)
        finally:
            self.add(self.label(query), started)

    def transaction(self) -> Any:
        return _TimedTransaction(self)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _TimedCursor(self, self._conn.cursor(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _TimedTransaction:
    def __init__(self, owner: TimingConnection) -> None:
        self._owner = owner
        self._tx = owner._conn.transaction()

    def __enter__(self) -> Any:
        started = time.perf_counter()
        try:
            return self._tx.__enter__()
        finally:
            self._owner.add("begin", started)

    def __exit__(self, *exc: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._tx.__exit__(*exc)
        finally:
            self._owner.add("commit", started)


class _TimedCursor:
    def __init__(self, owner: TimingConnection, cursor: psycopg.Cursor) -> None:
        self._owner = owner
        self._cursor = cursor

    def __enter__(self) -> _TimedCursor:
        self._cursor.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._cursor.__exit__(*exc)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._cursor.executemany(query, params_seq, **kwargs)
        finally:
            self._owner.add(self._owner.label(query), started)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


# -- the measurements ------------------------------------------------------------------------------


def summary(samples_ms: list[float]) -> dict[str, float]:
    a = np.asarray(samples_ms, dtype=float)
    if not len(a):
        return {"n": 0}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "n": len(a),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "mean": float(a.mean()),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def new_messages(corpus: Corpus, count: int, lookup: LookupEmbedder, seed: int = 11) -> list[Message]:
    """Root messages of 2 to 4 claims the store has not seen, every vector computed in advance."""
    extra = build_corpus(count * 8, seed=seed, prefix=f"w{len(corpus.messages)}-")
    messages = [m for m in extra.messages if m.agent == "root" and len(m.sentences) >= 2][:count]
    if len(messages) < count:
        raise AssertionError(f"only {len(messages)} new messages for {count} writes")
    texts = []
    for m in messages:
        texts.append(m.text)
        texts.extend(c.text for c in split_message(m.text))
    lookup.pin(texts)
    return messages


def new_facts(message: Message, lookup: LookupEmbedder) -> list[NewFact]:
    """The NewFacts FactStore.capture_message builds for a root user message."""
    return message_facts(message.text, Source.PASSIVE_CAPTURE, message.message_id, lookup.embed)


def measure_writes(
    store: FactStore, lookup: LookupEmbedder, data: Dataset, corpus: Corpus, count: int, warmup: int
) -> dict[str, Any]:
    """capture_message (with and without its automatic-supersession check), insert_facts and
    insert_facts without a synchronous commit on alternating new messages; then supersede of an
    existing fact by a revised copy of it."""
    root, eid = data.root, store.embedder_id
    messages = new_messages(corpus, 4 * (count + warmup), lookup)
    misses_before = lookup.misses
    samples: dict[str, list[float]] = {
        "capture_message": [],
        "capture_message_no_auto_supersede": [],
        "insert_facts": [],
        "insert_facts_async_commit": [],
    }
    auto_superseded = 0
    claims: list[float] = []
    steps: dict[str, list[float]] = {}
    pending: list[int] = []
    with store.pool.connection() as conn:
        for i in range(count + warmup):
            a, b, c, d = messages[4 * i : 4 * i + 4]
            # Messages reach a chat seconds apart, and the indexer needs ~2 ms per vector at 100k: it
            # is idle when the next one arrives. Back to back, it would still be indexing the last
            # iteration's vectors (and sharing the WAL and both cores) during the timed capture.
            # Drain it, untimed, to time the capture a user meets; the lag is reported below.
            pending.append(vectors.pending_count(conn))
            store.index_pending()
            started = time.perf_counter()
            result = store.capture_message(root, a.text, message_id=a.message_id, thread_id=a.thread_id)
            elapsed = {"capture_message": (time.perf_counter() - started) * 1000}
            auto_superseded += len(result.superseded)
            # the same call with capture's supersession check off: what the check costs (memory.graph.supersession)
            store.index_pending()
            store.auto_supersede = False
            try:
                started = time.perf_counter()
                store.capture_message(root, d.text, message_id=d.message_id, thread_id=d.thread_id)
                elapsed["capture_message_no_auto_supersede"] = (time.perf_counter() - started) * 1000
            finally:
                store.auto_supersede = True
            timed = TimingConnection(conn)
            elapsed["insert_facts"] = _insert(timed, root, b, lookup, eid)
            conn.execute("SET synchronous_commit = off")
            elapsed["insert_facts_async_commit"] = _insert(conn, root, c, lookup, eid)
            conn.execute("RESET synchronous_commit")
            if i >= warmup:
                for name, ms in elapsed.items():
                    samples[name].append(ms)
                claims.append(result.written)
                for step, ms in timed.ms.items():
                    steps.setdefault(step, []).append(ms)
        started = time.perf_counter()
        drained = store.index_pending()
        drain_s = time.perf_counter() - started

    # supersede: an active fact the user stated earlier, revised by a new near-duplicate fact
    rng = random.Random(9)
    candidates = [
        f
        for f in data.facts
        if f.namespace.id == root.id and f.kind is Kind.USER_INPUT and f.status is Status.ACTIVE
    ]
    picked = rng.sample(candidates, min(len(candidates), 2 * (count + warmup)))
    revisions = [sentence_about(rng, f.sentence.topic, f.sentence.attr, revision=True).text for f in picked]
    lookup.pin(revisions)
    # written without capture's own supersession, which would link revisions of one slot to each other
    # before the explicit supersede timed below could
    auto, store.auto_supersede = store.auto_supersede, False
    try:
        news = [
            store.remember(
                root, text, kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, source_key=f"rev-{i}"
            )
            for i, text in enumerate(revisions)
        ]
    finally:
        store.auto_supersede = auto
    supersede_ms: list[float] = []
    supersede_steps: dict[str, list[float]] = {}
    refused = 0
    pairs = list(zip(news, picked, strict=True))
    # even pairs: the public call; odd pairs: its SQL layer, statement by statement
    for i in range(0, len(pairs) - 1, 2):
        (new_a, old_a), (new_b, old_b) = pairs[i], pairs[i + 1]
        try:
            started = time.perf_counter()
            store.supersede(new_a, old_a.id)
            elapsed_ms = (time.perf_counter() - started) * 1000
            with store.pool.connection() as conn:
                timed = TimingConnection(conn)
                revision_sql.supersede(timed, new_b.id, old_b.id, eid, store.supersede_min_similarity)  # type: ignore[arg-type]
        # refused by the similarity guard, or its revision already retired as an echo of an earlier pick
        except (SupersedeRefusedError, CycleError):
            refused += 1
            continue
        if i // 2 >= warmup:
            supersede_ms.append(elapsed_ms)
            for step, ms in timed.ms.items():
                supersede_steps.setdefault(step, []).append(ms)
    samples["supersede"] = supersede_ms
    checks = measure_checks(store, lookup, root, count)
    return {
        "checks": checks,
        **{name: summary(values) for name, values in samples.items()},
        "claims_per_message": summary(claims),
        "auto_superseded_by_capture": auto_superseded,
        "auto_superseded_per_capture": auto_superseded / max(1, count + warmup),
        "insert_facts_steps_ms": {step: summary(ms) for step, ms in sorted(steps.items())},
        "supersede_steps_ms": {step: summary(ms) for step, ms in sorted(supersede_steps.items())},
        "supersede_refused": refused,
        # vectors still waiting for the HNSW indexes when the next iteration began (three messages
        # later, ~20 ms), and the final drain
        "indexer": {
            "pending_after_each_capture": summary([float(n) for n in pending]),
            "drained_at_end": drained,
            "drain_s": drain_s,
        },
        "embedder_misses": lookup.misses - misses_before,
        "raw_ms": {name: [round(x, 4) for x in values] for name, values in samples.items()},
    }


def _insert(conn: Any, ns: Any, message: Message, lookup: LookupEmbedder, eid: int) -> float:
    items = new_facts(message, lookup)
    provenance = Provenance(ns.agent_id, thread_id=message.thread_id, message_id=message.message_id)
    started = time.perf_counter()
    fact_sql.insert_facts(conn, ns, items, provenance, eid)
    return (time.perf_counter() - started) * 1000


# -- capture's checks on their own -----------------------------------------------------------------


def measure_checks(
    store: FactStore, lookup: LookupEmbedder, namespace: Namespace, count: int
) -> dict[str, Any]:
    """What capture's supersession and restatement checks cost of their own, per message (ms): the
    nearest earlier claims of each new claim (memory.graph.earlier_claims, one round trip, prepared, on an
    idle connection: inside a capture they travel with its INSERTs), and the rules over them
    (corrections.judge through supersession.accept, and corrections.restates), without writing
    anything. New messages, as capture would see them (their facts are not stored)."""
    eid, dims = store.embedder_id, store.embedder.dims
    floor = store.thresholds.relevance_floor
    short = min(store.supersede_min_similarity, store.thresholds.short_claim_similarity)
    messages = new_messages(build_corpus(1, seed=23), count, lookup, seed=23)
    query_ms: list[float] = []
    rules_ms: list[float] = []
    compared: list[float] = []
    store.index_pending()  # as for the timed captures: the indexer idle, nothing left to compare exactly
    with store.pool.connection() as conn:
        for i, message in enumerate(messages):
            items = new_facts(message, lookup)
            ids = [
                fact_id(namespace.session_id, namespace.id, item.source.value, item.source_key, item.body)
                for item in items
            ]
            queries = [
                earlier_claims.Query(
                    fid, item.claim_vector, None,
                    correct=supersession.may_correct(item), restate=restatements.may_restate(item),
                )
                for fid, item in zip(ids, items, strict=True)
            ]  # fmt: skip
            started = time.perf_counter()
            with conn.pipeline(), conn.transaction():
                sent = earlier_claims.send(
                    conn, namespace, queries, valid_from=None,
                    min_similarity=min(floor, short), embedder_id=eid, dims=dims, prepare=True,
                )  # fmt: skip
                nearest = {fid: earlier_claims.read(namespace, cursor, ids) for fid, cursor in sent.items()}
            queried = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            pairs = 0
            for item, fid in zip(items, ids, strict=True):
                if fid not in nearest:
                    continue
                if supersession.may_correct(item):
                    for row in nearest[fid].to_correct(short, supersession.CANDIDATES):
                        pairs += 1
                        if supersession.accept(
                            row.body, item.body, row.sim, store.supersede_min_similarity, short
                        ):
                            break
                if restatements.may_restate(item):
                    for row in nearest[fid].to_restate(floor, restatements.CANDIDATES):
                        pairs += 1
                        corrections.restates(row.body, item.body, by_user=item.kind is Kind.USER_INPUT)
            ruled = (time.perf_counter() - started) * 1000
            if i >= min(10, count // 5):  # warm-up: the first messages prepare the statements
                query_ms.append(queried)
                rules_ms.append(ruled)
                compared.append(pairs)
    total = [q + r for q, r in zip(query_ms, rules_ms, strict=True)]
    return {
        "nearest_claims_ms": summary(query_ms),
        "rules_ms": summary(rules_ms),
        "checks_ms": summary(total),
        "pairs_compared": summary(compared),
    }
