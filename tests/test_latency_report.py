"""The latency bench's median over several runs takes each figure's median across the runs, and its ratio
against the faster of PostgresStore's two setups at each percentile (bench.report)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.report import median_table

pytestmark = pytest.mark.bench


def run(ours: float, prepared: float, unprepared: float, capture: float, load: str) -> dict[str, Any]:
    def pct(p50: float) -> dict[str, float]:
        return {"p50": p50, "p95": 2 * p50}

    return {
        "sizes": [
            {
                "size": 10_000,
                "loadavg": [load],
                "search": {"ours": pct(ours), "theirs": pct(prepared), "theirs_unprepared": pct(unprepared)},
                "writes": {
                    "capture_message": {"p95": capture},
                    "capture_message_no_auto_supersede": {"p95": capture / 2},
                    "supersede": {"p95": 3.0},
                    "checks": {"checks_ms": pct(0.5)},
                },
            }
        ]
    }


def test_the_median_of_runs_against_the_faster_setup() -> None:
    table = median_table(
        [run(6.0, 5.0, 4.0, 9.0, "0.5"), run(8.0, 4.0, 6.0, 30.0, "1.0"), run(5.0, 5.0, 5.0, 6.0, "0.7")]
    )
    row = next(line for line in table.splitlines() if line.startswith("| 10,000"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "3" and cells[2] == "0.5, 1.0, 0.7"
    assert cells[3] == "6.00 / 12.00"  # ours: the median of 6, 8 and 5
    assert cells[4] == "4.00 / 8.00"  # the faster setup of each run: 4, 4, 5
    assert cells[5] == "1.50"  # ratios 1.5, 2.0, 1.0, each against that run's faster setup
    assert cells[7] == "9.00 / 4.50"  # capture p95, one outlier run of 30 ms left out by the median
