"""The earlier user claims nearest a new fact: one read that serves both of capture's checks.

Capture compares each new fact with earlier user claims twice. Automatic supersession
(memory.graph.supersession) wants the nearest current user claims of the fact's own namespace, by the same
speaker; restatements (memory.graph.restatements) want the nearest user claims of its lineage (the
namespace and its ancestors), current or not, that capture wrote. Both are the same nearest-neighbour
scan and the same filters but a few: one statement per fact answers both, and it is sent with the
capture's INSERTs, in their round trip (`now()` is the capture's own timestamp; the new facts it
must not find are left out when it is read, once the INSERTs have said which were new). In a root namespace the lineage is the namespace, so one
scan serves both; in a sub-agent's, the namespace is scanned on its own too, since its nearest claims
need not be among the lineage's nearest.

Both scans go through HNSW (exactly, for the few vectors the background indexer has not reached), and
the filters stay outside the nearest-neighbour subquery: inside it, the planner read them as
selective and sorted every vector of the namespace by distance instead (a second per capture at
100k facts, bench/search_latency.py). The statement is prepared where memory.postgres.prepared says so.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from memory.model import Namespace
from memory.postgres.vectors import as_vector
from memory.retrieval import set_hnsw_local
from memory.rules.corrections import SHORT_MESSAGE_CHARS

# the nearest claims each scan reads, before the filters below
SCANNED = 40
# what a row carries of the message its claim was cut from: enough for memory.graph.supersession.rule_of to
# tell a short message from a long one (a message of more than 1,000 characters is long), never the
# whole of a pasted document, which each row of each new claim would otherwise carry
MESSAGE_CHARS = SHORT_MESSAGE_CHARS + 1
EF_SEARCH = 40

# Each fact a scan returns, and each vector still waiting for the index, is looked up by primary key
# (a LATERAL read of at most one row): joined plainly, the planner hashed every fact of the table
# for the few dozen rows these scans return, a cost that grew with the session (2 ms of a 4 ms scan
# at 1,100 facts; a bulk import pays it for each of its claims).
_SCAN = """
    (SELECT {label}::text AS scan, v.fact_id AS id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims})) AS sim
       FROM beads.fact_vectors v
       JOIN beads.facts f ON f.id = v.fact_id
      WHERE v.embedder_id = {eid} AND v.indexed AND f.session_id = %(session)s
        AND f.namespace_id {where} {not_own}
      ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
      LIMIT {scanned})
    UNION ALL
    (SELECT {label}::text, v.fact_id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims}))
       FROM beads.fact_vectors v
       CROSS JOIN LATERAL (
             SELECT f.session_id, f.namespace_id, f.source_key FROM beads.facts f
              WHERE f.id = v.fact_id LIMIT 1) f
      WHERE v.embedder_id = {eid} AND NOT v.indexed AND f.session_id = %(session)s
        AND f.namespace_id {where} {not_own}
      ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
      LIMIT {scanned})"""

# What either check may use: earlier (by valid_from) user claims, not archived, close enough for the
# looser of the two floors; which check may use a row is decided per row (`correctable`: current, of
# the namespace itself, by the same speaker; `restatable`: written by capture), and each check takes
# its own nearest few in Python, after `read` has left out the facts this capture wrote. `message`:
# the whole message a claim was cut from (its passage, or itself), which names supersession's rule.
_NEAREST = """
SELECT nearest.scan, f.id, f.body, left(coalesce(p.body, f.body), {message_chars}) AS message, f.head_id,
       nearest.sim,
       f.namespace_id = %(ns)s AND f.status = 'active' AND f.head_id = f.id
         AND f.metadata->>'speaker' IS NOT DISTINCT FROM %(speaker)s AS correctable,
       f.source = 'passive_capture' AS restatable
  FROM ({scans}
  ) nearest
  CROSS JOIN LATERAL (SELECT * FROM beads.facts f WHERE f.id = nearest.id LIMIT 1) f
  LEFT JOIN beads.passages p ON p.id = f.passage_id
 WHERE nearest.sim >= %(min_sim)s AND f.kind = 'user_input' AND f.status <> 'archived'
   AND f.valid_from <= coalesce(%(at)s::timestamptz, now())
 ORDER BY nearest.sim DESC
"""

LINEAGE, NAMESPACE = "lineage", "namespace"


@dataclass(frozen=True, slots=True)
class EarlierClaim:
    id: uuid.UUID
    body: str
    # the message it was cut from (its passage, or itself), as much of it as supersession.rule_of
    # reads to tell a short message from a long one: never more than MESSAGE_CHARS characters
    message: str
    head_id: uuid.UUID
    sim: float


@dataclass(frozen=True, slots=True)
class Nearest:
    """One new fact's nearest earlier user claims, as each check reads them (nearest first)."""

    correctable: tuple[EarlierClaim, ...]  # for memory.graph.supersession: current, the namespace's own
    restatable: tuple[EarlierClaim, ...]  # for memory.graph.restatements: the lineage's, current or not

    def to_correct(self, min_similarity: float, limit: int) -> list[EarlierClaim]:
        return [c for c in self.correctable if c.sim >= min_similarity][:limit]

    def to_restate(self, min_similarity: float, limit: int) -> list[EarlierClaim]:
        return [c for c in self.restatable if c.sim >= min_similarity][:limit]


