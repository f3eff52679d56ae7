"""A prototype of memory.retrieval.search in two steps: rank on lean candidate rows, then read the k winners.

The library's candidate query returns every column of the hit and of its head for ~170 candidate rows,
and `rank` builds two `Fact`s per row, although at most k heads (and their resolved-from hits) are
ever returned. Here the candidate query returns only what ranking reads (kinds, statuses, agent, the
md5 of the head's body for the tie-break, similarities, scope flags), ranking runs on those rows with
the library's rules unchanged, and one primary-key read fetches the full rows of the winners.
The result is the library's, hit for hit and score for score (the benchmark checks it on every query).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from memory import facts as fact_sql
from memory import retrieval
from memory.model import Hit, Namespace, SearchResult
from memory.retrieval import SearchOptions
from memory.vectors import as_vector

_CTES = retrieval._CANDIDATES.split("SELECT {hit_columns}", 1)[0]

LEAN_CANDIDATES = (
    _CTES
    + """SELECT hit.id AS hit_id, hit.kind AS hit_kind, hit.status AS hit_status, hit.head_id,
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
)


def search(
    conn: psycopg.Connection,
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions,
    one_round_trip_settings: bool = False,
) -> SearchResult:
    statement = sql.SQL(LEAN_CANDIDATES).format(
        eid=sql.Literal(int(embedder_id)), dims=sql.Literal(int(dims))
    )
    params = {
        "session": ns.session_id,
        "lineage": list(ns.lineage),
        "ns": ns.id,
        "q": as_vector(query_vector),
        "n": max(options.candidates, options.k * 4),
    }
    ef_search = max(40, params["n"])
    with conn.transaction():
        if one_round_trip_settings:
            conn.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                (str(ef_search),),
            )
        else:
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)))
        rows = conn.execute(statement, params).fetchall()
        chosen, dropped, top = rank_lean(rows, options)
        wanted = [c["head_id"] for c in chosen] + [c["hit_id"] for c in chosen if c["hit_id"] != c["head_id"]]
        facts = {f.id: f for f in fact_sql.get_facts(conn, wanted)}
    hits = []
    for c in chosen:
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
    selected = {c["head_id"] for c in chosen}
    return SearchResult(
        hits=tuple(hits),
        query=query,
        not_in_memory=not hits,
        best_score=top,
        dropped=tuple((fid.hex[:8], why) for fid, why in dropped.items() if fid not in selected),
    )


def rank_lean(
    rows: Sequence[dict[str, Any]], options: SearchOptions
) -> tuple[list[dict[str, Any]], dict[uuid.UUID, str], float | None]:
    """memory.retrieval.rank's decisions, made on lean rows; returns (selected, dropped, best score)."""
    w = options.claim_weight
    best: dict[uuid.UUID, dict[str, Any]] = {}
    dropped: dict[uuid.UUID, str] = {}
    for row in rows:
        hit_id, head_id = row["hit_id"], row["head_id"]
        if row["hit_status"] == "archived":
            dropped[hit_id] = "archived"
            continue
        if row["hit_kind"] == "directive" and not options.include_directives:
            dropped[hit_id] = "directive"
            continue
        reason = None
        if not row["head_in_scope"]:
            reason = "current version is out of scope"
        elif row["head_status"] == "archived":
            reason = "current version archived"
        elif row["head_kind"] == "directive" and not options.include_directives:
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
                "md5": row["head_md5"],
                "score": score,
                "similarity": similarity,
                "claim_sim": claim_sim,
                "passage_sim": passage_sim,
                "demoted": demoted,
                "derived_from": set(row["head_derived_from"] or ()),
            }

    ordered = sorted(best.values(), key=lambda c: (-round(c["score"], 6), c["md5"]))
    selected: list[dict[str, Any]] = []
    selected_ids: set[uuid.UUID] = set()
    per_agent: Counter[str] = Counter()
    for cand in ordered:
        head_id = cand["head_id"]
        if cand["score"] < options.relevance_floor:
            dropped[head_id] = "below the relevance floor"
            continue
        if cand["derived_from"] & selected_ids:
            dropped[head_id] = "restates a fact already selected"
            continue
        if cand["demoted"] and per_agent[cand["agent_id"]] >= options.per_agent_cap:
            dropped[head_id] = f"cap of {options.per_agent_cap} facts for sub-agent {cand['agent_id']}"
            continue
        if len(selected) >= options.k:
            dropped[head_id] = f"beyond k={options.k}"
            continue
        selected.append(cand)
        selected_ids.add(head_id)
        if cand["demoted"]:
            per_agent[cand["agent_id"]] += 1
    top = max((c["score"] for c in ordered), default=None)
    return selected, dropped, top
