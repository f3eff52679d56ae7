"""The audit of automatic edges: precision per rule from the verdicts, and edges from written chats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.edge_audit import main, written_edges

pytestmark = pytest.mark.bench


def test_the_report_counts_each_rule_and_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = tmp_path / "verdicts.jsonl"
    rows = [
        {"dataset": "beam", "rule": "strong cue, long messages", "verdict": "wrong"},
        {"dataset": "beam", "rule": "strong cue, long messages", "verdict": "right"},
        {"dataset": "written:a", "rule": "strong cue, short messages", "verdict": "right"},
        {"dataset": "written:a", "rule": "strong cue, short messages", "verdict": "?"},  # not read: left out
    ]
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", "--verdicts", str(verdicts)]) == 0
    table = capsys.readouterr().out
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
