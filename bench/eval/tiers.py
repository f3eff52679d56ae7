"""BEAM's tiers side by side: the margin of the headline arm over the better whole-turn baseline.

A tier is a BEAM dataset named by its length (`beam-100k`, `beam-500k`, `beam-1m`, from
`bench.eval.loaders.beam_tier`). The margin at a tier, budget and split is the headline arm's mean
minus the better of the baselines' means (PostgresStore and BM25 over whole turns), in points, with a
paired bootstrap interval against that baseline over the questions both have a figure for: what the
long-session prediction (`results/long-sessions/prediction.md`) is read against.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.eval.bootstrap import PairedInterval, paired_bootstrap

HEADLINE = "beads"
BASELINES = ("docstore", "bm25")
# the row field of each figure, and how the report names it
FIGURES = (
    ("answer_words", "answer words"),
    ("hit_any", "evidence recall"),
    # the evidence turn shown whole, or enough of it to read the claim in its turn (metrics.evidence_in_reach)
    ("evidence_readable", "evidence readable"),
)
MARGIN_PLOT = "margin-by-tier.png"

_TIER_DATASET = re.compile(r"beam-(\d+)([km])")


def tier_size(dataset: str) -> int | None:
    """The tier's length in tokens (`beam-500k` -> 500,000), None for a dataset that is no tier."""
    match = _TIER_DATASET.fullmatch(dataset)
    if match is None:
        return None
    return int(match.group(1)) * (1_000 if match.group(2) == "k" else 1_000_000)


@dataclass(frozen=True)
class Margin:
    dataset: str
    split: str | None  # None: every question of the rows
    budget: int
    figure: str  # a FIGURES field
    headline: float
    baseline: str  # the better of BASELINES on this figure here
    baseline_value: float
    interval: PairedInterval  # headline minus that baseline, question by question

    @property
    def points(self) -> float:
        return 100 * (self.headline - self.baseline_value)


def _means(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values)


def margins(rows: Sequence[dict[str, Any]], split: str | None = None) -> list[Margin]:
    """Per tier, budget and figure: the headline arm against the better baseline, in tier order."""
    values: dict[tuple[str, int, str, str], dict[str, float]] = defaultdict(dict)
    for row in rows:
        if tier_size(row["dataset"]) is None or row.get("budget") is None:
            continue
        if split is not None and row.get("split") != split:
            continue
        if row["arm"] != HEADLINE and row["arm"] not in BASELINES:
            continue
        for field, _ in FIGURES:
            value = row.get(field)
            if value is not None:
                values[(row["dataset"], row["budget"], field, row["arm"])][row["question_id"]] = float(value)
    out = []
    keys = {(d, b, f) for d, b, f, _ in values}
    for dataset, budget, field in sorted(keys, key=lambda k: (tier_size(k[0]) or 0, k[1], k[2])):
        mine = values.get((dataset, budget, field, HEADLINE))
        others = {a: v for a in BASELINES if (v := values.get((dataset, budget, field, a)))}
        if not mine or not others:
            continue
        better = max(others, key=lambda a: (_means(others[a]), a))
        shared = sorted(mine.keys() & others[better].keys())
        interval = paired_bootstrap([mine[q] for q in shared], [others[better][q] for q in shared])
        if interval is None:
            continue
        out.append(
            Margin(dataset, split, budget, field, _means(mine), better, _means(others[better]), interval)
        )
    return out


def _splits(rows: Sequence[dict[str, Any]]) -> list[str | None]:
    tags = {r["split"] for r in rows if r.get("split") and tier_size(r["dataset"]) is not None}
    order = ("tune", "holdout")
    named = sorted(tags, key=lambda t: (order.index(t) if t in order else len(order), t))
    # every question at once, where there is more than one split (with one, that is the split again)
    return [*named, None] if len(named) != 1 else named


def has_tiers(rows: Sequence[dict[str, Any]]) -> bool:
    return any(tier_size(r["dataset"]) is not None and r["arm"] == HEADLINE for r in rows)


def margin_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown: one row per split, tier and budget; per figure the headline arm, the better baseline
    (named) and the margin with its interval (* where the interval excludes zero)."""
    header = ["split", "tier (questions)", "budget"]
    for _, name in FIGURES:
        header += [f"{name}: {HEADLINE}", f"{name}: better baseline", f"{name}: margin [95% interval]"]
    body: list[list[str]] = []
    for split in _splits(rows):
        found = margins(rows, split)
        by_key: dict[tuple[str, int], dict[str, Margin]] = defaultdict(dict)
        for m in found:
            by_key[(m.dataset, m.budget)][m.figure] = m
        for (dataset, budget), figures in by_key.items():
            n = len({r["question_id"] for r in rows if r["dataset"] == dataset and _in(r, split)})
            cells = [split or "all", f"{dataset} ({n})", f"{budget:,}"]
            for field, _ in FIGURES:
                margin = figures.get(field)
                if margin is None:
                    cells += ["–", "–", "–"]
                    continue
                i = margin.interval
                star = " *" if i.excludes_zero else ""
                cells += [
                    f"{100 * margin.headline:.1f}%",
                    f"{100 * margin.baseline_value:.1f}% ({margin.baseline})",
                    f"{margin.points:+.1f} [{100 * i.low:+.1f}, {100 * i.high:+.1f}]{star} ({i.n})",
                ]
            body.append(cells)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in body]
    return lines


def _in(row: dict[str, Any], split: str | None) -> bool:
    return split is None or row.get("split") == split


def plot_margins(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """The margin against tier, one line per budget, a panel per figure and split (intervals as bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = _splits(rows)
    fig, axes = plt.subplots(
        len(splits), len(FIGURES), figsize=(5.0 * len(FIGURES), 3.4 * len(splits)), squeeze=False
    )
    tiers = sorted(
        {r["dataset"] for r in rows if tier_size(r["dataset"]) is not None}, key=lambda d: tier_size(d) or 0
    )
    for i, split in enumerate(splits):
        found = margins(rows, split)
        for j, (field, name) in enumerate(FIGURES):
            ax = axes[i][j]
            ax.set_title(f"{name}, {split or 'all'}: {HEADLINE} minus the better baseline", fontsize=9)
            ax.axhline(0, color="grey", linewidth=0.8)
            for budget in sorted({m.budget for m in found if m.figure == field}):
                points = [m for m in found if m.figure == field and m.budget == budget]
                xs = [tiers.index(m.dataset) for m in points]
                ys = [m.points for m in points]
                below = [m.points - 100 * m.interval.low for m in points]
                above = [100 * m.interval.high - m.points for m in points]
                ax.errorbar(
                    [x + 0.04 * (budget // 3000) for x in xs],
                    ys,
                    yerr=[below, above],
                    marker="o",
                    capsize=3,
                    alpha=0.85,
                    label=f"{budget:,} tokens",
                )
            ax.set_xticks(range(len(tiers)), [t.removeprefix("beam-").upper() for t in tiers])
            ax.set_xlabel("BEAM tier (session length)", fontsize=8)
            ax.set_ylabel("points", fontsize=8)
            ax.tick_params(labelsize=7)
            if any(m.figure == field for m in found):
                ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
