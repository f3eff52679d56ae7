"""The write path of the fact graph: insert facts idempotently, relate them, supersede, compact, forget.

Every function takes a psycopg connection in autocommit mode and opens its own transaction where
several statements must land together. Vectors arrive computed: nothing here calls a model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypedDict

import psycopg
from psycopg import pq
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from memory import vectors
from memory.corrections import says_one_thing
from memory.errors import (
    BeadsMemoryError,
    CycleError,
    FactNotFoundError,
    SupersedeRefusedError,
    UntrustedWriteError,
)
from memory.ids import body_sha256, fact_id, passage_id
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Namespace, Relation, Source, Status
from memory.prepared import worth_preparing
from memory.splitting import passage_for, split_message

# Below this cosine similarity two facts are not "the same claim, revised": the guard that stopped
# "The investigation into Weaviate has been completed." from retiring a user's constraints.
SUPERSEDE_MIN_SIMILARITY = 0.55

FACT_COLUMNS = (
    "id, session_id, namespace_id, kind, status, source, source_key, agent_id, acting_on_behalf_of, body, "
    "passage_id, thread_id, message_id, span_start, span_end, head_id, valid_from, valid_to, recorded_at, metadata"
)


def fact_columns(alias: str) -> str:
    """FACT_COLUMNS qualified by a table alias, for queries that join facts to other tables."""
    return ", ".join(f"{alias}.{c.strip()}" for c in FACT_COLUMNS.split(","))


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


def message_facts(
    text: str, source: Source, source_key: str, embed: Callable[[list[str]], Sequence[Sequence[float]]]
) -> list[NewFact]:
    """What capturing message `text` writes: one fact per claim, verbatim, with the message as their
    passage when it was cut. Untrusted sources (tool results) never yield directives: their questions
    and instructions are kept as plain content. `embed` gets the claims and the passage in one batch."""
    claims = split_message(text)
    if not claims:
        return []
    untrusted = source in UNTRUSTED_SOURCES
    passage = passage_for(text, claims)
    vecs = embed([c.text for c in claims] + ([passage] if passage else []))
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
            passage_vector=vecs[-1] if passage else None,
            span=(c.start, c.end),
        )
        for c, vec in zip(claims, vecs, strict=False)
    ]


def check_trust(source: Source, kind: Kind) -> None:
    if source in UNTRUSTED_SOURCES and kind is Kind.DIRECTIVE:
        raise UntrustedWriteError(f"content from {source.value} cannot be stored as a directive")


INSERT_PASSAGE = (
    "INSERT INTO beads.passages (id, session_id, body) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING"
)

# One fact row; its own id is its chain's head until something supersedes it. A replay conflicts and
# returns nothing, which is how insert_facts tells new facts from known ones.
INSERT_FACT = (
    """
INSERT INTO beads.facts (id, session_id, namespace_id, kind, source, source_key, agent_id,
    acting_on_behalf_of, body, passage_id, thread_id, message_id, span_start, span_end,
    head_id, valid_from, metadata)
VALUES (%(id)s, %(session)s, %(ns)s, %(kind)s, %(source)s, %(source_key)s, %(agent)s,
    %(behalf)s, %(body)s, %(passage)s, %(thread)s, %(message)s, %(start)s, %(end)s,
    %(id)s, coalesce(%(valid_from)s, now()), %(metadata)s)
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

    def written(self) -> dict[uuid.UUID, Fact]:
        """The facts that were new, as written (in a pipeline, this waits for the server's answer)."""
        rows = [cursor.fetchone() for cursor in self.inserted]
        return {r["id"]: Fact.from_row(r) for r in rows if r is not None}


