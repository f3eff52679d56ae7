"""Echoes at capture: a fact that says again what a user's claim said is linked to it, not counted twice.

A small model reading a block follows the majority. When a sub-agent's summary, the agent's
conclusion, a remembered note, the user's own second mention or a question of the user's repeats a
value ("the launch deadline is March 14"), each would be one more line saying the old value once the
user corrects it. So each new fact that restates an earlier user claim (`corrections.restates`: the
same words, or the claim's value in the claim's slot) gets a `restates` edge to it, in the capture's
own transaction. When the claim is replaced, its restatements that say nothing else are retired with
it, the edge naming why (memory.facts.supersede); one that arrives after the claim was replaced is
retired at once. A long message that restates a value among other things keeps its line: the edge
records the echo, retiring it would lose the rest.

Candidates are the nearest user claims of the namespace and its ancestors (a sub-agent restates what
its supervisor was told), said no later than the new fact, current or not. Only the user's own claims
are restated; what a tool or web page says, the task a sub-agent was given, and failure notices take
no part.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from memory import corrections
from memory import facts as fact_sql
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Namespace, Source
from memory.retrieval import set_hnsw_local
from memory.vectors import as_vector

# earlier user claims compared with each new fact, nearest first, of the SCANNED nearest claims
CANDIDATES = 8
SCANNED = 40
# what never restates: untrusted text, the agent's plumbing, compactions (already a rollup)
_NOT_ECHOES = UNTRUSTED_SOURCES | {Source.DELEGATION, Source.FALLBACK_CONCLUDE, Source.COMPACTION}

# The nearest earlier user claims of the namespace's lineage, through HNSW and, for vectors the
# background indexer has not reached, exactly (the two branches of memory.supersession's query).
_CLAIMS = """
SELECT f.id, f.body, f.kind, f.status, f.head_id FROM (
    (SELECT v.fact_id AS id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims})) AS sim
       FROM beads.fact_vectors v
       JOIN beads.facts f ON f.id = v.fact_id
      WHERE v.embedder_id = {eid} AND v.indexed AND f.session_id = %(session)s
        AND f.namespace_id = ANY(%(lineage)s::uuid[])
      ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
      LIMIT %(scan)s)
    UNION ALL
    (SELECT v.fact_id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims}))
       FROM beads.fact_vectors v
       JOIN beads.facts f ON f.id = v.fact_id
      WHERE v.embedder_id = {eid} AND NOT v.indexed AND f.session_id = %(session)s
        AND f.namespace_id = ANY(%(lineage)s::uuid[]))
) nearest
JOIN beads.facts f ON f.id = nearest.id
WHERE sim >= %(min_sim)s AND f.kind = 'user_input' AND f.source = 'passive_capture'
  AND f.status <> 'archived' AND f.valid_from <= %(at)s AND NOT (f.id = ANY(%(exclude)s::uuid[]))
ORDER BY sim DESC
LIMIT %(n)s
"""


def may_restate(fact: Fact) -> bool:
    """Worth comparing with earlier user claims: trusted text that names a value."""
    return fact.source not in _NOT_ECHOES and bool(corrections.values(fact.body))


def link(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    new_facts: Sequence[Fact],
    claim_vectors: Mapping[uuid.UUID, Sequence[float]],
    embedder_id: int,
    dims: int,
    min_similarity: float,
) -> int:
    """Link each of `new_facts` (just written into `ns`, in the caller's transaction, after automatic
    supersession) to the earlier user claims it restates; retire at once an echo, not the user's own
    claim, of a claim already replaced. Returns how many edges were written."""
    current = {f.id: f for f in fact_sql.get_facts(conn, [f.id for f in new_facts])}
    worth = [
        f
        for f in new_facts
        if f.id in claim_vectors and f.id in current and current[f.id].head_id == f.id and may_restate(f)
    ]
    if not worth:
        return 0
    statement = sql.SQL(_CLAIMS).format(eid=sql.Literal(int(embedder_id)), dims=sql.Literal(int(dims)))
    written = [f.id for f in new_facts]
    with conn.pipeline():
        set_hnsw_local(conn, 40)
        cursors = [
            conn.execute(
                statement,
                {
                    "q": as_vector(claim_vectors[fact.id]),
                    "session": ns.session_id,
                    "lineage": list(ns.lineage),
                    "at": fact.valid_from,
                    "exclude": written,
                    "n": CANDIDATES,
                    "scan": SCANNED,
                    "min_sim": min_similarity,
                },
            )
            for fact in worth
        ]
    edges = 0
    for fact, cursor in zip(worth, cursors, strict=True):
        restated = [row for row in cursor.fetchall() if corrections.restates(row["body"], fact.body)]
        for row in restated:
            conn.execute(
                "INSERT INTO beads.edges (src, relation, dst, session_id) VALUES (%s, 'restates', %s, %s)"
                " ON CONFLICT DO NOTHING",
                (fact.id, row["id"], ns.session_id),
            )
            edges += 1
        replaced = next((row for row in restated if row["head_id"] != row["id"]), None)
        # the user saying an old value again may mean it again: only the agent's echoes and the
        # user's questions follow a replaced claim at once
        if (
            replaced is not None
            and fact.kind is not Kind.USER_INPUT
            and corrections.says_one_thing(fact.body)
        ):
            head, old = (
                fact_sql.get_facts(conn, [replaced["head_id"]]),
                fact_sql.get_fact(conn, replaced["id"]),
            )
            if head and head[0].status.value == "active":
                fact_sql.retire_echo(
                    conn, fact.id, head[0], old, f"restates {old.short_id}, which {head[0].short_id} replaced"
                )
    return edges
