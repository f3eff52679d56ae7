"""Echoes at capture: a fact that says again what a user's claim said is linked to it, not counted twice.

A small model reading a block follows the majority. When a sub-agent's summary, the agent's
conclusion, a remembered note, the user's own second mention or a question of the user's repeats a
value ("the launch deadline is March 14"), each would be one more line saying the old value once the
user corrects it. So each new fact that restates an earlier user claim (`corrections.restates`: the
same words, or the claim's value in the claim's slot) gets a `restates` edge to it, in the capture's
own transaction. When the claim is replaced, its restatements that say nothing else are retired with
it, the edge naming why (memory.graph.revisions.supersede); one that arrives after the claim was replaced is
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
from psycopg.rows import DictRow

from memory.graph import earlier_claims, revisions
from memory.graph import facts as fact_sql
from memory.graph.facts import NewFact
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Namespace, Source
from memory.rules import corrections

# earlier user claims compared with each new fact, nearest first, of the lineage's nearest claims
# (memory.graph.earlier_claims scans earlier_claims.SCANNED)
CANDIDATES = 8
# what never restates: untrusted text, the agent's plumbing, compactions (already a rollup)
_NOT_ECHOES = UNTRUSTED_SOURCES | {Source.DELEGATION, Source.FALLBACK_CONCLUDE, Source.COMPACTION}


def may_restate(fact: Fact | NewFact) -> bool:
    """Worth comparing with earlier user claims: trusted text that names a value."""
    return fact.source not in _NOT_ECHOES and corrections.names_a_value(fact.body)


def link(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    new_facts: Sequence[Fact],
    nearest: Mapping[uuid.UUID, earlier_claims.Nearest],
    min_similarity: float,
    new_heads: Mapping[uuid.UUID, uuid.UUID] | None = None,
) -> int:
    """Link each of `new_facts` (just written into `ns`, in the caller's transaction, after automatic
    supersession) to the earlier user claims it restates; retire at once an echo, not the user's own
    claim, of a claim already replaced. `nearest`: each new fact's nearest earlier claims, read with
    the facts' INSERTs (memory.graph.earlier_claims), so before this capture's own supersessions, whose
    `new_heads` (a replaced claim, or an echo retired with it -> its new head) say what they changed.
    Returns how many edges were written."""
    new_heads = new_heads or {}
    edges = 0
    for fact in new_facts:
        # a new fact this capture's supersessions replaced (through an echo of what it had replaced
        # itself) is no longer a head, and restates nothing
        if fact.id not in nearest or fact.id in new_heads or not may_restate(fact):
            continue
        restated = [
            row
            for row in nearest[fact.id].to_restate(min_similarity, CANDIDATES)
            if corrections.restates(row.body, fact.body, by_user=fact.kind is Kind.USER_INPUT)
        ]
        for row in restated:
            # sent, not waited for: in a capture's pipeline it travels with what follows
            conn.execute(
                "INSERT INTO beads.edges (src, relation, dst, session_id) VALUES (%s, 'restates', %s, %s)"
                " ON CONFLICT DO NOTHING",
                (fact.id, row.id, ns.session_id),
            )
            edges += 1
        replaced = next((row for row in restated if new_heads.get(row.head_id, row.head_id) != row.id), None)
        # the user saying an old value again may mean it again: only the agent's echoes and the
        # user's questions follow a replaced claim at once
        if (
            replaced is not None
            and fact.kind is not Kind.USER_INPUT
            and corrections.says_one_thing(fact.body)
        ):
            head_id = new_heads.get(replaced.head_id, replaced.head_id)
            head, old = fact_sql.get_facts(conn, [head_id]), fact_sql.get_fact(conn, replaced.id)
            if head and head[0].status.value == "active":
                revisions.retire_echo(
                    conn, fact.id, head[0], old, f"restates {old.short_id}, which {head[0].short_id} replaced"
                )
    return edges
