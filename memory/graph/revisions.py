"""A claim's revisions on the write path: supersede (guarded), the echoes a replaced claim takes with
it, proposals a person settles, and undo.

Every function takes a psycopg connection in autocommit mode and opens its own transaction where
several statements must land together. The rules that decide when capture supersedes on its own are
memory.graph.supersession's; this module writes what they, an agent or a person decided.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import DictRow

from memory.errors import (
    BeadsMemoryError,
    CycleError,
    FactNotFoundError,
    SupersedeRefusedError,
    UntrustedWriteError,
)
from memory.graph.facts import get_fact, lock_facts
from memory.model import FACT_COLUMNS, UNTRUSTED_SOURCES, Deleted, Fact, Kind, Status, fact_columns
from memory.postgres.prepared import worth_preparing
from memory.rules.corrections import says_one_thing

# Below this cosine similarity two facts are not "the same claim, revised": the guard that stopped
# "The investigation into Weaviate has been completed." from retiring a user's constraints.
SUPERSEDE_MIN_SIMILARITY = 0.55


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
    marks an edge capture wrote by itself (memory.graph.supersession), with the rule's `reason`.
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
    """`supersede`, also naming the echoes it retired (memory.graph.restatements).

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
            target = lock_facts(conn, [old.head_id])[old.head_id]
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
        # (each statement names the session: see docs/internals/scaling.md)
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


# What a replaced claim takes with it (memory.graph.restatements): every current fact that restates it, and
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
    conn: psycopg.Connection[DictRow],
    session_id: str,
    pairs: Sequence[tuple[uuid.UUID, uuid.UUID, str]],
) -> dict[tuple[uuid.UUID, uuid.UUID], Fact]:
    """Record that each `(new_id, old_id, reason)` of `pairs` may be a replacement (a rule of
    memory.graph.supersession.PROPOSING_RULES said so), for a person to settle. Returns the proposals
    that are new, each with the fact it would replace. One statement, however many pairs: capture
    proposes a few a message between long ones, and each used to cost two round trips."""
    if not pairs:
        return {}
    rows = conn.execute(
        f"""
        WITH new AS (
            INSERT INTO beads.edges (src, relation, dst, session_id, automatic, reason)
            SELECT p.src, 'may_supersede', p.dst, %s, true, p.reason
              FROM unnest(%s::uuid[], %s::uuid[], %s::text[]) AS p(src, dst, reason)
            ON CONFLICT DO NOTHING
            RETURNING src, dst)
        SELECT new.src AS proposed_by, {fact_columns("f")}
          FROM new JOIN beads.facts f ON f.id = new.dst
        """,
        (session_id, [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]),
    ).fetchall()
    return {(r["proposed_by"], r["id"]): Fact.from_row(r) for r in rows}


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
        found = lock_facts(conn, [new_id, old_id])
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


def delete_fact(conn: psycopg.Connection[DictRow], fid: uuid.UUID) -> Deleted:
    """Delete one fact for good: its row, its edges, its vectors, its retrievals, and its passage when
    no other fact was cut from it.

    The claim it belonged to stays whole. A current version that had replaced others is taken back
    as `undo_supersede` takes back a replacement: the version it replaced is current again (with the
    echoes that replacement retired), and a pin on the deleted version moves to it. A version in the
    middle of a chain is bridged: its successor now supersedes what it had replaced."""
    with conn.transaction():
        found = lock_facts(conn, [fid])
        if fid not in found:
            raise FactNotFoundError(f"no fact {fid}")
        fact = found[fid]
        replaced = conn.execute(
            "SELECT dst, cascade_of FROM beads.edges"
            " WHERE src = %s AND relation = 'supersedes' AND undone_at IS NULL ORDER BY created_at, dst",
            (fid,),
        ).fetchall()
        restored: list[uuid.UUID] = []
        if fact.head_id == fact.id:
            for edge in replaced:
                _restore(conn, fid, edge["dst"])
                restored.append(edge["dst"])
            # the version it replaced directly (an echo it retired is another claim)
            direct = [e["dst"] for e in replaced if e["cascade_of"] is None]
            current_id = direct[0] if direct else None
        else:
            successor = conn.execute(
                "SELECT src FROM beads.edges WHERE dst = %s AND relation = 'supersedes' AND undone_at IS NULL",
                (fid,),
            ).fetchone()
            for edge in replaced:
                if successor is None:
                    break
                # a fact has one live successor: this one's edge goes before its successor's comes
                conn.execute(
                    "DELETE FROM beads.edges WHERE src = %s AND relation = 'supersedes' AND dst = %s",
                    (fid, edge["dst"]),
                )
                conn.execute(
                    """
                    INSERT INTO beads.edges (src, relation, dst, session_id, automatic, reason, cascade_of)
                    VALUES (%s, 'supersedes', %s, %s, true, %s, %s)
                    ON CONFLICT (src, relation, dst) DO UPDATE SET undone_at = NULL
                    """,
                    (
                        successor["src"],
                        edge["dst"],
                        fact.session_id,
                        f"{fact.short_id}, between them, was deleted",
                        edge["cascade_of"],
                    ),
                )
            current_id = fact.head_id
        if current_id is not None:
            # the claim stays pinned when the version that carried its pin goes
            conn.execute(
                "INSERT INTO beads.pins (fact_id, session_id, pinned_by, pinned_at)"
                " SELECT %s, session_id, pinned_by, pinned_at FROM beads.pins WHERE fact_id = %s"
                " ON CONFLICT (fact_id) DO NOTHING",
                (current_id, fid),
            )
        # an echo this fact's replacement retired stays retired; only its link to this fact goes
        # (the foreign key would otherwise delete the edge that retired it)
        conn.execute("UPDATE beads.edges SET cascade_of = NULL WHERE cascade_of = %s", (fid,))
        # edges, vectors, pins and retrievals go with the row (ON DELETE CASCADE)
        conn.execute("DELETE FROM beads.facts WHERE id = %s AND session_id = %s", (fid, fact.session_id))
        if fact.passage_id is not None:
            conn.execute(
                "DELETE FROM beads.passages p WHERE p.id = %s"
                " AND NOT EXISTS (SELECT 1 FROM beads.facts f WHERE f.passage_id = p.id)",
                (fact.passage_id,),
            )
        current = None if current_id is None else get_fact(conn, current_id)
        back = tuple(get_fact(conn, i) for i in restored)
    return Deleted(fact, current, back)


__all__ = [
    "SUPERSEDE_MIN_SIMILARITY",
    "Superseded",
    "claim_similarity",
    "delete_fact",
    "propose",
    "retire_echo",
    "settle_proposal",
    "supersede",
    "supersede_with_echoes",
    "undo_supersede",
]
