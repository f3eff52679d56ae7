"""Would a correction classifier, trained with in-the-wild negatives, find the corrections the rules
miss without writing wrong edges in real chats? Side by side with the rules (memory.supersession.accept).

    python -m bench.correction_classifier --locomo $DATA/locomo/locomo_dev.json --beam $DATA/beam/100K \
        [--split results/split.json] [--out results/supersession/classifier.json]

The classifier is a logistic regression over what the rules already read of a pair (their verdict, cue
words, value kinds, shared words, lengths: `pair_features`) and, with `--embedding` (the default), the
pair's MiniLM vectors (their product and difference, as sentence-pair models use). It is asked only
where the rules say no, and it is trained on:

  positives  the corrections of the tuning pair sets (TUNED);
  negatives  their look-alikes, and every candidate pair capture compares in the tuning conversations
             of the harness split (LoCoMo and BEAM), except pairs whose new turn BEAM cites as an
             update. Those chats are where a correction rule meets its real neighbours: "Monday's
             shelter visit" against "you can't volunteer at the shelter anymore". Each of the two
             sources of chat negatives weighs `--chat-weight` times the positives.

It is measured on the held-out pair sets (every other set of OWN_SETS) and on the holdout
conversations: how many edges it adds there, and how many of BEAM's added ones are a cited update.
No database: capture's candidate search is done in memory (the CANDIDATES nearest earlier claims of
the same speaker that state something, at cosine `--floor` or more), and a new claim counts as one edge
when one of its candidates is accepted. Unlike capture, an earlier claim stays a candidate after it is
superseded, so the chat counts are a close upper bound (the rules' count here is within one of
memory.eval's on each dataset).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.contradiction_model import Vectors
from bench.eval.loaders import load_beam, load_locomo
from bench.eval.supersession_pairs import BEAM_PAIRS, OWN_SETS, SUPERSEDE, read_jsonl, short_label
from memory import corrections
from memory.embedders.select import embedder_from_name
from memory.splitting import split_message
from memory.supersession import CANDIDATES, accept
from memory.thresholds import thresholds_for

# the sets the rules were tuned on (results/supersession/README.md); every other own set is held out
TUNED = ("ours", "ours-blind", "ours-blind-2", "ours-blind-3", "ours-blind-4")
THRESHOLDS = (0.5, 0.7, 0.9)
# the verdicts a reason starts with, one feature each
VERDICTS = (
    "no aligned value changed",
    "same slot",
    "about another person",
    "about another owner",
    "about other things",
    "another qualifier",
    "adds a value",
    "told as history",
    "a question",
    "a hypothetical",
    "another period",
    "a goal",
    "code",
)
_FIRST_PERSON = frozenset(["i", "we", "my", "our", "i'm", "we're", "i've", "we've"])
_POINTERS = frozenset(["it", "that", "this", "they", "its"])
_WORD = re.compile(r"[a-z0-9']+")


@dataclass(frozen=True, slots=True)
class Candidate:
    old: str
    new: str
    sim: float
    new_turn: str  # the new claim's turn id, which BEAM's update pairs cite
    old_turn: str


def candidates(
    turns: Iterable[tuple[str, str | None, str]], vectors: Vectors, floor: float
) -> list[list[Candidate]]:
    """For each new user claim of (turn id, speaker, text) turns that states something, the earlier
    user claims of its speaker capture would compare it with, nearest first."""
    prior: list[tuple[str, str | None, str, np.ndarray]] = []
    found = []
    for turn, speaker, text in turns:
        claims = [c for c in split_message(text) if c.kind == "user_input"]
        new = list(zip(claims, vectors([c.text for c in claims]), strict=True))
        mine = [p for p in prior if p[1] == speaker]
        for claim, vec in new:
            if not mine or not corrections.states_something(claim.text):
                continue
            sims = np.stack([p[3] for p in mine]) @ vec
            near = [i for i in np.argsort(-sims) if sims[i] >= floor][:CANDIDATES]
            if near:
                found.append(
                    [Candidate(mine[i][2], claim.text, float(sims[i]), turn, mine[i][0]) for i in near]
                )
        prior += [(turn, speaker, c.text, v) for c, v in new]
    return found


def pair_features(old: str, new: str, sim: float) -> list[float]:
    """What the rules read of a pair, as numbers: their verdict, cues, values, shared words, lengths."""
    verdict = corrections.judge(old, new)
    group = next((g for g in VERDICTS if verdict.reason.startswith(g)), None)
    w_old, w_new = _WORD.findall(old.lower()), _WORD.findall(new.lower())
    s_old, s_new = set(w_old), set(w_new)
    v_old, v_new = corrections.values(old), corrections.values(new)
    k_old = {corrections._kind_family(v.kind) for v in v_old}
    k_new = {corrections._kind_family(v.kind) for v in v_new}
    changed = any(
        corrections._kind_family(a.kind) == corrections._kind_family(b.kind) and a.norm != b.norm
        for a in v_old
        for b in v_new
    )
    new_names = {v.norm for v in v_new if v.kind == "name"} - {v.norm for v in v_old if v.kind == "name"}
    c_old, c_new = corrections._content(old), corrections._content(new)
    shared = len(c_old & c_new)
    return [
        sim,
        sim * sim,
        float(verdict.supersedes),
        *(float(group == g) for g in VERDICTS),
        float(bool(s_new & corrections._STRONG_CUES)),
        float(bool(s_new & corrections._WEAK_CUES)),
        float(bool(s_old & corrections._STRONG_CUES)),
        float(bool(corrections._ENDED.search(new))),
        float(bool(corrections._ENDED.search(old))),
        float(bool(corrections._INSTEAD.search(new))),
        float(bool(v_old)),
        float(bool(v_new)),
        float(bool(k_old & k_new)),
        float(changed),
        float(bool(new_names)),
        shared / max(1, min(len(c_old), len(c_new))),
        min(shared, 4) / 4,
        math.log1p(len(w_old)) / 4,
        math.log1p(len(w_new)) / 4,
        float(corrections.says_one_thing(old)),
        float(corrections.says_one_thing(new)),
        float(bool(s_new & _POINTERS)),
        float("now" in s_new),
        float(bool(s_old & _FIRST_PERSON)),
        float(bool(s_new & _FIRST_PERSON)),
        float(bool(corrections._HISTORY.search(new))),
        float(bool(corrections._ADDITION.search(new))),
    ]


class Classifier:
    """Logistic regression, L2-regularised, fitted by full-batch gradient descent (deterministic)."""

    def __init__(self, vectors: Vectors, embedding: bool, l2: float = 0.01) -> None:
        self.vectors, self.embedding, self.l2 = vectors, embedding, l2
        self._rows: dict[tuple[str, str], np.ndarray] = {}

    def row(self, c: Candidate) -> np.ndarray:
        key = (c.old, c.new)
        if key not in self._rows:
            f = pair_features(c.old, c.new, c.sim)
            if self.embedding:
                u, v = self.vectors([c.old, c.new])
                f += [*(u * v * 5), *(np.abs(u - v) * 5)]  # scaled to the other features' range
            self._rows[key] = np.asarray(f)
        return self._rows[key]

    def fit(self, examples: list[tuple[Candidate, bool, float]], steps: int = 3000) -> None:
        x = np.stack([self.row(c) for c, _, _ in examples])
        y = np.array([float(label) for _, label, _ in examples])
        w = np.array([weight for _, _, weight in examples])
        self.mu, self.sd = x.mean(0), x.std(0) + 1e-9
        z = np.hstack([(x - self.mu) / self.sd, np.ones((len(x), 1))])
        self.theta = np.zeros(z.shape[1])
        for _ in range(steps):
            p = 1 / (1 + np.exp(-z @ self.theta))
            self.theta -= z.T @ (w * (p - y)) / w.sum() + self.l2 * self.theta

    def score(self, c: Candidate) -> float:
        z = np.append((self.row(c) - self.mu) / self.sd, 1.0)
        return float(1 / (1 + np.exp(-z @ self.theta)))


class Judge:
    def __init__(self, classifier: Classifier, min_sim: float, short_sim: float) -> None:
        self.classifier, self.min_sim, self.short_sim = classifier, min_sim, short_sim
        self._rules: dict[tuple[str, str, float], bool] = {}

    def rules(self, c: Candidate) -> bool:
        key = (c.old, c.new, c.sim)
        if key not in self._rules:
            self._rules[key] = accept(c.old, c.new, c.sim, self.min_sim, self.short_sim) is not None
        return self._rules[key]

    def added(self, near: list[Candidate], threshold: float) -> Candidate | None:
        """The candidate the classifier would supersede where the rules supersede none, or None."""
        if any(self.rules(c) for c in near):
            return None
        return next((c for c in near if self.classifier.score(c) >= threshold), None)


def conversation_turns(dataset: Any, ids: set[str]) -> dict[str, list[tuple[str, str | None, str]]]:
    return {
        conv.id: [(t.id, t.speaker, t.text) for s in conv.sessions for t in s.turns if t.role == "user"]
        for conv in dataset.conversations
        if conv.id in ids
    }


def _shown(value: Any) -> str:
    """A setting as the results file records it: a data path by its last two parts, not the machine's."""
    return "/".join(value.parts[-2:]) if isinstance(value, Path) else str(value)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", type=Path, required=True, help="locomo_dev.json")
    parser.add_argument("--beam", type=Path, required=True, help="a folder of BEAM chats (100K)")
    parser.add_argument("--split", type=Path, default=Path("results/split.json"))
    parser.add_argument("--floor", type=float, default=0.20, help="cosine candidates are compared from")
    parser.add_argument("--chat-weight", type=float, default=10.0)
    parser.add_argument("--no-embedding", dest="embedding", action="store_false")
    parser.add_argument("--out", type=Path, help="write the table and the added holdout edges as JSON")
    args = parser.parse_args()
    split = json.loads(args.split.read_text())
    embedder = embedder_from_name("minilm")
    vectors, limits = Vectors(embedder), thresholds_for(embedder)

    pairs = {
        source: [
            (row, candidates([("old", None, row["old"]), ("new", None, row["new"])], vectors, args.floor))
            for row in read_jsonl(path)
        ]
        for source, path in OWN_SETS.items()
    }
    chats: dict[str, tuple[str, list[list[Candidate]]]] = {}  # conversation -> (dataset, candidates)
    wanted = set(split["tune"]) | set(split["holdout"])
    for name, dataset in (("locomo", load_locomo(args.locomo)), ("beam", load_beam(args.beam))):
        for conv, turns in conversation_turns(dataset, wanted).items():
            print(f"candidates: {name} {conv}", file=sys.stderr, flush=True)
            chats[conv] = (name, candidates(turns, vectors, args.floor))
    updates = {
        (f"beam-{p['chat']}", new)
        for p in read_jsonl(BEAM_PAIRS)
        if p["label"] == SUPERSEDE
        for new in p["new_ids"]
    }

    classifier = Classifier(vectors, args.embedding)
    examples: list[tuple[Candidate, bool, float]] = [
        (c, row["label"] == SUPERSEDE, 1.0)
        for s in TUNED
        for row, near in pairs[s]
        for cs in near
        for c in cs
    ]
    positives = sum(label for _, label, _ in examples)
    for name in ("locomo", "beam"):
        negatives = [
            c
            for conv in split["tune"]
            if conv in chats and chats[conv][0] == name
            for cs in chats[conv][1]
            for c in cs
            if (conv, c.new_turn) not in updates
        ]
        examples += [(c, False, args.chat_weight * positives / len(negatives)) for c in negatives]
    classifier.fit(examples)
    judge = Judge(classifier, limits.supersede_min_similarity, limits.short_claim_similarity)

    table: list[dict[str, Any]] = []
    added_edges: list[dict[str, Any]] = []
    print(f"embedding features: {args.embedding}; chat negatives weigh {args.chat_weight} x the positives\n")
    print(
        "| pairs | tuned on | rules: found / kept | "
        + " | ".join(f"+ classifier >= {t}" for t in THRESHOLDS)
        + " |"
    )
    print("|---|---|---:|" + "---:|" * len(THRESHOLDS))
    for source, rows in pairs.items():
        cells = []
        for t in (None, *THRESHOLDS):
            found = kept = 0
            for row, near in rows:
                hit = any(
                    any(judge.rules(c) for c in cs) or (t is not None and judge.added(cs, t)) for cs in near
                )
                found += hit and row["label"] == SUPERSEDE
                kept += not hit and row["label"] != SUPERSEDE
            n_pos = sum(r["label"] == SUPERSEDE for r, _ in rows)
            cells.append(f"{found}/{n_pos} / {kept}/{len(rows) - n_pos}")
            table.append(
                {
                    "set": source,
                    "threshold": t,
                    "found": found,
                    "kept": kept,
                    "corrections": n_pos,
                    "lookalikes": len(rows) - n_pos,
                }
            )
        tuned = "yes" if source in TUNED else "**held out**"
        print(f"| {short_label(source)} | {tuned} | " + " | ".join(cells) + " |")
    print("\n| conversations | rules' edges | " + " | ".join(f"added at >= {t}" for t in THRESHOLDS) + " |")
    print("|---|---:|" + "---:|" * len(THRESHOLDS))
    for name in ("locomo", "beam"):
        for part in ("tune", "holdout"):
            convs = [c for c in split[part] if c in chats and chats[c][0] == name]
            rules = sum(any(judge.rules(c) for c in cs) for conv in convs for cs in chats[conv][1])
            cells = []
            for t in THRESHOLDS:
                added = [(conv, e) for conv in convs for cs in chats[conv][1] if (e := judge.added(cs, t))]
                cited = sum((conv, e.new_turn) in updates for conv, e in added) if name == "beam" else None
                cells.append(f"{len(added)}" + (f" ({cited} a cited update)" if cited is not None else ""))
                table.append(
                    {
                        "conversations": f"{name}-{part}",
                        "threshold": t,
                        "rules": rules,
                        "added": len(added),
                        "cited_updates": cited,
                    }
                )
                if part == "holdout" and t == 0.7:
                    added_edges += [
                        {
                            "conversation": conv,
                            "old": e.old,
                            "new": e.new,
                            "score": round(classifier.score(e), 3),
                        }
                        for conv, e in added
                    ]
            print(f"| {name} {part} ({len(convs)}) | {rules} | " + " | ".join(cells) + " |")
    print("\nadded at >= 0.7 in holdout conversations, a sample:")
    for edge in random.Random(0).sample(added_edges, min(8, len(added_edges))):
        print(json.dumps(edge, ensure_ascii=False))
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "settings": {k: _shown(v) for k, v in vars(args).items()},
                    "table": table,
                    "added_holdout_edges_at_0.7": added_edges,
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
