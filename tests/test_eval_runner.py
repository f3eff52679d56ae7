"""The runner and the CLI end to end on handmade files: rows, resume, sampling, cached ingestion, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eval_samples import write_beam, write_locomo
from rich.console import Console

from bench.eval.arms import DEFAULT_ARMS
from bench.eval.cli import main
from bench.eval.report import PLOT_FILE, SUMMARY_FILE, paired_table, write_report
from bench.eval.runner import (
    ROWS_FILE,
    ROWS_SNAPSHOT,
    Evaluation,
    RunConfig,
    changed_options,
    read_rows,
    write_run_info,
    write_snapshot,
)
from memory.block import TierSettings
from memory.retrieval import SearchOptions

LOCOMO_QUESTIONS, BEAM_QUESTIONS = 8, 7
ROWS_PER_QUESTION = 6 * 2 + 1  # six budgeted arms at two budgets, and full once


def config(tmp_path: Path, db_url: str, **overrides: Any) -> RunConfig:
    settings: dict[str, Any] = {
        "datasets": [("locomo", write_locomo(tmp_path)), ("beam", write_beam(tmp_path))],
        "out_dir": tmp_path / "out",
        "budgets": (60, 200),
        "embedder": "fake-64",
        "database_url": db_url,
        "exact_database": True,
        "show_progress": False,
    }
    settings.update(overrides)
    return RunConfig(**settings)


def test_a_run_writes_one_row_per_question_arm_and_budget(tmp_path: Path, db_url: str) -> None:
    records = Evaluation(config(tmp_path, db_url)).run()
    rows = read_rows(tmp_path / "out" / ROWS_FILE)
    assert len(rows) == (LOCOMO_QUESTIONS + BEAM_QUESTIONS) * ROWS_PER_QUESTION
    assert [r.rows_written for r in records] == [
        LOCOMO_QUESTIONS * ROWS_PER_QUESTION,
        BEAM_QUESTIONS * ROWS_PER_QUESTION,
    ]
    assert records[0].issues["evidence unresolved: malformed"] == 1
    assert {r["arm"] for r in rows} == set(DEFAULT_ARMS)
    for row in rows:
        assert row["budget"] is None if row["arm"] == "full" else row["tokens"] <= row["budget"]
    ku = next(
        r for r in rows if r["type"] == "knowledge_update" and r["arm"] == "facts" and r["budget"] == 200
    )
    assert ku["stale_ids"] == ["2"] and ku["current_ids"] == ["20"] and "ku_current_above_stale" in ku
    ranked = [r for r in rows if r["arm"] == "facts" and r["budget"] == 200]
    # facts are recorded as "<turn id>@<short fact id>", transcript turns as bare ids
    assert any("@" in item and len(item.split("@")[1]) == 8 for r in ranked for item in r["window"])
    assert all(any("@" not in item for item in r["window"]) for r in ranked)
    full = next(r for r in rows if r["arm"] == "full")
    assert full["window"] == "all" and full["hit_any"] in (True, None)


def test_runs_resume_and_reuse_the_ingestion(tmp_path: Path, db_url: str) -> None:
    cfg = config(tmp_path, db_url)
    Evaluation(cfg).run()
    rows_path = tmp_path / "out" / ROWS_FILE
    complete = {(r["question_id"], r["arm"], r["budget"]): r["tokens"] for r in read_rows(rows_path)}
    assert [r.rows_written for r in Evaluation(cfg).run()] == [0, 0]

    # an interrupted run: the last rows are missing and the last line is torn
    lines = rows_path.read_text(encoding="utf-8").splitlines(keepends=True)
    rows_path.write_text("".join(lines[:50]) + '{"dataset": "loc', encoding="utf-8")
    records = Evaluation(cfg).run()
    assert sum(r.rows_written for r in records) == len(complete) - 50
    again = {(r["question_id"], r["arm"], r["budget"]): r["tokens"] for r in read_rows(rows_path)}
    assert again == complete
    # conversations already ingested are not written again
    assert all(stats["cached"] for record in records for stats in record.ingest)


def test_sampling_and_limits(tmp_path: Path, db_url: str) -> None:
    records = Evaluation(config(tmp_path, db_url, sample=1, arms=("tail",))).run()
    # one question per type: 5 LoCoMo categories, 6 BEAM abilities
    assert [r.questions_selected for r in records] == [5, 6]
    records = Evaluation(config(tmp_path, db_url, sample=1, limit=2, out_dir=tmp_path / "limited")).run()
    assert [r.questions_selected for r in records] == [2, 2]


def test_report_files_and_the_no_model_notice(tmp_path: Path, db_url: str) -> None:
    cfg = config(tmp_path, db_url, sample=1)
    records = Evaluation(cfg).run()
    write_run_info(cfg.out_dir, cfg, records, 1.0)
    summary, plot, markdown = write_report(cfg.out_dir, read_rows(cfg.out_dir / ROWS_FILE))
    assert summary.name == SUMMARY_FILE and plot.name == PLOT_FILE
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "No answer model was configured" in markdown
    assert "evidence unresolved: malformed | 1" in markdown
    info = json.loads((cfg.out_dir / "run-info.json").read_text())
    assert info["runs"][-1]["datasets"][0]["name"] == "locomo"


def test_cli_run_and_report(tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "cli-out"
    console = Console(record=True, width=200)
    argv = [
        "run",
        "--locomo",
        str(write_locomo(tmp_path)),
        "--out",
        str(out),
        "--budgets",
        "80",
        "--sample",
        "1",
        "--embedder",
        "fake-64",
        "--database-url",
        db_url,
        "--exact-database",
        "--no-progress",
    ]
    assert main(argv, console=console) == 0
    text = console.export_text()
    assert "Headline" in text and "No answer model configured" in text
    assert (out / ROWS_FILE).exists() and (out / SUMMARY_FILE).exists() and (out / PLOT_FILE).exists()
    # the compressed snapshot holds the same rows, and the report can be rebuilt from it alone
    rows = read_rows(out / ROWS_FILE)
    canonical = [json.dumps(r, sort_keys=True) for r in rows]
    assert sorted(json.dumps(r, sort_keys=True) for r in read_rows(out / ROWS_SNAPSHOT)) == sorted(canonical)
    summary = (out / SUMMARY_FILE).read_text()
    (out / ROWS_FILE).unlink()
    assert main(["report", "--out", str(out)], console=Console(record=True)) == 0
    assert (out / SUMMARY_FILE).read_text() == summary
    errors = Console(record=True, width=200)
    assert main(["run", "--out", str(out)], console=errors) == 2
    assert "name at least one dataset" in errors.export_text()
    assert main([*argv, "--judge-model", "ollama:x"], console=errors) == 2
    assert "name the reader with --answer-model" in errors.export_text()


def test_a_split_tags_the_rows_and_the_headline_reports_each_split(tmp_path: Path, db_url: str) -> None:
    split = {"tune": ["conv-test"], "holdout": ["beam-1"]}
    cfg = config(tmp_path, db_url, sample=1, arms=("beads", "tail"), split=split)
    Evaluation(cfg).run()
    rows = read_rows(cfg.out_dir / ROWS_FILE)
    assert {(r["dataset"], r["split"]) for r in rows} == {("locomo", "tune"), ("beam", "holdout")}
    _, _, markdown = write_report(cfg.out_dir, rows)
    headline = markdown.split("## Headline", 1)[1].split("\n## ", 1)[0]
    assert "recall, tune (n)" in headline and "recall, holdout (n)" in headline
    assert headline.index("recall, tune") < headline.index("recall, holdout")
    # one row per dataset, budget and arm, the middleware's own arm first and marked
    body = [line for line in headline.splitlines() if line.startswith("| locomo | 60 |")]
    assert body[0].startswith("| locomo | 60 | **beads** |") and len(body) == 2
    cells = body[0].split(" | ")
    assert cells[3] != "–" and cells[4] == "–"  # a LoCoMo figure for tune, none for holdout

    # only one split evaluated
    only = config(tmp_path, db_url, sample=1, arms=("tail",), split=split, only_split="holdout")
    only.out_dir = tmp_path / "holdout-only"
    records = Evaluation(only).run()
    assert [r.questions_selected for r in records] == [0, 6]

    # the report can retag rows by another split file
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"description": "all tuning", "tune": ["conv-test", "beam-1"]}))
    assert (
        main(["report", "--out", str(cfg.out_dir), "--split", str(path)], console=Console(record=True)) == 0
    )
    summary = (cfg.out_dir / SUMMARY_FILE).read_text()
    assert "recall, tune (n)" in summary and "recall, holdout" not in summary
    path.write_text(json.dumps({"tune": ["conv-test"], "holdout": ["conv-test"]}))
    errors = Console(record=True, width=200)
    assert main(["report", "--out", str(cfg.out_dir), "--split", str(path)], console=errors) == 2
    assert "in both tune and holdout" in errors.export_text()


def test_search_options_changed_from_text() -> None:
    changed = changed_options(SearchOptions(), "per_message=3,keyword=False,rrf_k=10")
    assert (changed.per_message, changed.keyword, changed.rrf_k) == (3, False, 10.0)
    assert changed_options(changed, "per_message=None").per_message is None
    # an option set to None reads a number back
    assert changed_options(changed_options(changed, "per_message=None"), "per_message=2").per_message == 2
    with pytest.raises(ValueError, match="unknown SearchOptions option"):
        changed_options(SearchOptions(), "nonsense=1")
    # the block's settings too, their simple fields only
    tier = changed_options(TierSettings(), "merge_claims=False,line_tokens=20")
    assert (tier.merge_claims, tier.line_tokens) == (False, 20)
    with pytest.raises(ValueError, match="unknown TierSettings option 'style'"):
        changed_options(TierSettings(), "style=x")


def test_compare_pairs_two_runs_question_by_question(tmp_path: Path) -> None:
    def rows(found: dict[str, bool]) -> list[dict[str, Any]]:
        return [
            {"dataset": "locomo", "arm": "beads", "budget": 1200, "question_id": q, "hit_any": hit}
            for q, hit in found.items()
        ]

    left = rows({"q1": True, "q2": True, "q3": False, "q4": False})
    right = rows({"q1": True, "q2": False, "q3": True, "q4": True, "q5": True})  # q5: only one ran it
    table = paired_table(left, right, ("a", "b"))
    assert table[2] == "| locomo (4) | beads | 1,200 | 50.0% | 75.0% | +25.0 | 1 / 2 |"
    for name, data in (("a", left), ("b", right)):
        (tmp_path / name).mkdir()
        write_snapshot(tmp_path / name / ROWS_SNAPSHOT, data)
    console = Console(record=True, width=200)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")], console=console) == 0
    assert "| locomo (4) | beads | 1,200 | 50.0% | 75.0% | +25.0 | 1 / 2 |" in console.export_text()
    assert (
        main(["compare", str(tmp_path / "a"), str(tmp_path / "missing")], console=Console(record=True)) == 2
    )
