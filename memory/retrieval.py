"""Ranked retrieval: what a namespace may read, resolved to current versions, scored, capped.

The pipeline, in order (every step traces to a failure the seed system measured):
  candidates  nearest claims and nearest passages, each from its own HNSW index, within the session
  skip        archived and directive hits (a question resembles the query it should not answer)
  resolve     each hit to the head of its supersedes chain: matching a stale value returns the current one
  filter      head in scope (self, ancestors, or demoted descendants), not archived, not a directive,
              not already visible in the raw message window
  score       w * cos(claim, q) + (1 - w) * cos(passage, q), best hit per head, minus a penalty
              for facts of descendant namespaces
  select      by score, md5(body) breaking near-ties; drop a fact whose derived_from parent is already
              selected; at most `per_agent_cap` facts per sub-agent; stop at k
  floor       below the relevance floor the answer is "not in memory", not the nearest noise
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from memory.facts import FACT_COLUMNS
from memory.model import Fact, Hit, Kind, Namespace, SearchResult, Status
from memory.vectors import as_vector


@dataclass(frozen=True, slots=True)
class SearchOptions:
    k: int = 8
    claim_weight: float = 0.7  # the rest goes to the passage the claim was carved from
    descendant_penalty: float = 0.15
    relevance_floor: float = 0.2  # blended cosine similarity; below it nothing is "in memory"
    per_agent_cap: int = 3  # facts per sub-agent among the demoted (delegated) ones
    candidates: int = 48  # nearest claims and nearest passages fetched before filtering
    include_directives: bool = False
    exclude_message_ids: frozenset[str] = field(default_factory=frozenset)
    exclude_fact_ids: frozenset[uuid.UUID] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("k must be at least 1")
        if not 0.0 <= self.claim_weight <= 1.0:
            raise ValueError("claim_weight must be between 0 and 1")
        if self.per_agent_cap < 1:
            raise ValueError("per_agent_cap must be at least 1")


# the current version's columns carry a prefix: the hit's own `head_id` column would clash with `head.id`
_HEAD_COLUMNS = ", ".join(f"head.{c.strip()} AS cur_{c.strip()}" for c in FACT_COLUMNS.split(","))
_HIT_COLUMNS = ", ".join(f"hit.{c.strip()}" for c in FACT_COLUMNS.split(","))

# {dims} and {eid} are integers we own, placed as literals so the planner matches the partial
# expression index of this embedding space.
_CANDIDATES = """
WITH scope AS (
    -- what this namespace may read: its lineage (self and ancestors) and its subtree (demoted)
    SELECT id, NOT (id = ANY(%(lineage)s::uuid[])) AS demoted
      FROM beads.namespaces
     WHERE session_id = %(session)s
       AND (id = ANY(%(lineage)s::uuid[]) OR lineage @> ARRAY[%(ns)s]::uuid[])
),
claim_hits AS (
    SELECT v.fact_id AS id
      FROM beads.fact_vectors v
      JOIN beads.facts f ON f.id = v.fact_id
     WHERE v.embedder_id = {eid} AND f.session_id = %(session)s
       AND f.namespace_id IN (SELECT id FROM scope)
     ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
     LIMIT %(n)s
),
passage_hits AS (
    SELECT v.passage_id
      FROM beads.passage_vectors v
      JOIN beads.passages p ON p.id = v.passage_id
     WHERE v.embedder_id = {eid} AND p.session_id = %(session)s
     ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
     LIMIT %(n)s
),
hit_ids AS (
    SELECT id FROM claim_hits
    UNION
    SELECT f.id FROM beads.facts f JOIN passage_hits ph ON ph.passage_id = f.passage_id
)
SELECT {hit_columns}, {head_columns},
       hs.id IS NOT NULL AS head_in_scope,
       coalesce(hs.demoted, false) AS head_demoted,
       1 - (hv.embedding <=> %(q)s::vector) AS claim_sim,
       1 - (hpv.embedding <=> %(q)s::vector) AS passage_sim,
       head_has_vector.present AS head_has_vector,
       coalesce((SELECT array_agg(e.dst) FROM beads.edges e
                  WHERE e.src = head.id AND e.relation = 'derived_from'), '{{}}') AS head_derived_from
  FROM hit_ids
  JOIN beads.facts hit ON hit.id = hit_ids.id
  JOIN beads.facts head ON head.id = hit.head_id
  LEFT JOIN scope hs ON hs.id = head.namespace_id
  JOIN beads.fact_vectors hv ON hv.fact_id = hit.id AND hv.embedder_id = {eid}
  LEFT JOIN beads.passage_vectors hpv ON hpv.passage_id = hit.passage_id AND hpv.embedder_id = {eid}
  CROSS JOIN LATERAL (
      SELECT EXISTS (SELECT 1 FROM beads.fact_vectors x
                      WHERE x.fact_id = head.id AND x.embedder_id = {eid}) AS present
  ) head_has_vector
