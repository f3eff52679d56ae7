"""Read API for audit and time travel: what a namespace holds, what was true when, how a claim changed."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from memory.model import Fact, fact_columns
from memory.postgres.vectors import as_vector

_F = fact_columns("f")


def facts_in_namespace(conn: psycopg.Connection[DictRow], ns_id: uuid.UUID) -> list[Fact]:
    """Everything stored in one namespace, retired facts included, oldest first (the audit view)."""
    rows = conn.execute(
        f"SELECT {_F} FROM beads.facts f WHERE f.namespace_id = %s ORDER BY f.recorded_at, f.id", (ns_id,)
    ).fetchall()
    return [Fact.from_row(r) for r in rows]


def rollup_from(conn: psycopg.Connection[DictRow], child: uuid.UUID, parent: uuid.UUID) -> Fact | None:
    """The summary a forked namespace wrote into its parent (conclude_task or the fallback), if any."""
    row = conn.execute(
        f"""
        SELECT {_F} FROM beads.facts f
         WHERE f.namespace_id = %s AND f.source IN ('conclude_task', 'fallback_conclude')
           AND f.metadata->>'from_namespace' = %s
         ORDER BY f.recorded_at LIMIT 1
        """,
        (parent, str(child)),
    ).fetchone()
    return None if row is None else Fact.from_row(row)


def subtree_facts(
    conn: psycopg.Connection[DictRow],
    ns_id: uuid.UUID,
    agent_id: str | None = None,
    include_retired: bool = False,
) -> list[Fact]:
    """Active facts in the namespaces below `ns_id` (not its own), optionally of one sub-agent."""
    rows = conn.execute(
        f"""
        SELECT {_F} FROM beads.facts f
          JOIN beads.namespaces n ON n.id = f.namespace_id
         WHERE n.lineage @> ARRAY[%(ns)s]::uuid[] AND n.id <> %(ns)s
           AND (%(agent)s::text IS NULL OR f.agent_id = %(agent)s)
           AND (%(all)s OR f.status = 'active')
         ORDER BY f.recorded_at, f.id
        """,
        {"ns": ns_id, "agent": agent_id, "all": include_retired},
    ).fetchall()
    return [Fact.from_row(r) for r in rows]


def session_facts(conn: psycopg.Connection[DictRow], session_id: str) -> list[Fact]:
    rows = conn.execute(
        f"SELECT {_F} FROM beads.facts f WHERE f.session_id = %s ORDER BY f.recorded_at, f.id", (session_id,)
    ).fetchall()
    return [Fact.from_row(r) for r in rows]


def facts_as_of(
    conn: psycopg.Connection[DictRow], session_id: str, at: datetime, include_directives: bool = False
) -> list[Fact]:
    """The facts that were true at `at`, as the system knew them then.

    "What is true now" is the same query with `at = now()`: valid at that time, and already learned.
    """
    rows = conn.execute(
        f"""
        SELECT {_F} FROM beads.facts f
         WHERE f.session_id = %(session)s
           AND f.valid_from <= %(at)s AND (f.valid_to IS NULL OR f.valid_to > %(at)s)
           AND f.recorded_at <= %(at)s
           AND (%(directives)s OR f.kind <> 'directive')
         ORDER BY f.valid_from, f.id
        """,
        {"session": session_id, "at": at, "directives": include_directives},
    ).fetchall()
    return [Fact.from_row(r) for r in rows]


def supersede_history(conn: psycopg.Connection[DictRow], fid: uuid.UUID) -> list[Fact]:
    """Every version of the claim `fid` belongs to, oldest first; the last one is current."""
    rows = conn.execute(
        f"""
        SELECT {_F} FROM beads.facts f
         WHERE f.head_id = (SELECT head_id FROM beads.facts WHERE id = %s)
         ORDER BY f.valid_from, f.recorded_at, f.id
        """,
        (fid,),
    ).fetchall()
    facts = [Fact.from_row(r) for r in rows]
    # the head last, whatever the clocks said
    return sorted(facts, key=lambda f: f.id == f.head_id)


# A page of a session's facts, newest first, with each fact's claim pinned or not (a pin on any
# version of the chain pins it: reads resolve pins through head_id). Keyset paging on (recorded_at,
# id): a write between two pages neither repeats nor skips a fact, as an offset would. Each filter is
# skipped when its parameter is NULL, so one statement serves every combination.
_PAGE = f"""
SELECT {_F},
       EXISTS (SELECT 1 FROM beads.pins p JOIN beads.facts pf ON pf.id = p.fact_id
                WHERE p.session_id = f.session_id AND pf.head_id = f.head_id) AS pinned
  FROM beads.facts f
 WHERE f.session_id = %(session)s
   AND (%(kind)s::text IS NULL OR f.kind = %(kind)s)
   AND (%(source)s::text IS NULL OR f.source = %(source)s)
   AND (%(status)s::text IS NULL OR f.status = %(status)s)
   AND (%(after_at)s::timestamptz IS NULL OR (f.recorded_at, f.id) < (%(after_at)s, %(after_id)s::uuid))
   AND (%(pinned)s::boolean IS NULL OR %(pinned)s = EXISTS (
            SELECT 1 FROM beads.pins p JOIN beads.facts pf ON pf.id = p.fact_id
             WHERE p.session_id = f.session_id AND pf.head_id = f.head_id))
 ORDER BY f.recorded_at DESC, f.id DESC
 LIMIT %(limit)s
