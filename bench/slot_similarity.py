"""Could the embedder's similarity tell two claims about one slot from look-alikes? Side by side with
the rules (memory.slots.may_outdate: memory.corrections.same_slot, and a question never
outdates a statement), on the labelled pairs.

    python -m bench.slot_similarity [--embedder minilm] [--out results/supersession/slot-similarity.md]

The block orders two current claims about one slot newer first and flags the older "possibly
outdated" (memory.slots). A cosine threshold between the two claims was the obvious test for "one
slot"; this measures, per threshold, how many corrections it would catch (a real update, reordered)
against how many look-alikes it would reorder too (two true claims about different things, one
flagged as outdated). The pairs are memory/eval/data's own set (the rules were tuned on it) and the
blind sets (written apart from the rules; the fourth is held out, results/supersession/README.md).
No database: texts and vectors only.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval.supersession_pairs import OWN_SETS, read_jsonl, short_label
from memory.embedders.select import embedder_from_name
from memory.slots import may_outdate

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def cosines(embedder: Any, rows: list[dict[str, Any]]) -> np.ndarray:
    old = np.asarray(embedder.embed([r["old"] for r in rows]), dtype=np.float64)
    new = np.asarray(embedder.embed([r["new"] for r in rows]), dtype=np.float64)
    return (old * new).sum(1) / np.linalg.norm(old, axis=1) / np.linalg.norm(new, axis=1)


def table(embedder: Any) -> list[str]:
    lines = [
        "| pairs | test | corrections caught | look-alikes reordered too |",
        "|---|---|---:|---:|",
    ]
    for name, path in ((short_label(source), path) for source, path in OWN_SETS.items()):
        rows = read_jsonl(path)
        updates = np.array([r["label"] == "supersede" for r in rows])
        n_up, n_look = int(updates.sum()), int((~updates).sum())
        sims = cosines(embedder, rows)
        rule = np.array([may_outdate(r["new"], r["old"]) for r in rows])
        lines.append(
            f"| {name} | the rules (`slots.may_outdate`) | {int(rule[updates].sum())}/{n_up} "
            f"| {int(rule[~updates].sum())}/{n_look} |"
        )
        for threshold in THRESHOLDS:
            hit = sims >= threshold
            lines.append(
                f"| {name} | cosine >= {threshold} | {int(hit[updates].sum())}/{n_up} "
                f"| {int(hit[~updates].sum())}/{n_look} |"
            )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", type=Path, default=Path("results/supersession/slot-similarity.md"))
    args = parser.parse_args(argv)
    lines = table(embedder_from_name(args.embedder))
    text = "\n".join(
        [
            f"# One slot or look-alikes: similarity against the rules ({args.embedder})",
            "",
            "`python -m bench.slot_similarity`; each row: pairs it calls one slot, of each label.",
            "",
            *lines,
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
