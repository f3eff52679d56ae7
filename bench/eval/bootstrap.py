"""Paired bootstrap intervals: how far apart two arms are on the same questions, and how sure that is.

Both arms answered the same questions, so the question is the unit: resample questions with
replacement, take the mean difference each time, and read the interval off the resampled means.
Seeded, so the same rows give the same interval every time the report is rebuilt.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RESAMPLES = 2000
SEED = 7
LEVEL = 0.95


@dataclass(frozen=True)
class PairedInterval:
    n: int  # questions both arms have a value for
    difference: float  # mean of a - b
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between the two nearest order statistics."""
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> PairedInterval | None:
    """The mean of a - b over paired values and its percentile bootstrap interval; None when empty."""
    if len(a) != len(b):
        raise ValueError(f"paired values differ in length: {len(a)} and {len(b)}")
    if not a:
        return None
    differences = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(differences)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    means = sorted(float(m) for m in differences[picks].mean(axis=1))
    tail = (1 - level) / 2
    return PairedInterval(n, float(differences.mean()), _quantile(means, tail), _quantile(means, 1 - tail))


def arm_intervals(
    rows: Iterable[dict[str, Any]], field: str, reference_arm: str, **options: Any
) -> list[dict[str, Any]]:
    """`reference_arm` against every other arm on `field`, per dataset and budget, over the questions
    both have a value for (`full` has no budget: it is paired at every budget, the same window each)."""
    values: dict[tuple[str, int | None], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        value = r.get(field)
        if value is not None:
            values[(r["dataset"], r["budget"])][r["arm"]][r["question_id"]] = float(value)
    out: list[dict[str, Any]] = []
    for (dataset, budget), arms in sorted(values.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        if budget is None or reference_arm not in arms:
            continue
        arms = dict(arms)
        if (full := values.get((dataset, None), {}).get("full")) is not None:
            arms["full"] = full
        mine = arms[reference_arm]
        for other in sorted(a for a in arms if a != reference_arm):
            shared = sorted(mine.keys() & arms[other].keys())
            interval = paired_bootstrap(
                [mine[q] for q in shared], [arms[other][q] for q in shared], **options
            )
            if interval is not None:
                out.append({"dataset": dataset, "budget": budget, "arm": other, "interval": interval})
    return out
