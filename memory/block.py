"""The injected memory block: what the model reads, and what a UI shows about it."""

from __future__ import annotations

from typing import Any

from memory.model import SearchResult
from memory.tokens import count_tokens

# one claim is short; a long conclusion is clipped so the block stays bounded whatever was stored
MAX_FACT_CHARS = 320

HEADER = "## Memory\nFacts recalled for this conversation (current values; ids in brackets):"
NOTHING = "## Memory\nNothing relevant to this request is in memory."


def clip(text: str, limit: int = MAX_FACT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def render_block(result: SearchResult | None) -> str:
    """The text added to the system prompt for one model call ('' when there was no query)."""
    if result is None:
        return ""
    if result.not_in_memory:
        return NOTHING
    lines = [HEADER]
    for hit in result.hits:
        note = ""
        if hit.resolved_from is not None:
            note = " (updated: replaces an earlier value)"
        elif hit.demoted:
            note = f" (from sub-agent {hit.fact.agent_id})"
        lines.append(f"- [{hit.fact.short_id}] {clip(hit.fact.body)}{note}")
    return "\n".join(lines)


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