def queue_facts(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    items: Sequence[NewFact],
    provenance: Provenance,
    embedder_id: int,
) -> QueuedFacts:
    """Send the statements that write `items` into `ns`, inside the caller's transaction and, where
    it has one, pipeline: nothing here waits for an answer, so capture's own reads can travel in the
    same round trip (FactStore.capture_message)."""
    for item in items:
        check_trust(item.source, item.kind)
    ids: list[uuid.UUID] = []
    inserted: list[psycopg.Cursor[DictRow]] = []
    fact_vectors: list[tuple[uuid.UUID, Sequence[float]]] = []
    passage_rows: dict[uuid.UUID, Sequence[float] | None] = {}
    for item in items:
        if item.passage is not None and passage_id(ns.session_id, item.passage) not in passage_rows:
            pid = passage_id(ns.session_id, item.passage)
            conn.execute(INSERT_PASSAGE, (pid, ns.session_id, item.passage))
            passage_rows[pid] = item.passage_vector
    for item in items:
        fid = fact_id(ns.session_id, ns.id, item.source.value, item.source_key, item.body)
        inserted.append(conn.execute(INSERT_FACT, fact_params(ns, item, provenance, fid)))
        ids.append(fid)
        # a replay's vector rows conflict and are skipped like its facts
        fact_vectors.append((fid, item.claim_vector))
    vectors.write_fact_vectors(conn, embedder_id, fact_vectors)
    vectors.write_passage_vectors(
        conn, embedder_id, [(pid, vec) for pid, vec in passage_rows.items() if vec is not None]
    )
    vectors.mark_written(conn, ns.session_id, embedder_id)
    return QueuedFacts(ids, inserted)


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


def _lock(conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Fact]:
    # lock in id order so two concurrent supersedes of overlapping facts cannot deadlock
    rows = conn.execute(
        f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
        (list(ids),),
    ).fetchall()
    return {r["id"]: Fact.from_row(r) for r in rows}


_SIMILARITY = """
SELECT 1 - (va.embedding <=> vb.embedding) AS similarity
  FROM beads.fact_vectors va, beads.fact_vectors vb
 WHERE va.fact_id = %s AND vb.fact_id = %s AND va.embedder_id = %s AND vb.embedder_id = %s
"""


def claim_similarity(
    conn: psycopg.Connection[DictRow], a: uuid.UUID, b: uuid.UUID, embedder_id: int
) -> float | None:
    row = conn.execute(_SIMILARITY, (a, b, embedder_id, embedder_id)).fetchone()
    return None if row is None else float(row["similarity"])


@dataclass(frozen=True, slots=True)
class Superseded:
    """What a supersede retired: the replaced version, and the echoes of it retired with it."""

    old: Fact
    echoes: tuple[uuid.UUID, ...] = ()


def supersede(
    conn: psycopg.Connection[DictRow],
    new_id: uuid.UUID,
    old_id: uuid.UUID,
    embedder_id: int,
    min_similarity: float = SUPERSEDE_MIN_SIMILARITY,
    *,
    reason: str | None = None,
    automatic: bool = False,
) -> Fact:
    """Make `new_id` replace the current version of `old_id`'s claim; returns the retired fact.

    The old fact stays queryable (status superseded, valid_to closed) and every earlier version of
    the chain now resolves to the new head. Replaying the same supersede is a no-op. `automatic`
    marks an edge capture wrote by itself (memory.supersession), with the rule's `reason`.
    """
    return supersede_with_echoes(
        conn, new_id, old_id, embedder_id, min_similarity, reason=reason, automatic=automatic
    ).old


