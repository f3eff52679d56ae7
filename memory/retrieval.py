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

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from memory.facts import get_facts
from memory.model import Hit, Kind, Namespace, SearchResult, Status
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
-- only what ranking reads: the k winners' full rows are read afterwards by primary key
SELECT hit.id AS hit_id, hit.kind AS hit_kind, hit.status AS hit_status, hit.head_id,
       head.kind AS head_kind, head.status AS head_status, head.agent_id AS head_agent_id,
       head.message_id AS head_message_id, md5(head.body) AS head_md5,
       hs.id IS NOT NULL AS head_in_scope,
       coalesce(hs.demoted, false) AS head_demoted,
       1 - (hv.embedding <=> %(q)s::vector) AS claim_sim,
       1 - (hpv.embedding <=> %(q)s::vector) AS passage_sim,
       EXISTS (SELECT 1 FROM beads.fact_vectors x
                WHERE x.fact_id = head.id AND x.embedder_id = {eid}) AS head_has_vector,
       coalesce((SELECT array_agg(e.dst) FROM beads.edges e
                  WHERE e.src = head.id AND e.relation = 'derived_from'), '{{}}') AS head_derived_from
  FROM hit_ids
  JOIN beads.facts hit ON hit.id = hit_ids.id
  JOIN beads.facts head ON head.id = hit.head_id
  LEFT JOIN scope hs ON hs.id = head.namespace_id
  JOIN beads.fact_vectors hv ON hv.fact_id = hit.id AND hv.embedder_id = {eid}
  LEFT JOIN beads.passage_vectors hpv ON hpv.passage_id = hit.passage_id AND hpv.embedder_id = {eid}
"""


def search(
    conn: psycopg.Connection,
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions = SearchOptions(),  # frozen, so a shared default is safe
) -> SearchResult:
    statement = sql.SQL(_CANDIDATES).format(eid=sql.Literal(int(embedder_id)), dims=sql.Literal(int(dims)))
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
        ranked = rank(conn.execute(statement, params).fetchall(), options)
        wanted = [c["head_id"] for c in ranked.chosen] + [c["hit_id"] for c in ranked.chosen]
        facts = {f.id: f for f in get_facts(conn, dict.fromkeys(wanted))}
    hits = []
    for c in ranked.chosen:
        head = facts[c["head_id"]]
        resolved_from = facts[c["hit_id"]] if c["hit_id"] != c["head_id"] else None
        flags = []
        if resolved_from is not None:
            flags.append(f"resolved from superseded {resolved_from.short_id}")
        if c["demoted"]:
            flags.append(f"demoted: sub-agent {head.agent_id}")
        hits.append(
            Hit(
                fact=head,
                score=c["score"],
                distance=1.0 - c["similarity"],
                claim_similarity=c["claim_sim"],
                passage_similarity=c["passage_sim"],
                demoted=c["demoted"],
                resolved_from=resolved_from,
                flags=tuple(flags),
            )
        )
    return SearchResult(
        hits=tuple(hits),
        query=query,
        not_in_memory=not hits,
        best_score=ranked.best_score,
        dropped=ranked.dropped,
    )


@dataclass(frozen=True, slots=True)
class Ranked:
    chosen: list[dict[str, Any]]  # the selected candidates, best first
    dropped: tuple[tuple[str, str], ...]  # (short id, reason) for candidates left out
    best_score: float | None


def rank(rows: Sequence[dict[str, Any]], options: SearchOptions) -> Ranked:
    """Decide which candidates make the block (pure: no database)."""
    w = options.claim_weight
    best: dict[uuid.UUID, dict[str, Any]] = {}
    dropped: dict[uuid.UUID, str] = {}
    for row in rows:
        hit_id, head_id = row["hit_id"], row["head_id"]
        if row["hit_status"] == Status.ARCHIVED:
            dropped[hit_id] = "archived"
            continue
        if row["hit_kind"] == Kind.DIRECTIVE and not options.include_directives:
            dropped[hit_id] = "directive"
            continue
        reason = None
        if not row["head_in_scope"]:
            reason = "current version is out of scope"
        elif row["head_status"] == Status.ARCHIVED:
            reason = "current version archived"
        elif row["head_kind"] == Kind.DIRECTIVE and not options.include_directives:
            reason = "current version is a directive"
        elif not row["head_has_vector"]:
            reason = "current version has no vector"
        elif head_id in options.exclude_fact_ids or (
            row["head_message_id"] is not None and row["head_message_id"] in options.exclude_message_ids
        ):
            reason = "already in the message window"
        if reason:
            dropped[head_id] = reason
            continue
        claim_sim = float(row["claim_sim"])
        passage_sim = None if row["passage_sim"] is None else float(row["passage_sim"])
        similarity = claim_sim if passage_sim is None else w * claim_sim + (1 - w) * passage_sim
        demoted = bool(row["head_demoted"])
        score = similarity - (options.descendant_penalty if demoted else 0.0)
        current = best.get(head_id)
        if current is None or score > current["score"]:
            best[head_id] = {
                "head_id": head_id,
                "hit_id": hit_id,
                "agent_id": row["head_agent_id"],
                "md5": row["head_md5"],  # md5(body), computed by Postgres over the UTF-8 text
                "score": score,
                "similarity": similarity,
                "claim_sim": claim_sim,
                "passage_sim": passage_sim,
                "demoted": demoted,
                "derived_from": set(row["head_derived_from"] or ()),
            }

    ordered = sorted(best.values(), key=lambda c: (-round(c["score"], 6), c["md5"]))
    chosen: list[dict[str, Any]] = []
    per_agent: Counter[str] = Counter()
    for cand in ordered:
        head_id = cand["head_id"]
        if cand["score"] < options.relevance_floor:
            dropped[head_id] = "below the relevance floor"
            continue
        if cand["derived_from"] & {c["head_id"] for c in chosen}:
            dropped[head_id] = "restates a fact already selected"
            continue
        if cand["demoted"] and per_agent[cand["agent_id"]] >= options.per_agent_cap:
            dropped[head_id] = f"cap of {options.per_agent_cap} facts for sub-agent {cand['agent_id']}"
            continue
        # a restatement that outranked its source gives its slot back when the source arrives
        for earlier in [c for c in chosen if head_id in c["derived_from"]]:
            chosen.remove(earlier)
            if earlier["demoted"]:
                per_agent[earlier["agent_id"]] -= 1
            dropped[earlier["head_id"]] = "restates a fact already selected"
        if len(chosen) >= options.k:
            dropped[head_id] = f"beyond k={options.k}"
            continue
        chosen.append(cand)
        if cand["demoted"]:
            per_agent[cand["agent_id"]] += 1
    selected = {c["head_id"] for c in chosen}
    return Ranked(
        chosen=chosen,
        dropped=tuple((fid.hex[:8], why) for fid, why in dropped.items() if fid not in selected),
        best_score=max((c["score"] for c in ordered), default=None),
    )
