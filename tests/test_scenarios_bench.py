"""The scenario harness on the scripted model: every arm through both scenarios on real Postgres,
rows as they finish, the blinded judge, the report and a resumed run. What is asserted is the
plumbing (which lane ran, what was read off it, what the judge saw), never a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from bench.scenarios.__main__ import main as scenarios_main
from bench.scenarios.arms import ARMS
from bench.scenarios.checks import answered, final_checks, first_named, names_value
from bench.scenarios.harness import Options, complete_cells, model_spec, read_rows, run_all
from bench.scenarios.judge import CONTROLS, DIMENSIONS, blind, judge_model, parse_grades, shuffled, transcript
from bench.scenarios.report import Prediction, build_table, judge_prediction, read_predictions, summary
from bench.scenarios.runner import summarise_events
from bench.scenarios.script import INCIDENT, SCENARIOS, VECDB
from memory.scripted import calls, tool_call
from playground.scripted import NOTHING

pytestmark = pytest.mark.bench


ROOT = Path(__file__).resolve().parents[1]
PREDICTIONS = ROOT / "results" / "scenarios" / "PREDICTIONS.md"


def test_a_lane_that_fails_part_way_keeps_the_calls_it_made() -> None:
    events = [
        {
            "lane": "stock",
            "kind": "usage",
            "payload": {"model_calls": 1, "input_tokens": 900, "output_tokens": 40},
        },
        {"lane": "stock", "kind": "tool_call", "payload": {"name": "manage_memory"}},
        {
            "lane": "stock",
            "kind": "usage",
            "payload": {"model_calls": 2, "input_tokens": 2000, "output_tokens": 70},
        },
        {"lane": "stock", "kind": "error", "payload": {"message": "ValueError: no id"}},
        {"lane": "turn", "kind": "turn_done", "payload": {}},
    ]
    lane = summarise_events(events, "stock")
    assert (lane["status"], lane["model_calls"], lane["input_tokens"], lane["output_tokens"]) == (
        "error",
        2,
        2000,
        70,
    )
    assert lane["tool_calls"] == ["manage_memory"] and lane["other_lane_events"] == 0


def test_models_are_named_as_the_playground_names_them() -> None:
    assert [model_spec(m) for m in ("local", "scripted", "ollama:qwen3:8b", "openai:gpt-4o")] == [
        "offline",
        "scripted",
        "ollama:qwen3:8b",
        "openai:gpt-4o",
    ]
    for wrong in ("ollama:", "gpt-4", "auto"):
        with pytest.raises(ValueError):
            model_spec(wrong)
    with pytest.raises(ValueError):
        judge_model("gpt-4")


def test_a_value_counts_only_where_its_digits_stand_alone() -> None:
    assert names_value("Within $200 per month.", "200")
    assert names_value("a budget of 200/month", "200")
    assert not names_value("timed out after 2000 ms", "200")
    assert not names_value("version 1.200 of it", "200")
    assert names_value("the deploy at 14:02 UTC", "14:02")
    assert not names_value("at 14:02:30", "14:02")
    assert names_value("the Invoice-Export job", "invoice-export")


def test_a_choice_is_the_first_option_named_but_not_the_users_own_list_repeated() -> None:
    assert first_named("Go with Qdrant; Weaviate is over budget.", VECDB.choices) == "qdrant"
    assert first_named("nothing named", VECDB.choices) is None
    echoed = final_checks(VECDB, "You asked about Qdrant, Weaviate and Pinecone. Weaviate is best.")
    assert echoed["picks_stale"] and not echoed["picks_fitting"]
    gold = final_checks(VECDB, VECDB.steps[-1].gold)
    assert gold["picks_fitting"] and gold["current_not_stale"] and gold["names_finding"]
    stale = final_checks(VECDB, VECDB.steps[-1].stale)
    assert stale["picks_stale"] and stale["names_stale"] and not stale["current_not_stale"]
    incident = final_checks(INCIDENT, INCIDENT.steps[-1].gold)
    assert incident["current_not_stale"] and incident["names_finding"] and "picks_fitting" not in incident
    assert not answered("") and not answered('{"name": "x"}') and answered("The job holds them.")


def test_the_judge_sees_no_lane_names_and_a_seeded_shuffle() -> None:
    replies = ["stock: saved with manage_memory", "Beads said so", "ok", "Noted."]
    shown = transcript(VECDB, replies)
    for word in ("stock", "Beads", "manage_memory"):
        assert word not in shown
    assert shown.count("Conversation") == 3
    assert blind("Per LangMem's search_memory, STOCK") == "Per [...]'s [...], [...]"
    subjects = [*ARMS, *CONTROLS]
    first = shuffled(subjects, "vecdb", 1, seed=7)
    assert [a.subject for a in first] == [a.subject for a in shuffled(subjects, "vecdb", 1, seed=7)]
    assert sorted(a.subject for a in first) == sorted(subjects)
    assert [a.label for a in first] == [f"Transcript {i}" for i in range(1, 7)]
    assert {tuple(a.subject for a in shuffled(subjects, "vecdb", run, seed=7)) for run in range(1, 6)} != {
        tuple(subjects)
    }


def test_grades_come_from_the_grade_call_or_from_the_text() -> None:
    call = calls(tool_call("grade", correctness=4, latest=2, grounding=5))
    assert parse_grades(call) == {"correctness": 4, "latest": 2, "grounding": 5}
    assert parse_grades(AIMessage('{"correctness": 3, "latest": 1}')) == {
        "correctness": 3,
        "latest": 1,
        "grounding": None,
    }
    assert (
        parse_grades(calls(tool_call("grade", correctness=9, latest="x", grounding=1)))["correctness"] is None
    )


def test_every_prediction_names_a_metric_the_report_computes() -> None:
    predictions = read_predictions(PREDICTIONS)
    assert len(predictions) >= 20
    known = {"latest_gap", "store_growth", "block_growth", "store_facts_final"}
    row = _step_row("ours", 1, 1, checks={})
    from bench.scenarios.report import cell_metrics

    known |= set(cell_metrics([row, row])) | {f"judge_{d}" for d in DIMENSIONS}
    from bench.scenarios.checks import CHECKS

    known |= set(CHECKS)
    for p in predictions:
        assert p.metric in known, p
        assert p.scenario in ("both", *SCENARIOS), p
        assert p.arm in ("all", "judge") or all(a.strip() in ARMS for a in p.arm.split(",")), p


def _step_row(arm: str, run: int, step: int, checks: dict[str, bool], **extra: Any) -> dict[str, Any]:
    return {
        "kind": "step",
        "scenario": "vecdb",
        "arm": arm,
        "lane": ARMS[arm].lane,
        "run": run,
        "cell": f"{arm}-{run}",
        "step": step,
        "steps": 2,
        "role": "final" if step == 2 else "state",
        "checks": checks,
        "input_tokens": 100,
        "output_tokens": 10,
        "model_calls": 1,
        "latency_ms": 1000,
        "status": "done",
        "injections": [{"facts": 2, "chars": 100, "tokens": 30}],
        "recall_chars": [],
        "store": {"facts": 2 * step, "chars": 50 * step, "supersedes": 0},
        "reply": "",
        **extra,
    }


def test_a_prediction_holds_or_misses_on_the_runs_rate_and_against_another_arm() -> None:
    rows = [
        _step_row(arm, run, step, {"names_current": value} if step == 2 else {})
        for arm, values in (("ours", (1, 1, 0)), ("stock", (0, 0, 0)))
        for run, value in enumerate(values, 1)
        for step in (1, 2)
    ]
    table = build_table(rows)
    at_least = Prediction("vecdb", "ours", "names_current", ">= 2/3", "")
    assert [o["held"] for o in judge_prediction(table, at_least, ["vecdb"], ["ours", "stock"])] == [True]
    none = Prediction("both", "stock", "names_current", "== 0/3", "")
    assert [o["held"] for o in judge_prediction(table, none, ["vecdb"], ["ours", "stock"])] == [True]
    above = Prediction("vecdb", "stock", "names_current", "> ours", "")
    assert [o["held"] for o in judge_prediction(table, above, ["vecdb"], ["ours", "stock"])] == [False]
    missing = Prediction("vecdb", "ours", "names_finding", ">= 1/3", "")
    assert [o["held"] for o in judge_prediction(table, missing, ["vecdb"], ["ours"])] == [None]


@pytest.mark.timeout(600)
async def test_the_harness_runs_every_arm_on_the_scripted_model_and_resumes(
    pg_server_url: str, tmp_path: Path
) -> None:
    said: list[str] = []
    options = Options(
        out=tmp_path,
        runs=1,
        model="scripted",
        judge_model="scripted",
        embedder="fake",
        server_url=pg_server_url,
    )
    rows = await run_all(options, say=said.append)
    assert rows == read_rows(tmp_path)  # every row was appended as it came
    steps = [r for r in rows if r["kind"] == "step"]
    assert len(steps) == sum(len(s.steps) for s in SCENARIOS.values()) * len(ARMS)
    assert all(r["status"] == "done" and r["model_calls"] >= 1 for r in steps), steps
    assert sum("turns" in line and "/ step" in line for line in said) == len(steps)  # progress per step

    cells = complete_cells(rows)
    assert len(cells) == len(SCENARIOS) * len(ARMS)
    for (name, arm, _run), cell in cells.items():
        scenario = SCENARIOS[name]
        lane = ARMS[arm].lane
        assert {r["lane"] for r in cell} == {lane} and not any(r["other_lane_events"] for r in cell)
        delegate, final = cell[scenario.delegate_index], cell[scenario.final_index]
        assert set(delegate["checks"]) == {"delegated", "looked_up"}
        assert "current_not_stale" in final["checks"] and "names_finding" in final["checks"]
        assert cell[-1]["store"]["facts"] >= 1
        if lane == "stock":  # the scripted stock model searches before answering a question
            assert "search_memory" in final["tool_calls"] and final["recall_chars"]
            assert not any(r["injections"] for r in cell)
        else:
            assert all(len(r["injections"]) >= 1 for r in cell)
            assert not any(r["recall_chars"] for r in cell)
    for name in SCENARIOS:  # nothing injected: the scripted model has nothing to answer from
        assert cells[(name, "ours-no-injection", 1)][-1]["reply"] == NOTHING
        assert all(i["facts"] == 0 for r in cells[(name, "ours-no-injection", 1)] for i in r["injections"])
        assert max(i["facts"] for i in cells[(name, "ours", 1)][-1]["injections"]) >= 1
        assert any(i["texts"] for i in cells[(name, "ours", 1)][-1]["injections"])
        assert cells[(name, "ours", 1)][-1]["settings"]["auto_supersede"] is True
        assert cells[(name, "ours-no-supersede", 1)][-1]["settings"]["auto_supersede"] is False
        assert cells[(name, "ours-no-supersede", 1)][-1]["store"]["supersedes"] == 0

    judged = [r for r in rows if r["kind"] == "judge"]
    assert len(judged) == len(SCENARIOS) * (len(ARMS) + len(CONTROLS))
    for name in SCENARIOS:
        mine = sorted((r for r in judged if r["scenario"] == name), key=lambda r: r["order"])
        assert sorted(r["subject"] for r in mine) == sorted([*ARMS, *CONTROLS])
        assert [r["label"] for r in mine] == [f"Transcript {i}" for i in range(1, 7)]
        assert all(r[d] in (1, 4) for r in mine for d in DIMENSIONS)

    text = summary(rows, PREDICTIONS)
    assert "`python -m bench.scenarios --runs 1 --model scripted --judge-model scripted" in text
    for name, scenario in SCENARIOS.items():
        assert scenario.title in text and f"### `{name}`" in text
    assert "## Predictions beside the outcomes" in text and "control-stale" in text

    again = await run_all(options, say=said.append)  # everything is complete: nothing runs again
    assert [r for r in again if r["kind"] in ("step", "judge")] == [
        r for r in rows if r["kind"] in ("step", "judge")
    ]
    assert any(line.startswith("0 cells, 0 turns to run (8 cells already done)") for line in said)

    assert scenarios_main(["--report-only", "--out", str(tmp_path), "--predictions", str(PREDICTIONS)]) == 0
    written = (tmp_path / "summary.md").read_text()
    assert written.startswith("# Multi-turn scenarios")
    (tmp_path / "rows.jsonl").unlink()  # a fresh clone has only the committed snapshot
    assert read_rows(tmp_path) == again
    assert scenarios_main(["--report-only", "--out", str(tmp_path), "--predictions", str(PREDICTIONS)]) == 0
    assert (tmp_path / "summary.md").read_text() == written
