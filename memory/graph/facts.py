"""The write path of the fact graph: insert facts idempotently, relate them, supersede, compact, forget.

Every function takes a psycopg connection in autocommit mode and opens its own transaction where
several statements must land together. Vectors arrive computed: nothing here calls a model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from memory.embedders.base import mean_of_parts
from memory.errors import (
    CycleError,
    FactNotFoundError,
    UntrustedWriteError,
)
from memory.ids import body_sha256, fact_id, passage_id
from memory.model import (
    FACT_COLUMNS,
    UNTRUSTED_SOURCES,
    Fact,
    Kind,
    Namespace,
    Relation,
    Source,
)
from memory.postgres import vectors
from memory.rules.splitting import Claim, passage_for, split_message


@dataclass(frozen=True, slots=True)
class NewFact:
    """A fact about to be written, with its vectors already computed."""

    body: str
    kind: Kind
    source: Source
    source_key: str
    claim_vector: Sequence[float]
    passage: str | None = None
    passage_vector: Sequence[float] | None = None
    span: tuple[int, int] | None = None
    metadata: dict[str, Any] | None = None


class ProvenanceArgs(TypedDict, total=False):
    """The keyword arguments every write takes to say where its facts come from: the agent that
    wrote them (default: the namespace's), on whose behalf, in which thread and message, and from
    when they hold (default: now)."""

    agent_id: str | None
    acting_on_behalf_of: str | None
    thread_id: str | None
    message_id: str | None
    valid_from: datetime | None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a write's facts come from, as stored on each of them."""

    agent_id: str
    acting_on_behalf_of: str | None = None
    thread_id: str | None = None
    message_id: str | None = None
    valid_from: datetime | None = None

    @classmethod
    def of(cls, ns: Namespace, args: ProvenanceArgs) -> Provenance:
        """The provenance a write into `ns` with keyword arguments `args` records."""
        return cls(
            agent_id=args.get("agent_id") or ns.agent_id,
            acting_on_behalf_of=args.get("acting_on_behalf_of"),
            thread_id=args.get("thread_id"),
            message_id=args.get("message_id"),
            valid_from=args.get("valid_from"),
        )

    @classmethod
    def of_fact(cls, fact: Fact) -> Provenance:
        """The provenance `fact` was written with: for a fact written from it (a part of it kept)."""
        return cls(fact.agent_id, fact.acting_on_behalf_of, fact.thread_id, fact.message_id, fact.valid_from)


def message_facts(
    text: str, source: Source, source_key: str, embed: Callable[[list[str]], Sequence[Sequence[float]]]
) -> list[NewFact]:
    """What capturing message `text` writes: one fact per claim, verbatim, with the message as their
    passage when it was cut. `embed` gets the claims in one batch; the passage's vector is their
    length-weighted mean (memory.embedders.base.mean_of_parts), not a model's reading of the message.
    (FactStore.capture_message does the same in bounded chunks.)"""
    claims = split_message(text)
    if not claims:
        return []
    passage = passage_for(text, claims)
    vecs = embed([c.text for c in claims])
    return claim_facts(claims, vecs, source, source_key, passage, passage_vector_of(claims, vecs, passage))


def passage_vector_of(
    claims: Sequence[Claim], vectors: Sequence[Sequence[float]] | NDArray[np.float32], passage: str | None
) -> list[float] | None:
    """The vector of the message `claims` were cut from (None where it was not cut: no passage)."""
    return None if passage is None else mean_of_parts([c.text for c in claims], vectors)


def claim_facts(
    claims: Sequence[Claim],
    vectors: Sequence[Sequence[float]],
    source: Source,
    source_key: str,
    passage: str | None,
    passage_vector: Sequence[float] | None,
) -> list[NewFact]:
    """The facts of a message's `claims` (each with its vector), keyed "<source_key>:<offset>".
    Untrusted sources (tool results) never yield directives: their questions and instructions are
    kept as plain content."""
    untrusted = source in UNTRUSTED_SOURCES
    return [
        NewFact(
            body=c.text,
            # a tool's questions are content; a delegating agent's task is its instruction, all of it
            kind=Kind.CONCLUSION
            if untrusted
            else Kind.DIRECTIVE
            if source is Source.DELEGATION
            else Kind(c.kind),
            source=source,
            source_key=f"{source_key}:{c.start}",
            claim_vector=vec,
            passage=passage,
            passage_vector=passage_vector,
            span=(c.start, c.end),
        )
        for c, vec in zip(claims, vectors, strict=False)
    ]


def check_trust(source: Source, kind: Kind) -> None:
    if source in UNTRUSTED_SOURCES and kind is Kind.DIRECTIVE:
        raise UntrustedWriteError(f"content from {source.value} cannot be stored as a directive")


INSERT_PASSAGE = (
    "INSERT INTO beads.passages (id, session_id, body) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING"
)

# The current fact a new one would repeat: the same claim of the same kind, source and speaker, cut
# from the same message (the same passage, or none), in the same namespace. A message said again as it
# was, under another key (a chat replayed on new threads), writes nothing new; the same claim inside
# another message is written, and linked as a restatement (memory.graph.restatements).
_REPEATED = """
SELECT e.id FROM beads.facts e
 WHERE e.namespace_id = %(ns)s AND md5(e.body) = md5(%(body)s) AND e.body = %(body)s
   AND e.status = 'active' AND e.head_id = e.id
   AND e.kind = %(kind)s AND e.source = %(source)s
   AND e.passage_id IS NOT DISTINCT FROM %(passage)s
   AND e.metadata->>'speaker' IS NOT DISTINCT FROM %(metadata)s::jsonb->>'speaker'
   AND e.id <> %(id)s"""

_REPEATED_FACT = f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE id = ({_REPEATED} LIMIT 1)"

# One fact row; its own id is its chain's head until something supersedes it. A replay under the same
# key conflicts, and one under another key finds its repeat (_REPEATED): either returns nothing, which
# is how insert_facts tells new facts from known ones.
INSERT_FACT = (
    """
INSERT INTO beads.facts (id, session_id, namespace_id, kind, source, source_key, agent_id,
    acting_on_behalf_of, body, passage_id, thread_id, message_id, span_start, span_end,
    head_id, valid_from, metadata)
SELECT %(id)s, %(session)s, %(ns)s, %(kind)s, %(source)s, %(source_key)s, %(agent)s,
    %(behalf)s, %(body)s, %(passage)s, %(thread)s, %(message)s, %(start)s, %(end)s,
    %(id)s, coalesce(%(valid_from)s, now()), %(metadata)s
 WHERE NOT EXISTS ("""
    + _REPEATED
    + """)
ON CONFLICT (id) DO NOTHING
RETURNING """
    + FACT_COLUMNS
)


def fact_params(ns: Namespace, item: NewFact, provenance: Provenance, fid: uuid.UUID) -> dict[str, Any]:
    """INSERT_FACT's parameters for `item`."""
    return {
        "id": fid,
        "session": ns.session_id,
        "ns": ns.id,
        "kind": item.kind.value,
        "source": item.source.value,
        "source_key": item.source_key,
        "agent": provenance.agent_id,
        "behalf": provenance.acting_on_behalf_of,
        "body": item.body,
        "passage": passage_id(ns.session_id, item.passage) if item.passage is not None else None,
        "thread": provenance.thread_id,
        "message": provenance.message_id,
        "start": item.span[0] if item.span else None,
        "end": item.span[1] if item.span else None,
        "valid_from": provenance.valid_from,
        "metadata": Jsonb(item.metadata or {}),
    }


@dataclass(frozen=True, slots=True)
class QueuedFacts:
    """A write `queue_facts` sent: every item's fact id, and the INSERTs whose rows say which were new."""

    ids: list[uuid.UUID]
    inserted: list[psycopg.Cursor[DictRow]]
    params: list[dict[str, Any]]

    def written(self) -> dict[uuid.UUID, Fact]:
        """The facts that were new, as written (in a pipeline, this waits for the server's answer)."""
        rows = [cursor.fetchone() for cursor in self.inserted]
        return {r["id"]: Fact.from_row(r) for r in rows if r is not None}

    def known(self, conn: psycopg.Connection[DictRow], ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Fact]:
        """For items of this write that were not new (`ids`), the facts they map to: the same fact
        written before (a replay under the same key), or the current fact they repeat."""
        wanted = list(dict.fromkeys(ids))
        found = {f.id: f for f in get_facts(conn, wanted)}
        by_id = dict(zip(self.ids, self.params, strict=True))
        for fid in wanted:
            if fid not in found and (row := conn.execute(_REPEATED_FACT, by_id[fid]).fetchone()) is not None:
                found[fid] = Fact.from_row(row)
        return found


def queue_facts(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    items: Sequence[NewFact],
    provenance: Provenance,
    embedder_id: int,
    *,
    passages: bool = True,
    prepare: bool = False,
) -> QueuedFacts:
    """Send the statements that write `items` into `ns`, inside the caller's transaction and, where
    it has one, pipeline: nothing here waits for an answer, so capture's own reads can travel in the
    same round trip (FactStore.capture_message). `passages=False`: the items' passage is stored
    already (a long message's later chunks), and is not sent again. `prepare`: memory.postgres.prepared's
    verdict, for the INSERT each fact is written with."""
    for item in items:
        check_trust(item.source, item.kind)
    ids: list[uuid.UUID] = []
    inserted: list[psycopg.Cursor[DictRow]] = []
    fact_vectors: list[tuple[uuid.UUID, Sequence[float]]] = []
    passage_rows: dict[uuid.UUID, Sequence[float] | None] = {}
    for item in items if passages else ():
        if item.passage is not None and passage_id(ns.session_id, item.passage) not in passage_rows:
            pid = passage_id(ns.session_id, item.passage)
            conn.execute(INSERT_PASSAGE, (pid, ns.session_id, item.passage))
            passage_rows[pid] = item.passage_vector
    params: list[dict[str, Any]] = []
    for item in items:
        fid = fact_id(ns.session_id, ns.id, item.source.value, item.source_key, item.body)
        params.append(fact_params(ns, item, provenance, fid))
        inserted.append(conn.execute(INSERT_FACT, params[-1], prepare=prepare))
        ids.append(fid)
        # a replay's vector rows conflict and are skipped like its facts
        fact_vectors.append((fid, item.claim_vector))
    vectors.write_fact_vectors(conn, embedder_id, fact_vectors)
    vectors.write_passage_vectors(
        conn, embedder_id, [(pid, vec) for pid, vec in passage_rows.items() if vec is not None]
    )
    vectors.mark_written(conn, ns.session_id, embedder_id)
    return QueuedFacts(ids, inserted, params)


def insert_facts(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    items: Sequence[NewFact],
    provenance: Provenance,
    embedder_id: int,
) -> tuple[list[uuid.UUID], dict[uuid.UUID, Fact]]:
    """Write `items` into `ns`; returns every item's fact id, and the facts that were new (as
    written: the caller needs no second read).

    Ids are content-addressed, so writing the same items again (a checkpoint replay re-running a
    capture hook) inserts nothing.
    """
    # Pipelined: no statement needs an earlier one's answer, so the whole write travels to the
    # server at once and waits for one reply instead of one per statement.
    with conn.pipeline(), conn.transaction():
        queued = queue_facts(conn, ns, items, provenance, embedder_id)
    return queued.ids, queued.written()


def get_facts(conn: psycopg.Connection[DictRow], ids: Iterable[uuid.UUID]) -> list[Fact]:
    ids = list(ids)
    rows = conn.execute(f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE id = ANY(%s)", (ids,)).fetchall()
    by_id = {r["id"]: Fact.from_row(r) for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def get_fact(conn: psycopg.Connection[DictRow], fid: uuid.UUID) -> Fact:
    facts = get_facts(conn, [fid])
    if not facts:
        raise FactNotFoundError(f"no fact {fid}")
    return facts[0]


def resolve_short_id(conn: psycopg.Connection[DictRow], session_id: str, short_id: str) -> Fact:
    """The fact of this session whose id starts with `short_id` (what tools hand to agents)."""
    cleaned = short_id.strip().lower().replace("-", "")
    if len(cleaned) < 6 or any(c not in "0123456789abcdef" for c in cleaned):
        raise FactNotFoundError(f"{short_id!r} is not a fact id (expected at least 6 hex digits)")
    rows = conn.execute(
        f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE session_id = %s AND replace(id::text, '-', '') LIKE %s "
        "LIMIT 2",
        (session_id, cleaned + "%"),
    ).fetchall()
    if not rows:
        raise FactNotFoundError(f"no fact {short_id!r} in this session")
    if len(rows) > 1:
        raise FactNotFoundError(f"{short_id!r} matches several facts; give more digits")
    return Fact.from_row(rows[0])


def lock_facts(conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Fact]:
    # lock in id order so two concurrent supersedes of overlapping facts cannot deadlock
    rows = conn.execute(
        f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
        (list(ids),),
    ).fetchall()
    return {r["id"]: Fact.from_row(r) for r in rows}


def relate(conn: psycopg.Connection[DictRow], src: uuid.UUID, relation: Relation, dst: uuid.UUID) -> None:
    """Add a non-supersedes edge (supersedes has its own guarded path)."""
    if relation is Relation.SUPERSEDES:
        raise ValueError("use supersede() for supersedes edges: it is guarded")
    if src == dst:
        raise CycleError("a fact cannot relate to itself")
    with conn.transaction():
        found = lock_facts(conn, [src, dst])
        if src not in found or dst not in found or found[src].session_id != found[dst].session_id:
            raise FactNotFoundError("both facts must exist in the same session")
        if (
            relation is Relation.CONTRADICTS
            and found[src].source in UNTRUSTED_SOURCES
            and (found[dst].kind is Kind.USER_INPUT)
        ):
            raise UntrustedWriteError(
                f"content from {found[src].source.value} cannot contradict the user's fact {found[dst].short_id}"
            )
        conn.execute(
            "INSERT INTO beads.edges (src, relation, dst, session_id) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (src, relation.value, dst, found[src].session_id),
        )


def relate_many(
    conn: psycopg.Connection[DictRow], src: uuid.UUID, relation: Relation, dsts: Sequence[uuid.UUID]
) -> None:
    """`relate` for one source and many targets, all or nothing."""
    with conn.transaction():
        for dst in dsts:
            relate(conn, src, relation, dst)


def edges_of(conn: psycopg.Connection[DictRow], fid: uuid.UUID) -> list[tuple[uuid.UUID, str, uuid.UUID]]:
    rows = conn.execute(
        "SELECT src, relation, dst FROM beads.edges WHERE src = %s OR dst = %s ORDER BY created_at, relation",
        (fid, fid),
    ).fetchall()
    return [(r["src"], r["relation"], r["dst"]) for r in rows]


def archive(conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID], summary_id: uuid.UUID) -> None:
    """Compaction: archive `ids` behind `summary_id` (derived_from edges), all or nothing."""
    with conn.transaction():
        found = lock_facts(conn, [summary_id, *ids])
        if summary_id not in found or any(i not in found for i in ids):
            raise FactNotFoundError("every fact to compact, and the summary, must exist")
        session = found[summary_id].session_id
        if any(found[i].session_id != session for i in ids):
            raise FactNotFoundError("compaction cannot cross sessions")
        for i in ids:
            conn.execute(
                "INSERT INTO beads.edges (src, relation, dst, session_id) VALUES (%s, 'derived_from', %s, %s) "
                "ON CONFLICT DO NOTHING",
                (summary_id, i, session),
            )
        conn.execute(
            "UPDATE beads.facts SET status = 'archived', valid_to = coalesce(valid_to, now())"
            " WHERE id = ANY(%s) AND session_id = %s",
            (list(ids), session),
        )


def forget_session(conn: psycopg.Connection[DictRow], session_id: str) -> int:
    """Delete everything the session stored, in one transaction; returns the number of facts removed."""
    with conn.transaction():
        conn.execute("DELETE FROM beads.edges WHERE session_id = %s", (session_id,))
        removed = conn.execute("DELETE FROM beads.facts WHERE session_id = %s", (session_id,)).rowcount
        conn.execute("DELETE FROM beads.passages WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM beads.namespaces WHERE session_id = %s", (session_id,))
        conn.execute("DELETE FROM beads.vector_coverage WHERE session_id = %s", (session_id,))
    return removed


__all__ = [
    "NewFact",
    "Provenance",
    "ProvenanceArgs",
    "archive",
    "body_sha256",
    "edges_of",
    "forget_session",
    "get_fact",
    "get_facts",
    "insert_facts",
    "lock_facts",
    "queue_facts",
    "relate",
    "relate_many",
    "resolve_short_id",
]