def supersede_with_echoes(
    conn: psycopg.Connection[DictRow],
    new_id: uuid.UUID,
    old_id: uuid.UUID,
    embedder_id: int,
    min_similarity: float = SUPERSEDE_MIN_SIMILARITY,
    *,
    reason: str | None = None,
    automatic: bool = False,
) -> Superseded:
    """`supersede`, also naming the echoes it retired (memory.restatements).

    Three round trips, pipelined (inside a caller's pipeline, on its own): the row locks with the
    similarity guard, then the edge, the two updates and the echoes' lookup, then the echoes'
    retirement with the savepoint's release. It used to be eight, one per statement."""
    if new_id == old_id:
        raise CycleError("a fact cannot supersede itself")
    prepare = worth_preparing(conn)
    with _pipelined(conn), conn.transaction():
        locked = conn.execute(
            f"SELECT {FACT_COLUMNS} FROM beads.facts WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            ([new_id, old_id],),
        )
        similar = conn.execute(_SIMILARITY, (new_id, old_id, embedder_id, embedder_id))
        # lock in id order so two concurrent supersedes of overlapping facts cannot deadlock
        first = {r["id"]: Fact.from_row(r) for r in locked.fetchall()}
        if new_id not in first:
            raise FactNotFoundError(f"no fact {new_id}")
        if old_id not in first:
            raise FactNotFoundError(f"no fact {old_id}")
        new, old = first[new_id], first[old_id]
        if new.session_id != old.session_id:
            raise FactNotFoundError(f"no fact {old_id} in session {new.session_id!r}")
        if old.head_id == new.id:
            return Superseded(old)  # already done: a replay
        if new.head_id != new.id:
            raise CycleError(f"fact {new.short_id} is itself superseded; supersede with the current version")
        if old.head_id == old.id:
            target = old
            row = similar.fetchone()
            similarity = None if row is None else float(row["similarity"])
        else:
            target = _lock(conn, [old.head_id])[old.head_id]
            similarity = claim_similarity(conn, new.id, target.id, embedder_id)
        if target.status is Status.ARCHIVED:
            raise BeadsMemoryError(f"fact {target.short_id} is archived and cannot be superseded")
        if new.source in UNTRUSTED_SOURCES and target.kind is Kind.USER_INPUT:
            raise UntrustedWriteError(
                f"content from {new.source.value} cannot supersede the user's fact {target.short_id}"
            )
        if similarity is None:
            raise SupersedeRefusedError(
                f"cannot compare {new.short_id} and {target.short_id}: one has no vector in this embedding space"
            )
        if similarity < min_similarity:
            raise SupersedeRefusedError(
                f"refused: {new.short_id} ({new.body[:60]!r}) is not about the same thing as "
                f"{target.short_id} ({target.body[:60]!r}); cosine similarity {similarity:.3f} is below "
                f"{min_similarity:.2f}"
            )
        # an edge undone earlier comes back as it is written now
        conn.execute(
            """
            INSERT INTO beads.edges (src, relation, dst, session_id, automatic, reason)
            VALUES (%s, 'supersedes', %s, %s, %s, %s)
            ON CONFLICT (src, relation, dst) DO UPDATE
               SET undone_at = NULL, automatic = excluded.automatic, reason = excluded.reason,
                   created_at = now()
            """,
            (new.id, target.id, new.session_id, automatic, reason),
        )
        # (each statement names the session: see docs/scaling.md)
        conn.execute(
            "UPDATE beads.facts SET status = 'superseded', valid_to = greatest(valid_from, %s)"
            " WHERE id = %s AND session_id = %s",
            (new.valid_from, target.id, new.session_id),
        )
        # every version of the old chain (the target included) now resolves to the new head
        conn.execute(
            "UPDATE beads.facts SET head_id = %s WHERE head_id = %s AND session_id = %s",
            (new.id, target.id, new.session_id),
        )
        # the echoes are other current facts, which the statements above leave alone
        echoes = conn.execute(
            _ECHOES, {"target": target.id, "new": new.id, "session": new.session_id}, prepare=prepare
        )
        retired = []
        for echo in echoes.fetchall():
            if says_one_thing(echo["body"]):  # a long message that also restated the value says more
                retire_echo(
                    conn,
                    echo["id"],
                    new,
                    target,
                    f"restated {target.short_id}, which {new.short_id} replaced",
                )
                retired.append(echo["id"])
    # as the updates above left it (valid_to: greatest(valid_from, new's valid_from))
    old_fact = replace(
        target, status=Status.SUPERSEDED, valid_to=max(target.valid_from, new.valid_from), head_id=new.id
    )
    return Superseded(old_fact, tuple(retired))


def _pipelined(conn: psycopg.Connection[DictRow]) -> AbstractContextManager[Any]:
    """A pipeline, or nothing in the caller's: entering a nested one would wait for what it queued."""
    if conn.info.pipeline_status != pq.PipelineStatus.OFF:
        return nullcontext()
    return conn.pipeline()


