"""The hits of a search, built from the rows ranking chose: what each hit is flagged with (resolved
from a superseded version, demoted, found by keyword, restating another hit), and the order the
block shows them in (same-slot claims by trust and time, the user's claims above what tools and web
pages said about the same thing)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

from memory.flags import CurrentAsOf, Demoted, Flag, KeywordMatch, ReplacedAutomatically, ResolvedFrom
from memory.model import UNTRUSTED_SOURCES, Fact, Hit, Kind, SearchResult
from memory.retrieval.keywords import keyword_words
from memory.retrieval.ranking import Ranked
from memory.retrieval.statement import Chosen
from memory.rules.slots import order_same_slot, restatement


def search_result(query: str, ranked: Ranked, chosen: Chosen) -> SearchResult:
    """The hits of `ranked`, made of what was read for the candidates it chose (`chosen`:
    memory.retrieval.statement.read_chosen; a candidate whose fact was deleted since is left out):
    flags for resolved, demoted, keyword and restating hits, then same-slot and trust order (which
    reads the starts of the hits' messages, read with them). No database."""
    hits = []
    restated: dict[uuid.UUID, Sequence[uuid.UUID]] = {}
    for c in ranked.chosen:
        head = chosen.facts.get(c["head_id"])
        if head is None:
            continue
        resolved_from = chosen.facts.get(c["hit_id"]) if c["hit_id"] != c["head_id"] else None
        flags: list[Flag] = []
        if resolved_from is not None:
            flags.append(ResolvedFrom(resolved_from.short_id))
            # how the head replaced its predecessor: said by capture's rules, or by an agent
            because = chosen.replaced_automatically.get(resolved_from.id)
            if because is not None:
                flags.append(ReplacedAutomatically(_clip(resolved_from.body), because))
        if c["demoted"]:
            flags.append(Demoted(head.agent_id))
        if c.get("keyword"):
            flags.append(KeywordMatch())
        if head.id in chosen.restates:
            restated[head.id] = chosen.restates[head.id]
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
    if len(hits) > 1 and restated:
        hits = flag_restatements(hits, restated)
    return SearchResult(
        # the starts same-slot order may ask for were read with the rows: it asks for nothing more
        hits=tuple(below_the_users_claims(order_same_slot(hits, lambda _: chosen.message_starts))),
        query=query,
        not_in_memory=not hits,
        best_score=ranked.best_score,
        dropped=ranked.dropped,
    )


def flag_restatements(hits: list[Hit], restated: Mapping[uuid.UUID, Sequence[uuid.UUID]]) -> list[Hit]:
    """Flag each hit that restates another hit's claim (memory.graph.restatements) `Restates(short id)`:
    the block folds it into the line it restates, so an echo is never a second line. `restated`:
    each hit's restates edges (the facts it restates, in id order), as the candidate statement read
    them."""
    short = {h.fact.id: h.fact.short_id for h in hits}
    out = []
    for h in hits:
        echoes = [restatement(h.fact.body, short[dst]) for dst in restated.get(h.fact.id, ()) if dst in short]
        out.append(replace(h, flags=(*h.flags, *echoes)) if echoes else h)
    return out


def _topic_words(text: str) -> frozenset[str]:
    """A claim's content words, crudely stemmed ("budgets" meets "budget"); numbers and values out."""
    words = (w.removesuffix("'s").removesuffix("’s") for w in keyword_words(text))
    return frozenset(
        w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w
        for w in words
        if len(w) > 2 and w.isalpha()
    )


def _users_claim(hit: Hit) -> bool:
    return hit.fact.kind is Kind.USER_INPUT and hit.fact.source not in UNTRUSTED_SOURCES


def below_the_users_claims(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` with each tool result or web page moved just below the last claim the user stated that
    it shares a content word with. Text from elsewhere may resemble the query more than the user's
    own words (a page titled with the query's topic, or written to match it); whether it states a
    competing value or states nothing, it never outranks what the user said about the same thing."""
    ordered = list(hits)
    for hit in [h for h in hits if h.fact.source in UNTRUSTED_SOURCES]:
        words = _topic_words(hit.fact.body)
        place = ordered.index(hit)
        last = max(
            (
                j
                for j, other in enumerate(ordered)
                if j > place and _users_claim(other) and not words.isdisjoint(_topic_words(other.fact.body))
            ),
            default=None,
        )
        if last is not None:
            ordered.insert(last, ordered.pop(place))  # after the pop, `last` is just below that claim
    return ordered


# a search as of a past moment asks for this many times k: some of today's hits did not exist then
AS_OF_WIDEN = 4


def as_of_view(result: SearchResult, then: Mapping[uuid.UUID, Fact], k: int) -> SearchResult:
    """Today's hits as the memory stood at a past moment: claims recorded by then, each in the version
    that was current then (`then`: by head id, memory.graph.reads.facts_as_of), at most `k`; the rest left
    out, and said so. A hit shown in an older version is flagged `CurrentAsOf` (in place of how it was
    resolved today)."""
    hits: list[Hit] = []
    dropped = list(result.dropped)
    for hit in result.hits:
        version = then.get(hit.fact.id)
        if version is None:
            dropped.append((hit.fact.short_id, "not in memory yet, or no longer valid, at as_of"))
            continue
        if version.id != hit.fact.id:
            flags: list[Flag] = [
                f for f in hit.flags if not isinstance(f, ResolvedFrom | ReplacedAutomatically)
            ]
            flags.append(CurrentAsOf(hit.fact.short_id))
            matched = hit.resolved_from if hit.resolved_from and hit.resolved_from.id != version.id else None
            hit = replace(hit, fact=version, resolved_from=matched, flags=tuple(flags))
        hits.append(hit)
    kept = hits[:k]
    dropped += [(h.fact.short_id, f"beyond k={k}") for h in hits[k:]]
    return replace(result, hits=tuple(kept), not_in_memory=not kept, dropped=tuple(dropped))


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
