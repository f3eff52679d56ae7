"""The embedder-memory bench's figures, on a few short texts in two settings."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.embedder_memory import compare, parse_setting

pytestmark = pytest.mark.bench


def test_each_setting_runs_in_its_own_process_and_gives_the_same_vectors() -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the peak from /proc")
    texts = [f"claim {n}: the budget is {n}00 dollars a month" for n in range(5)]
    runs = compare(texts, ["4:pattern", "2:no-pattern"], rounds=2)
    assert set(runs) == {"4:pattern", "2:no-pattern"} and all(len(r) == 2 for r in runs.values())
    digests = {r["vectors"] for rs in runs.values() for r in rs}
    assert len(digests) == 1  # the batch and the pattern do not change a vector
    assert all(r["seconds"] > 0 and r["growth_mb"] >= 0 for rs in runs.values() for r in rs)


def test_a_setting_names_a_batch_size_and_the_pattern() -> None:
    assert parse_setting("16:no-pattern") == (16, False)
    assert parse_setting("32:pattern") == (32, True)
    for bad in ("16", "0:pattern", "x:pattern", "16:arena"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_setting(bad)
