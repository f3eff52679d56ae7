"""The audit of automatic edges: precision per rule from the verdicts, and edges from written chats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_samples import write_beam

from bench.edge_audit import main, written_edges

pytestmark = pytest.mark.bench


def _report(tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[dict[str, str]]) -> str:
    """The report's table for verdicts `rows`."""
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", "--verdicts", str(verdicts)]) == 0
    return capsys.readouterr().out


def test_the_report_counts_each_rule_and_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"dataset": "beam", "rule": "strong cue, long messages", "verdict": "wrong"},
        {"dataset": "beam", "rule": "strong cue, long messages", "verdict": "right"},
        {"dataset": "written:a", "rule": "strong cue, short messages", "verdict": "right"},
        {"dataset": "written:a", "rule": "strong cue, short messages", "verdict": "?"},  # not read: left out
    ]
    table = _report(tmp_path, capsys, rows)
    assert "| strong cue, long messages | 2 | 1 | 1 | 0.50 | proposes |" in table
    assert "| strong cue, short messages | 1 | 1 | 0 | 1.00 | yes |" in table
    assert "| all | 3 | 2 | 1 | 0.67 | – |" in table


def test_written_chats_are_captured_afresh_and_their_edges_named(pg_server_url: str, tmp_path: Path) -> None:
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        json.dumps({"id": "c1", "messages": ["Our standup is at 9:30.", "The standup moved to 10:45."]})
        + "\n"
    )
    [edge] = written_edges(pg_server_url, [chats])
    assert edge["dataset"] == "written:chats" and edge["rule"] == "strong cue, short messages"
    assert "9:30" in edge["old_body"] and "10:45" in edge["new_body"]


def test_the_report_of_ranking_pairs_says_which_are_at_the_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"dataset": "beam", "rule": "ranking pair, long messages", "verdict": "wrong"},
        {"dataset": "beam", "rule": "ranking pair, short messages", "verdict": "right"},
    ]
    table = _report(tmp_path, capsys, rows)
    assert "at the bar (>= 0.9)" in table
    assert "| ranking pair, long messages | 1 | 0 | 1 | 0.00 | no |" in table
    assert "| ranking pair, short messages | 1 | 1 | 0 | 1.00 | yes |" in table


def test_ranking_pairs_are_read_from_the_harness_blocks(
    pg_server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.eval.cli import main as harness

    beam = write_beam(tmp_path)
    common = ["--embedder", "fake-64", "--database-url", pg_server_url]
    argv = ["run", "--beam", str(beam), "--arms", "beads", "--budgets", "1200", "--no-progress"]
    assert harness([*argv, "--out", str(tmp_path / "out"), *common]) == 0
    capsys.readouterr()
    assert main(["pairs", "--beam", str(beam), *common]) == 0
    out = capsys.readouterr().out
    header, *pairs = [line for line in out.splitlines() if not line.startswith("#   ")]
    assert header.startswith("# ") and " pairs" in header
    for line in pairs:
        pair = json.loads(line)
        assert pair["rule"] in ("ranking pair, short messages", "ranking pair, long messages")
        assert pair["verdict"] == "?" and pair["session"].startswith("beam-")
