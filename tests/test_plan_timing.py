"""bench.plan_timing runs the harness with the middleware's plan and the reading order timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_samples import write_locomo

from bench import plan_timing
from memory.context import recall
from memory.doors import middleware


def test_it_runs_the_harness_and_prints_what_each_call_took(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # it times by replacing the two functions: leave them as they were for the other tests
    monkeypatch.setattr(middleware, "plan_call", middleware.plan_call)
    monkeypatch.setattr(recall, "later_first", recall.later_first)
    monkeypatch.setattr(recall, "newest_first", recall.newest_first)
    argv = ["run", "--locomo", str(write_locomo(tmp_path)), "--out", str(tmp_path / "out"), "--arms", "beads"]
    argv += ["--budgets", "300", "--sample", "1", "--embedder", "fake-64"]
    argv += ["--database-url", db_url, "--exact-database", "--no-progress"]
    assert plan_timing.main(argv) == 0
    printed = capsys.readouterr().out
    assert "plan_call: " in printed and "later_first: " in printed and "ms a call" in printed