"""


def fact_page(
    conn: psycopg.Connection[DictRow],
    session_id: str,
    *,
    kind: str | None,
    source: str | None,
    status: str | None,
    pinned: bool | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[tuple[Fact, bool]]:
    """Up to `limit` facts of the session newer-first, after the (recorded_at, id) `after`; each with
    whether its claim is pinned."""
    rows = conn.execute(
        _PAGE,
        {
            "session": session_id,
            "kind": kind,
            "source": source,
            "status": status,
            "pinned": pinned,
            "after_at": None if after is None else after[0],
            "after_id": None if after is None else after[1],
            "limit": limit,
        },
    ).fetchall()
    return [(Fact.from_row(r), bool(r["pinned"])) for r in rows]


def passage_texts(conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The text of each passage (the message claims were cut from) among `ids` that still exists."""
    if not ids:
        return {}
    rows = conn.execute("SELECT id, body FROM beads.passages WHERE id = ANY(%s)", (list(ids),)).fetchall()
    return {r["id"]: r["body"] for r in rows}


def standing_passage_texts(
    conn: psycopg.Connection[DictRow], ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, str]:
    """`passage_texts` less every passage a replaced (superseded) claim was cut from: what a line may
    show of a message beyond its own claim, whole or around it, without the replaced words coming back
    as current."""
    if not ids:
        return {}
    rows = conn.execute(
        """
        SELECT p.id, p.body FROM beads.passages p
         WHERE p.id = ANY(%s)
           AND NOT EXISTS (SELECT 1 FROM beads.facts f WHERE f.passage_id = p.id AND f.status = 'superseded')
        """,
        (list(ids),),
    ).fetchall()
    return {r["id"]: r["body"] for r in rows}


def session_stats(conn: psycopg.Connection[DictRow], session_id: str) -> list[dict[str, object]]:
    """Counts by kind, source and status: what a session stored, at a glance."""
    return conn.execute(
        """
        SELECT kind, source, status, count(*) AS facts FROM beads.facts WHERE session_id = %s
         GROUP BY kind, source, status ORDER BY kind, source, status
        """,
        (session_id,),
    ).fetchall()


def edge_counts(conn: psycopg.Connection[DictRow], session_id: str) -> dict[str, int]:
    """The session's edges by relation; undone supersedes edges (kept as history) count apart, as
    "supersedes (undone)"."""
    rows = conn.execute(
        """
        SELECT relation || CASE WHEN undone_at IS NULL THEN '' ELSE ' (undone)' END AS relation,
               count(*) AS edges
          FROM beads.edges WHERE session_id = %s
         GROUP BY 1 ORDER BY 1
        """,
        (session_id,),
    ).fetchall()
    return {r["relation"]: int(r["edges"]) for r in rows}


def session_ids(conn: psycopg.Connection[DictRow]) -> list[str]:
    """Every session that has a namespace (anything stored, or a root opened), in order."""
    rows = conn.execute("SELECT DISTINCT session_id FROM beads.namespaces ORDER BY session_id").fetchall()
    return [r["session_id"] for r in rows]


def supersede_chains(facts: Sequence[Fact]) -> list[list[Fact]]:
    """Every claim with more than one version, oldest version first and the current one last."""
    chains: dict[uuid.UUID, list[Fact]] = defaultdict(list)
    for fact in facts:
        chains[fact.head_id].append(fact)
    ordered = [
        sorted(versions, key=lambda f: (f.id == f.head_id, f.valid_from, f.recorded_at, f.id.hex))
        for versions in chains.values()
        if len(versions) > 1
    ]
    return sorted(ordered, key=lambda chain: chain[-1].valid_from)


def nearest_of(
    conn: psycopg.Connection[DictRow],
    ids: Sequence[uuid.UUID],
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    n: int,
) -> list[uuid.UUID]:
    """Of the facts `ids`, the `n` whose stored claim vectors are nearest `query_vector`, nearest first
    (a fact with no vector under this embedder last): a few known facts ranked without embedding
    their texts again."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT i.id FROM unnest(%(ids)s::uuid[]) AS i(id)
              LEFT JOIN beads.fact_vectors v ON v.fact_id = i.id AND v.embedder_id = %(eid)s
             ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims}) NULLS LAST, i.id
             LIMIT %(n)s
            """
        ).format(dims=sql.Literal(dims)),
        {"ids": list(ids), "eid": embedder_id, "q": as_vector(query_vector), "n": n},
    ).fetchall()
    return [r["id"] for r in rows]