# What a replaced claim takes with it (memory.restatements): every current fact that restates it, and
# what it restated itself when it is the user's second mention of a value (the first mention, and the
# other echoes of that one), each when it says one thing. Echoes are one hop from the claim or from
# what it restated, no further: a wrong link retires one fact, never a web of them.
_ECHOES = """
WITH said AS (
    SELECT %(target)s::uuid AS id
    UNION
    SELECT e.dst FROM beads.edges e JOIN beads.facts t ON t.id = e.src
     WHERE e.src = %(target)s AND e.relation = 'restates' AND t.kind = 'user_input'
),
-- what was said, and what restates it, by primary key: as one OR of the two in the WHERE below, the
-- planner read every fact of the session instead (8 ms a supersede at 10k facts)
echoes AS (
    SELECT id FROM said
    UNION
    SELECT e.src FROM beads.edges e WHERE e.relation = 'restates' AND e.dst IN (SELECT id FROM said)
)
SELECT f.id, f.body FROM echoes JOIN beads.facts f ON f.id = echoes.id
 WHERE f.session_id = %(session)s AND f.status = 'active' AND f.head_id = f.id
   AND f.id <> %(new)s AND f.id <> %(target)s
 ORDER BY f.id
"""


def retire_echo(
    conn: psycopg.Connection[DictRow], echo_id: uuid.UUID, head: Fact, restated: Fact, reason: str
) -> None:
    """Retire `echo_id`, a restatement of `restated`, under `head`, the claim that replaced it: no
    similarity guard (the restates edge is the link), an automatic edge that names `restated` as its
    cause (`cascade_of`), so that taking back `restated`'s replacement brings the echo back."""
    conn.execute(
        """
        INSERT INTO beads.edges (src, relation, dst, session_id, automatic, reason, cascade_of)
        VALUES (%s, 'supersedes', %s, %s, true, %s, %s)
        ON CONFLICT (src, relation, dst) DO UPDATE
           SET undone_at = NULL, automatic = true, reason = excluded.reason,
               cascade_of = excluded.cascade_of, created_at = now()
        """,
        (head.id, echo_id, head.session_id, reason, restated.id),
    )
    conn.execute(
        "UPDATE beads.facts SET status = 'superseded', valid_to = greatest(valid_from, %s)"
        " WHERE id = %s AND session_id = %s",
        (head.valid_from, echo_id, head.session_id),
    )
    conn.execute(
        "UPDATE beads.facts SET head_id = %s WHERE head_id = %s AND session_id = %s",
        (head.id, echo_id, head.session_id),
    )


def propose(
    conn: psycopg.Connection[DictRow], new_id: uuid.UUID, old_id: uuid.UUID, session_id: str, reason: str
) -> bool:
    """Record that `new_id` may replace `old_id` (a rule of memory.supersession.PROPOSING_RULES said so), for a person to
    settle; True when the proposal is new."""
    row = conn.execute(
        "INSERT INTO beads.edges (src, relation, dst, session_id, automatic, reason)"
        " VALUES (%s, 'may_supersede', %s, %s, true, %s) ON CONFLICT DO NOTHING RETURNING src",
        (new_id, old_id, session_id, reason),
    ).fetchone()
    return row is not None


def settle_proposal(
    conn: psycopg.Connection[DictRow],
    new_id: uuid.UUID,
    old_id: uuid.UUID,
    *,
    accept: bool,
    embedder_id: int,
    min_similarity: float,
) -> Fact | None:
    """Accept (the replacement is written, as a person's decision) or dismiss an open proposal;
    returns the retired fact when accepted."""
    with conn.transaction():
        proposal = conn.execute(
            "SELECT reason FROM beads.edges WHERE src = %s AND relation = 'may_supersede' AND dst = %s"
            " AND settled IS NULL FOR UPDATE",
            (new_id, old_id),
        ).fetchone()
        if proposal is None:
            raise FactNotFoundError("no open proposal between these facts")
        retired = None
        if accept:
            retired = supersede(
                conn, new_id, old_id, embedder_id, min_similarity, reason=f"accepted: {proposal['reason']}"
            )
        conn.execute(
            "UPDATE beads.edges SET settled = %s, settled_at = now()"
            " WHERE src = %s AND relation = 'may_supersede' AND dst = %s",
            ("accepted" if accept else "dismissed", new_id, old_id),
        )
    return retired


