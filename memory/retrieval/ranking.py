"""Which candidates make the result, in what order: scoring, keyword fusion and selection (pure: no
database; the candidate statement's rows in, the chosen rows and the reasons for the rest out)."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from memory.model import Kind, Status
from memory.retrieval.options import SearchOptions


@dataclass(frozen=True, slots=True)
class Ranked:
    chosen: list[dict[str, Any]]  # the selected candidates, best first
    dropped: tuple[tuple[str, str], ...]  # (short id, reason) for candidates left out
    best_score: float | None


def fuse(
    ordered: list[dict[str, Any]],
    keyword_ranks: Collection[dict[uuid.UUID, float]],
    rrf_k: float,
    keyword_weight: float,
) -> list[dict[str, Any]]:
    """Weighted reciprocal rank fusion: a candidate's score becomes the sum, over the rankings it is
    in, of weight / (rrf_k + its place there). The rankings: every candidate by its similarity score
    (`ordered`, best first; weight 1), and the keyword matches among them by ts_rank_cd, one ranking
    per side (claim, passage; `keyword_weight` each), equal ranks sharing a place. Relevance, which
    the floor checks, stays the similarity."""
    fused = {c["head_id"]: 1.0 / (rrf_k + place) for place, c in enumerate(ordered, start=1)}
    for ranks in keyword_ranks:
        first_place: dict[float, int] = {}
        for place, value in enumerate(sorted(ranks.values(), reverse=True), start=1):
            first_place.setdefault(value, place)
        for head_id, value in ranks.items():
            fused[head_id] += keyword_weight / (rrf_k + first_place[value])
    keyword = set().union(*keyword_ranks)
    out = [{**c, "score": fused[c["head_id"]], "keyword": c["head_id"] in keyword} for c in ordered]
    # a stable sort: equal fused scores keep the similarity order
    return sorted(out, key=lambda c: -round(c["score"], 9))


def spread_messages(ordered: list[dict[str, Any]], per_message: int, floor: float) -> list[dict[str, Any]]:
    """`ordered` with each message's facts past its first `per_message` (above the floor) moved after
    every other candidate, in their order: more messages reach a small block, none is lost to a large
    one."""
    first: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    taken: Counter[str] = Counter()
    for c in ordered:
        message = c["message_id"]
        if message is None or c["relevance"] < floor:
            first.append(c)
        elif taken[message] < per_message:
            taken[message] += 1
            first.append(c)
        else:
            later.append(c)
    return first + later


def _recalled_directive(options: SearchOptions, valued: bool | None) -> bool:
    return options.include_directives or (options.directives_with_values and bool(valued))


def named_speakers(query: str, rows: Sequence[dict[str, Any]]) -> frozenset[str]:
    """The speakers of the candidates (a session's people, from their facts' metadata) that `query`
    names, compared case-blind as whole words."""
    speakers = {speaker for row in rows if (speaker := row.get("head_speaker")) and speaker.strip()}
    words = {w.lower() for w in re.findall(r"[\w'-]+", query)}
    return frozenset(s for s in speakers if s.lower() in words)


def rank(rows: Sequence[dict[str, Any]], options: SearchOptions, query: str = "") -> Ranked:
    """Decide which candidates make the block (pure: no database); `query`: what was asked, for
    the speakers it names."""
    w = options.claim_weight
    named = named_speakers(query, rows) if options.speaker_boost else frozenset()
    best: dict[uuid.UUID, dict[str, Any]] = {}
    dropped: dict[uuid.UUID, str] = {}
    # per head, the best keyword rank of any hit resolving to it, on its claim and on its passage
    words: dict[str, dict[uuid.UUID, float]] = {"claim_words_rank": {}, "passage_words_rank": {}}
    # in id order, not the order the plan returned them in: where two candidates tie (two facts with
    # one text, or two versions of a claim), the same one wins whichever plan the server chose
    for row in sorted(rows, key=lambda r: r["hit_id"]):
        hit_id, head_id = row["hit_id"], row["head_id"]
        if row["hit_status"] == Status.ARCHIVED:
            dropped[hit_id] = "archived"
            continue
        if row["hit_kind"] == Kind.DIRECTIVE and not _recalled_directive(options, row["hit_valued"]):
            dropped[hit_id] = "directive"
            continue
        reason = None
        if not row["head_in_scope"]:
            reason = "current version is out of scope"
        elif row["head_status"] == Status.ARCHIVED:
            reason = "current version archived"
        elif row["head_kind"] == Kind.DIRECTIVE and not _recalled_directive(options, row["head_valued"]):
            reason = "current version is a directive"
        elif row.get("head_failed_delegation"):
            # "Sub-agent x did not complete its task: it failed with ...": kept for audit, never recalled
            reason = "a failed delegation's notice"
        elif not row["head_has_vector"]:
            reason = "current version has no vector"
        elif head_id in options.exclude_fact_ids or (
            row["head_message_id"] is not None and row["head_message_id"] in options.exclude_message_ids
        ):
            reason = "already in the message window"
        if reason:
            dropped[head_id] = reason
            continue
        if row["claim_sim"] is None:  # found through its passage, but not embedded in this space yet
            dropped[hit_id] = "no vector in this embedding space yet"
            continue
        claim_sim = float(row["claim_sim"])
        passage_sim = None if row["passage_sim"] is None else float(row["passage_sim"])
        similarity = claim_sim if passage_sim is None else w * claim_sim + (1 - w) * passage_sim
        demoted = bool(row["head_demoted"])
        relevance = similarity - (options.descendant_penalty if demoted else 0.0)
        spoken = bool(named) and row.get("head_speaker") in named
        score = relevance + (options.speaker_boost if spoken else 0.0)
        for side, ranks in words.items():
            if row.get(side) is not None:
                ranks[head_id] = max(ranks.get(head_id, 0.0), float(row[side]))
        current = best.get(head_id)
        # a tie goes to the current version itself: found as it is, it needs no "resolved from"
        if current is None or score > current["score"] or (score == current["score"] and hit_id == head_id):
            best[head_id] = {
                "head_id": head_id,
                "hit_id": hit_id,
                "agent_id": row["head_agent_id"],
                "message_id": row["head_message_id"],
                "md5": row["head_md5"],  # md5(body), computed by Postgres over the UTF-8 text
                "score": score,
                # what the floor checks: kept as it is when fusion replaces the score, and without
                # the speaker's boost
                "relevance": relevance,
                "similarity": similarity,
                "claim_sim": claim_sim,
                "passage_sim": passage_sim,
                "demoted": demoted,
                "derived_from": frozenset(row["head_derived_from"] or ()),
            }

    ordered = sorted(best.values(), key=lambda c: (-round(c["score"], 6), c["md5"]))
    if options.keyword:
        ordered = fuse(ordered, list(words.values()), options.rrf_k, options.keyword_weight)
    if options.per_message is not None:
        ordered = spread_messages(ordered, options.per_message, options.relevance_floor)
    chosen: list[dict[str, Any]] = []
    chosen_ids: set[uuid.UUID] = set()
    sources: set[uuid.UUID] = set()  # what the chosen restatements were derived from
    per_agent: Counter[str] = Counter()
    for cand in ordered:
        head_id = cand["head_id"]
        if cand["relevance"] < options.relevance_floor:
            dropped[head_id] = "below the relevance floor"
            continue
        if cand["derived_from"] and not cand["derived_from"].isdisjoint(chosen_ids):
            dropped[head_id] = "restates a fact already selected"
            continue
        if cand["demoted"] and per_agent[cand["agent_id"]] >= options.per_agent_cap:
            dropped[head_id] = f"cap of {options.per_agent_cap} facts for sub-agent {cand['agent_id']}"
            continue
        # a restatement that outranked its source gives its slot back when the source arrives
        if head_id in sources:
            for earlier in [c for c in chosen if head_id in c["derived_from"]]:
                chosen.remove(earlier)
                chosen_ids.discard(earlier["head_id"])
                if earlier["demoted"]:
                    per_agent[earlier["agent_id"]] -= 1
                dropped[earlier["head_id"]] = "restates a fact already selected"
            sources = set().union(*(c["derived_from"] for c in chosen))
        if len(chosen) >= options.k:
            dropped[head_id] = f"beyond k={options.k}"
            continue
        chosen.append(cand)
        chosen_ids.add(head_id)
        sources |= cand["derived_from"]
        if cand["demoted"]:
            per_agent[cand["agent_id"]] += 1
    selected = {c["head_id"] for c in chosen}
    return Ranked(
        chosen=chosen,
        dropped=tuple((fid.hex[:8], why) for fid, why in dropped.items() if fid not in selected),
        best_score=max((c["relevance"] for c in ordered), default=None),
    )
