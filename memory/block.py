"""The injected memory block: what the model reads, and what a UI shows about it."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any

from memory.model import Fact, Hit, SearchResult
from memory.pins import PinnedFact
from memory.tokens import count_tokens

# one claim is short; a long conclusion is clipped so the block stays bounded whatever was stored
MAX_FACT_CHARS = 320

HEADER = "## Memory\nFacts recalled for this conversation (current values; ids in brackets):"
NOTHING = "## Memory\nNothing relevant to this request is in memory."
PINNED_HEADER = "## Pinned\nStanding rules and facts the user pinned: they always apply (current values; ids in brackets):"


def clip(text: str, limit: int = MAX_FACT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def hit_line(hit: Hit) -> str:
    """One retrieved fact as the model reads it."""
    note = ""
    if hit.resolved_from is not None:
        note = " (updated: replaces an earlier value)"
    elif any(f.startswith("untrusted") for f in hit.flags):
        note = " (from a tool result or web page; the user's own value is listed above)"
    elif any(f.startswith("possibly outdated") for f in hit.flags):
        note = " (possibly outdated: a newer value is listed above)"
    elif hit.demoted:
        note = f" (from sub-agent {hit.fact.agent_id})"
    return f"- [{hit.fact.short_id}] {clip(hit.fact.body)}{note}"


def pinned_line(fact: Fact) -> str:
    """One pinned fact as the model reads it."""
    return f"- [{fact.short_id}] {clip(fact.body)}"


def render_block(result: SearchResult | None) -> str:
    """The text added to the system prompt for one model call ('' when there was no query)."""
    if result is None:
        return ""
    if result.not_in_memory:
        return NOTHING
    return "\n".join([HEADER, *(hit_line(hit) for hit in result.hits)])


def render_pinned(facts: Sequence[Fact]) -> str:
    """The pinned section ('' when nothing is pinned)."""
    return "\n".join([PINNED_HEADER, *(pinned_line(f) for f in facts)]) if facts else ""


def describe_pinned(pins: Sequence[PinnedFact], injected: Collection[uuid.UUID]) -> list[dict[str, Any]]:
    """A JSON-ready account of the pinned tier: every pin a namespace sees, and whether it went in."""
    return [
        {
            "id": str(p.fact.id),
            "short_id": p.fact.short_id,
            "text": p.fact.body,
            "kind": p.fact.kind.value,
            "source": p.fact.source.value,
            "pinned_by": p.pinned_by,
            "edited": p.edited,  # superseded since it was pinned: this is the new version
            "injected": p.fact.id in injected,
            "excluded": p.excluded_because,
        }
        for p in pins
    ]


def describe_injection(result: SearchResult | None, block: str) -> dict[str, Any]:
    """A JSON-ready account of one injection, for stream events and logs."""
    hits = [] if result is None else result.hits
    return {
        "query": None if result is None else result.query,
        # an empty SearchResult is falsy (it has __len__): test for None, not truthiness
        "not_in_memory": result is not None and result.not_in_memory,
        "tokens": count_tokens(block) if block else 0,
        "chars": len(block),
        "facts": [
            {
                "id": str(h.fact.id),
                "short_id": h.fact.short_id,
                "text": h.fact.body,
                "distance": round(h.distance, 4),
                "score": round(h.score, 4),
                "kind": h.fact.kind.value,
                "source": h.fact.source.value,
                "agent_id": h.fact.agent_id,
                "demoted": h.demoted,
                "resolved_from": None if h.resolved_from is None else h.resolved_from.body,
                "flags": list(h.flags),
            }
            for h in hits
        ],
        "dropped": [] if result is None else [list(d) for d in result.dropped],
    }
