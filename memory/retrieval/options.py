"""What a search may be asked: how many facts, how they are weighed, what is held back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How a search ranks and how much it returns (docs/internals/ranking.md explains each step)."""

    k: int = 8
    # the rest goes to the passage the claim was carved from; more weight on the message lost LoCoMo
    # evidence on the harness's tune conversations (results/tuning/README.md)
    claim_weight: float = 0.7
    descendant_penalty: float = 0.15  # a sub-agent's fact ranks below an equally close one of the lineage
    relevance_floor: float = 0.2  # blended cosine similarity; below it nothing is "in memory"
    per_agent_cap: int = 3  # facts per sub-agent among the demoted (delegated) ones
    # nearest claims fetched before ranking (at least 4k): more changed few answers and cost time
    # (docs/internals/ranking.md, "Figures behind the defaults")
    candidates: int = 32
    # hybrid: also the claims, and the claims of the passages, that best match any content word of the
    # query (full-text search), fused with the nearest ones by reciprocal rank. Off: vectors only, which
    # lost much of LoCoMo's evidence at small budgets (results/tuning/README.md)
    keyword: bool = True
    # best keyword matches fetched per side (claims, passages), at least k. 16 rather than 32: at a
    # 1M-token session each keyword candidate is a row to rank, and 16 took the p95 of a k=8 search
    # from 1.21 to 1.01 times PostgresStore's; what reached blocks moved a question or so either way
    # at 300 and 1,200 tokens, tune and holdout alike, and not at all from 3,000, where k is larger
    # (results/long-sessions-27/keyword-16)
    keyword_candidates: int = 16
    # a query word in this many of the session's claims is left out: it ranks nothing apart, and
    # ranking all it matches is slow (docs/internals/ranking.md, "Figures behind the defaults")
    keyword_common: int = 30
    # the fusion's weights: other values moved a question or two on the harness's tune conversations,
    # so these stayed (results/tuning/README.md)
    keyword_weight: float = 0.5  # a keyword ranking's share of the fused score, the similarity's being 1
    rrf_k: float = 5.0  # fused score: sum over rankings of weight / (rrf_k + place)
    # a long message cut into many claims would otherwise fill the block with itself: after this many
    # facts from one message, its further facts wait until every other candidate has had its turn
    # (None: no such limit). 2 was chosen among 1, 2 and 3 on the harness's tune conversations: it
    # gained BEAM a few points over no limit and moved nothing on LoCoMo (results/tuning/README.md)
    per_message: int | None = 2
    # where a session records speakers (a group chat) and the query names one of them ("what does
    # Melanie do to destress?"), that speaker's own facts gain this much similarity in the ordering
    # (not in the relevance the floor checks): what a person says of themselves answers a question
    # about them more often than what others say to them by name. Off: on the harness's held-out
    # LoCoMo conversations 0.2 found more evidence (+2.0 points at 1,200 tokens) but carried no more
    # answer words (+0.0, +0.2, -0.7 at 1,200 / 3,000 / 6,000; results/tuning/merged-lines.md).
    speaker_boost: float = 0.0
    include_directives: bool = False
    # a directive that carries a value ("how do I fit the new quota of 1,200 calls a day?") is recalled
    # like a claim: people state facts inside their questions and requests. One without a value ("what
    # is our budget?") states nothing and stays held out. Recalling every directive found a little
    # more but showed stale values unflagged more often (results/tuning/README.md, "Capture and
    # directives")
    directives_with_values: bool = True
    exclude_message_ids: frozenset[str] = field(default_factory=frozenset)
    exclude_fact_ids: frozenset[uuid.UUID] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("k must be at least 1")
        if not 0.0 <= self.claim_weight <= 1.0:
            raise ValueError("claim_weight must be between 0 and 1")
        if self.keyword_candidates < 1 or self.keyword_common < 1:
            raise ValueError("keyword_candidates and keyword_common must be at least 1")
        if self.per_message is not None and self.per_message < 1:
            raise ValueError("per_message must be at least 1 (None: no limit)")
        if self.keyword_weight < 0 or self.rrf_k < 0:
            raise ValueError("keyword_weight and rrf_k must not be negative")
        if self.per_agent_cap < 1:
            raise ValueError("per_agent_cap must be at least 1")


def candidate_count(options: SearchOptions) -> int:
    """How many nearest claims a search fetches before ranking: `candidates`, at least 4k."""
    return max(options.candidates, options.k * 4)


def keyword_candidate_count(options: SearchOptions) -> int:
    """How many best keyword matches a search fetches per side: `keyword_candidates`, at least k."""
    return max(options.keyword_candidates, options.k)
