"""The runner and the CLI end to end on handmade files: rows, resume, sampling, cached ingestion, report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import psycopg
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
from bench.eval.tiers import MARGIN_PLOT, margins, tier_size
from memory.context.block import TierSettings
from memory.retrieval import SearchOptions

pytestmark = pytest.mark.bench


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
    split = {"tune": ["conv-test"], "holdout": ["beam-100k-1"]}
    cfg = config(tmp_path, db_url, sample=1, arms=("beads", "tail"), split=split)
    Evaluation(cfg).run()
    rows = read_rows(cfg.out_dir / ROWS_FILE)
    assert {(r["dataset"], r["split"]) for r in rows} == {("locomo", "tune"), ("beam-100k", "holdout")}
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
    path.write_text(json.dumps({"description": "all tuning", "tune": ["conv-test", "beam-100k-1"]}))
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
            {
                "dataset": "locomo",
                "arm": "beads",
                "budget": 1200,
                "question_id": q,
                "hit_any": hit,
                "window": [f"{q}@1", "found@2" if hit else "missed@2"],
            }
            for q, hit in found.items()
        ]

    left = rows({"q1": True, "q2": True, "q3": False, "q4": False})
    right = rows({"q1": True, "q2": False, "q3": True, "q4": False, "q5": True})  # q5: only one ran it
    right[0]["window"].reverse()  # q1: the same lines, read in another order
    table = paired_table(left, right, ("a", "b"))
    # q4 got the same window in both runs, q1 and q4 the same lines
    assert table[2] == "| locomo (4) | beads | 1,200 | 50.0% | 50.0% | +0.0 | 1 / 1 | 1 of 4 | 2 |"
    for name, data in (("a", left), ("b", right)):
        (tmp_path / name).mkdir()
        write_snapshot(tmp_path / name / ROWS_SNAPSHOT, data)
    console = Console(record=True, width=200)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")], console=console) == 0
    assert (
        "| locomo (4) | beads | 1,200 | 50.0% | 50.0% | +0.0 | 1 / 1 | 1 of 4 | 2 |" in console.export_text()
    )
    assert (
        main(["compare", str(tmp_path / "a"), str(tmp_path / "missing")], console=Console(record=True)) == 2
    )


def test_tiers_are_read_side_by_side_under_ids_that_say_the_tier(tmp_path: Path, db_url: str) -> None:
    """Chat 1 of 100K and chat 1 of 500K in one database: two memory sessions, rows that never mix,
    and the summary's margin of beads over the better whole-turn arm per tier."""
    source = write_beam(tmp_path / "source")
    folders = []
    for tier in ("100K", "500K"):
        shutil.copytree(source, tmp_path / "beam" / tier)
        folders.append(tmp_path / "beam" / tier)
    split = {"tune": ["beam-100k-1"], "holdout": ["beam-500k-1"]}
    cfg = config(
        tmp_path,
        db_url,
        datasets=[("beam", folder) for folder in folders],
        arms=("beads", "docstore", "bm25"),
        budgets=(200,),
        split=split,
    )
    records = Evaluation(cfg).run()
    assert [r.name for r in records] == ["beam-100k", "beam-500k"]
    rows = read_rows(cfg.out_dir / ROWS_FILE)
    assert {(r["dataset"], r["conversation_id"], r["split"]) for r in rows} == {
        ("beam-100k", "beam-100k-1", "tune"),
        ("beam-500k", "beam-500k-1", "holdout"),
    }
    assert len(rows) == 2 * BEAM_QUESTIONS * 3
    with psycopg.connect(db_url) as conn:
        sessions = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT session_id FROM beads.facts WHERE session_id LIKE 'beam-%'"
            )
        }
    assert sessions == {"beam-100k-1", "beam-500k-1"}

    # the same chat under two tiers: windows of the same turns, question for question (each session's
    # facts have ids of their own)
    def turns(row: dict[str, Any]) -> tuple[tuple[str, str], list[str]]:
        return (row["question_id"].split(":", 1)[1], row["arm"]), [i.split("@")[0] for i in row["window"]]

    windows = dict(turns(r) for r in rows if r["dataset"] == "beam-100k")
    longer = [turns(r) for r in rows if r["dataset"] == "beam-500k"]
    assert longer and all(windows[key] == window for key, window in longer)
    _, _, markdown = write_report(cfg.out_dir, rows)
    assert "## BEAM's tiers: the margin over the better whole-turn baseline" in markdown
    table = markdown.split("## BEAM's tiers", 1)[1].split("\n## ", 1)[0]
    assert "| tune | beam-100k (7) | 200 |" in table and "| holdout | beam-500k (7) | 200 |" in table
    assert (cfg.out_dir / MARGIN_PLOT).read_bytes()[:4] == b"\x89PNG"


def test_rows_of_the_first_harness_are_read_as_the_100k_tier(tmp_path: Path) -> None:
    old = {"dataset": "beam", "conversation_id": "beam-12", "question_id": "beam-12:knowledge_update:1"}
    rows = [
        {**old, "arm": "beads", "budget": 1200, "harness": "1"},
        {**old, "dataset": "locomo", "conversation_id": "conv-26", "arm": "tail", "budget": 1200},
        {**old, "arm": "tail", "budget": 1200, "harness": "2"},  # this harness, no tier named: as it is
    ]
    path = tmp_path / ROWS_FILE
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    legacy, locomo, current = read_rows(path)
    assert (legacy["dataset"], legacy["conversation_id"], legacy["question_id"]) == (
        "beam-100k",
        "beam-100k-12",
        "beam-100k-12:knowledge_update:1",
    )
    assert locomo["dataset"] == "locomo" and current["conversation_id"] == "beam-12"


def test_margins_pick_the_better_baseline_per_tier_budget_and_figure() -> None:
    def row(dataset: str, arm: str, q: str, words: float, hit: bool) -> dict[str, Any]:
        return {
            "dataset": dataset,
            "arm": arm,
            "budget": 1200,
            "question_id": q,
            "answer_words": words,
            "hit_any": hit,
            "split": "holdout",
        }

    rows = []
    for q, (ours, store, bm25) in enumerate(
        [(1.0, 0.5, 0.0), (1.0, 0.5, 1.0), (0.5, 0.5, 0.0), (1.0, 0.0, 0.0)]
    ):
        for dataset in ("beam-1m", "beam-500k"):
            rows += [
                row(dataset, "beads", f"q{q}", ours, True),
                row(dataset, "docstore", f"q{q}", store, q < 2),
                row(dataset, "bm25", f"q{q}", bm25, q < 3),
                row(dataset, "tail", f"q{q}", 1.0, True),
            ]
    found = margins(rows, "holdout")
    assert [(m.dataset, m.figure) for m in found] == [
        ("beam-500k", "answer_words"),
        ("beam-500k", "hit_any"),
        ("beam-1m", "answer_words"),
        ("beam-1m", "hit_any"),
    ]  # tiers in order of length; tail is no baseline
    words, recall = found[0], found[1]
    assert (words.baseline, round(words.points, 1)) == ("docstore", 50.0)  # 0.875 against 0.375
    assert (recall.baseline, round(recall.points, 1)) == ("bm25", 25.0)  # 1.0 against 0.75
    assert words.interval.n == 4 and words.interval.excludes_zero
    assert tier_size("beam-1m") == 1_000_000 and tier_size("locomo") is None and tier_size("beam") is None