def statement(
    ns: Namespace, embedder_id: int, dims: int, *, correct: bool, restate: bool, own: bool = False
) -> sql.Composed:
    """The statement for a fact written into `ns`, that supersession (`correct`) or restatements
    (`restate`) will compare. In a root namespace one scan serves both; in a sub-agent's, each check
    scans its own, and only where it is wanted: a small namespace's scan walks the index far to find
    its nearest claims among everyone's (170 ms in a sub-agent's namespace at 100k facts)."""
    constants = {
        # a message's claims are keyed "<its key>:<offset>" (memory.graph.facts.claim_facts)
        "not_own": sql.SQL("AND left(f.source_key, length(%(own)s)) IS DISTINCT FROM %(own)s" if own else ""),
        "eid": sql.Literal(int(embedder_id)),
        "dims": sql.Literal(int(dims)),
        "scanned": sql.Literal(SCANNED),
    }
    root = len(ns.lineage) == 1
    scans = []
    if restate or root:
        scans.append(
            sql.SQL(_SCAN).format(
                label=sql.Literal(LINEAGE), where=sql.SQL("= ANY(%(lineage)s::uuid[])"), **constants
            )
        )
    if correct and not root:
        scans.append(
            sql.SQL(_SCAN).format(label=sql.Literal(NAMESPACE), where=sql.SQL("= %(ns)s"), **constants)
        )
    return sql.SQL(_NEAREST).format(
        scans=sql.SQL("\n    UNION ALL").join(scans), message_chars=sql.Literal(MESSAGE_CHARS)
    )


@dataclass(frozen=True, slots=True)
class Query:
    """What one new fact is compared by."""

    fact_id: uuid.UUID
    vector: Sequence[float]
    speaker: str | None
    correct: bool  # for supersession
    restate: bool  # for restatements


def send(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    queries: Sequence[Query],
    *,
    valid_from: datetime | None,
    min_similarity: float,
    embedder_id: int,
    dims: int,
    own_key: str | None = None,
    prepare: bool = False,
) -> dict[uuid.UUID, psycopg.Cursor[DictRow]]:
    """Send each query's statement in the caller's transaction (and pipeline, where it has one; the
    HNSW settings are set for the transaction); read the answers with `read`. `valid_from`: the new
    facts' (None: the transaction's time, as their INSERT wrote it). `prepare`: memory.postgres.prepared's
    verdict, asked before the caller's pipeline opened. `own_key`: the source key of the message
    being captured, whose claims no scan returns (a message never corrects or restates itself; and
    each claim of a long message, its siblings still waiting for the index, would find all the
    others: quadratic in its length)."""
    queries = [q for q in queries if q.correct or q.restate]
    if not queries:
        return {}
    # the HNSW scan must keep walking until enough rows pass the session/namespace filter
    set_hnsw_local(conn, EF_SEARCH)
    return {
        q.fact_id: conn.execute(
            statement(ns, embedder_id, dims, correct=q.correct, restate=q.restate, own=own_key is not None),
            {
                "q": as_vector(q.vector),
                "session": ns.session_id,
                "ns": ns.id,
                "lineage": list(ns.lineage),
                "speaker": q.speaker,
                "at": valid_from,
                "min_sim": min_similarity,
                "own": None if own_key is None else f"{own_key}:",
            },
            prepare=prepare,
        )
        for q in queries
    }


def read(ns: Namespace, cursor: psycopg.Cursor[DictRow], written: Collection[uuid.UUID]) -> Nearest:
    """One fact's answer, split by check: in a root namespace the one scan serves both. `written`:
    the facts this capture wrote (not those a replay found already stored), which neither check may
    compare with."""
    correctable: list[EarlierClaim] = []
    restatable: list[EarlierClaim] = []
    own_scan = NAMESPACE if len(ns.lineage) > 1 else LINEAGE
    for row in cursor.fetchall():
        if row["id"] in written:
            continue
        claim = _claim(row)
        if row["scan"] == own_scan and row["correctable"]:
            correctable.append(claim)
        if row["scan"] == LINEAGE and row["restatable"]:
            restatable.append(claim)
    return Nearest(tuple(correctable), tuple(restatable))


def _claim(row: dict[str, Any]) -> EarlierClaim:
    return EarlierClaim(
        id=row["id"], body=row["body"], message=row["message"], head_id=row["head_id"], sim=float(row["sim"])
    )