def undo_supersede(conn: psycopg.Connection[DictRow], new_id: uuid.UUID, old_id: uuid.UUID) -> Fact:
    """Take back `new_id` superseding `old_id`: the old fact is current again, with every version
    it had replaced; the edge is kept, marked undone, as history. Returns the restored fact."""
    with conn.transaction():
        found = _lock(conn, [new_id, old_id])
        if new_id not in found or old_id not in found:
            raise FactNotFoundError("both facts must exist")
        edge = conn.execute(
            "SELECT 1 FROM beads.edges WHERE src = %s AND relation = 'supersedes' AND dst = %s "
            "AND undone_at IS NULL FOR UPDATE",
            (new_id, old_id),
        ).fetchone()
        if edge is None:
            raise FactNotFoundError(f"{found[new_id].short_id} does not supersede {found[old_id].short_id}")
        _restore(conn, new_id, old_id)
        # the echoes its replacement retired come back with it
        for echo in conn.execute(
            "SELECT dst FROM beads.edges WHERE src = %s AND relation = 'supersedes' AND cascade_of = %s"
            " AND undone_at IS NULL",
            (new_id, old_id),
        ).fetchall():
            _restore(conn, new_id, echo["dst"])
    return get_fact(conn, old_id)


def _restore(conn: psycopg.Connection[DictRow], new_id: uuid.UUID, old_id: uuid.UUID) -> None:
    """Undo the edge `new_id` -> `old_id`: `old_id` is current again, with its own chain."""
    conn.execute(
        "UPDATE beads.edges SET undone_at = now() WHERE src = %s AND relation = 'supersedes' AND dst = %s",
        (new_id, old_id),
    )
    # the old fact's own chain: itself and what it had replaced, through edges still standing
    conn.execute(
        """
        WITH RECURSIVE chain(id) AS (
            SELECT %(old)s::uuid
            UNION
            SELECT e.dst FROM beads.edges e JOIN chain c ON e.src = c.id
             WHERE e.relation = 'supersedes' AND e.undone_at IS NULL
        )
        UPDATE beads.facts SET head_id = %(old)s WHERE id IN (SELECT id FROM chain)
        """,
        {"old": old_id},
    )
    conn.execute(
        "UPDATE beads.facts SET status = 'active', valid_to = NULL WHERE id = %s AND status = 'superseded'",
        (old_id,),
    )


def relate(conn: psycopg.Connection[DictRow], src: uuid.UUID, relation: Relation, dst: uuid.UUID) -> None:
    """Add a non-supersedes edge (supersedes has its own guarded path)."""
    if relation is Relation.SUPERSEDES:
        raise ValueError("use supersede() for supersedes edges: it is guarded")
    if src == dst:
        raise CycleError("a fact cannot relate to itself")
    with conn.transaction():
        found = _lock(conn, [src, dst])
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


def replacement_reasons(
    conn: psycopg.Connection[DictRow], heads: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[bool, str | None]]:
    """For each of `heads`, whether the edge by which it replaced its predecessor was written
    automatically by capture (memory.supersession), and the reason recorded with it."""
    if not heads:
        return {}
    rows = conn.execute(
        "SELECT src, automatic, reason FROM beads.edges "
        "WHERE src = ANY(%s) AND relation = 'supersedes' AND undone_at IS NULL",
        (list(heads),),
    ).fetchall()
    return {r["src"]: (bool(r["automatic"]), r["reason"]) for r in rows}


def archive(conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID], summary_id: uuid.UUID) -> None:
    """Compaction: archive `ids` behind `summary_id` (derived_from edges), all or nothing."""
    with conn.transaction():
        found = _lock(conn, [summary_id, *ids])
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
    "FACT_COLUMNS",
    "SUPERSEDE_MIN_SIMILARITY",
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
    "queue_facts",
    "relate",
    "relate_many",
    "replacement_reasons",
    "resolve_short_id",
    "supersede",
    "supersede_with_echoes",
    "undo_supersede",
]