"""


def _head(row: dict[str, Any]) -> Fact:
    return Fact.from_row({k[4:]: v for k, v in row.items() if k.startswith("cur_")})


def _tiebreak(body: str) -> str:
    return hashlib.md5(body.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def search(
    conn: psycopg.Connection,
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions = SearchOptions(),  # frozen, so a shared default is safe
) -> SearchResult:
    statement = sql.SQL(_CANDIDATES).format(
        eid=sql.Literal(int(embedder_id)),
        dims=sql.Literal(int(dims)),
        hit_columns=sql.SQL(_HIT_COLUMNS),
        head_columns=sql.SQL(_HEAD_COLUMNS),
    )
    params = {
        "session": ns.session_id,
        "lineage": list(ns.lineage),
        "ns": ns.id,
        "q": as_vector(query_vector),
        "n": max(options.candidates, options.k * 4),
    }
    with conn.transaction():
        # the HNSW scan keeps walking until enough rows pass the session/scope filter (pgvector 0.8)
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(40, params["n"]))))
        rows = conn.execute(statement, params).fetchall()
    return rank(rows, query, options)


def rank(rows: Sequence[dict[str, Any]], query: str, options: SearchOptions) -> SearchResult:
    """Turn candidate rows into the ranked result (pure: no database)."""
    w = options.claim_weight
    best: dict[uuid.UUID, dict[str, Any]] = {}
    dropped: dict[uuid.UUID, str] = {}
    for row in rows:
        hit = Fact.from_row(row)
        if hit.status is Status.ARCHIVED:
            dropped[hit.id] = "archived"
            continue
        if hit.kind is Kind.DIRECTIVE and not options.include_directives:
            dropped[hit.id] = "directive"
            continue
        head = hit if hit.head_id == hit.id else _head(row)
        reason = None
        if not row["head_in_scope"]:
            reason = "current version is out of scope"
        elif head.status is Status.ARCHIVED:
            reason = "current version archived"
        elif head.kind is Kind.DIRECTIVE and not options.include_directives:
            reason = "current version is a directive"
        elif not row["head_has_vector"]:
            reason = "current version has no vector"
        elif head.id in options.exclude_fact_ids or (
            head.message_id is not None and head.message_id in options.exclude_message_ids
        ):
            reason = "already in the message window"
        if reason:
            dropped[head.id] = reason
            continue
        claim_sim = float(row["claim_sim"])
        passage_sim = None if row["passage_sim"] is None else float(row["passage_sim"])
        similarity = claim_sim if passage_sim is None else w * claim_sim + (1 - w) * passage_sim
        demoted = bool(row["head_demoted"])
        score = similarity - (options.descendant_penalty if demoted else 0.0)
        current = best.get(head.id)
        if current is None or score > current["score"]:
            best[head.id] = {
                "head": head,
                "hit": hit,
                "score": score,
                "similarity": similarity,
                "claim_sim": claim_sim,
                "passage_sim": passage_sim,
                "demoted": demoted,
                "derived_from": set(row["head_derived_from"] or ()),
            }

    ordered = sorted(best.values(), key=lambda c: (-round(c["score"], 6), _tiebreak(c["head"].body)))
    selected: list[Hit] = []
    derived_from: dict[uuid.UUID, set[uuid.UUID]] = {}
    per_agent: Counter[str] = Counter()
    for cand in ordered:
        head: Fact = cand["head"]
        if cand["score"] < options.relevance_floor:
            dropped[head.id] = "below the relevance floor"
            continue
        if cand["derived_from"] & derived_from.keys():
            dropped[head.id] = "restates a fact already selected"
            continue
        if cand["demoted"] and per_agent[head.agent_id] >= options.per_agent_cap:
            dropped[head.id] = f"cap of {options.per_agent_cap} facts for sub-agent {head.agent_id}"
            continue
        # a restatement that outranked its source gives its slot back when the source arrives
        for earlier in [h for h in selected if head.id in derived_from[h.fact.id]]:
            selected.remove(earlier)
            del derived_from[earlier.fact.id]
            if earlier.demoted:
                per_agent[earlier.fact.agent_id] -= 1
            dropped[earlier.fact.id] = "restates a fact already selected"
        if len(selected) >= options.k:
            dropped[head.id] = f"beyond k={options.k}"
            continue
        resolved_from = cand["hit"] if cand["hit"].id != head.id else None
        flags = []
        if resolved_from is not None:
            flags.append(f"resolved from superseded {resolved_from.short_id}")
        if cand["demoted"]:
            flags.append(f"demoted: sub-agent {head.agent_id}")
        selected.append(
            Hit(
                fact=head,
                score=cand["score"],
                distance=1.0 - cand["similarity"],
                claim_similarity=cand["claim_sim"],
                passage_similarity=cand["passage_sim"],
                demoted=cand["demoted"],
                resolved_from=resolved_from,
                flags=tuple(flags),
            )
        )
        derived_from[head.id] = cand["derived_from"]
        if cand["demoted"]:
            per_agent[head.agent_id] += 1

    top = max((c["score"] for c in ordered), default=None)
    return SearchResult(
        hits=tuple(selected),
        query=query,
        not_in_memory=not selected,
        best_score=top,
        dropped=tuple((fid.hex[:8], why) for fid, why in dropped.items() if fid not in derived_from),
    )
