"""The whole run: every cell in an interleaved order, the judge after each scenario's run, rows
appended as they finish, progress printed, and the summary rebuilt at the end.

Cells run run by run, and within a run scenario by scenario with the four arms one after another,
so that a machine that gets busier part-way through weighs on every arm alike. A row is appended to
`rows.jsonl` the moment its step is done; a run that is cut off keeps them, and the next invocation
skips every cell that has all its steps and reruns the others from the start (a half-done cell's
rows stay in the file and the report leaves them out). The judge grades a scenario's run once all
its arms are done.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from bench.scenarios.arms import ARMS
from bench.scenarios.judge import CONTROLS, control_replies, grade, judge_model, judge_prompt, shuffled
from bench.scenarios.runner import drop_database, make_template, run_cell
from bench.scenarios.script import SCENARIOS, Scenario

ROWS = "rows.jsonl"
#: the committed copy of the rows (`rows.jsonl`, the working file, is ignored under results/)
SNAPSHOT = "rows.jsonl.gz"
Printer = Callable[[str], None]


@dataclass
class Options:
    out: Path
    runs: int = 3
    scenarios: Sequence[str] = tuple(SCENARIOS)
    arms: Sequence[str] = tuple(ARMS)
    #: a model spec (memory.model_spec): local / offline, scripted, ollama:<name>, openai:<name>, ...
    model: str = "local"
    #: as `model`; None: no judge
    judge_model: str | None = "local"
    embedder: str = "minilm"
    seed: int = 7
    #: a Postgres server to create the databases on; None: an embedded one in a temporary directory
    server_url: str | None = field(default=None, repr=False)


def model_spec(spec: str) -> str:
    """The playground's model setting (PLAYGROUND_MODEL) for a `--model` value: a model spec, with
    `local` read as `offline`; a ValueError for anything else (`auto` too: a run names its model)."""
    from memory.errors import ConfigurationError
    from memory.model_spec import parse_model_spec

    try:
        parsed = parse_model_spec(spec)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from exc
    if parsed.provider == "auto":
        raise ValueError("a run names its model: auto depends on what answers on this machine")
    return str(parsed)


def read_rows(out: Path) -> list[dict[str, Any]]:
    """The working file's rows, else the committed snapshot's (a fresh clone has only that)."""
    path, snapshot = out / ROWS, out / SNAPSHOT
    if path.exists():
        text = path.read_text()
    elif snapshot.exists():
        text = gzip.decompress(snapshot.read_bytes()).decode()
    else:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write_snapshot(out: Path) -> None:
    """rows.jsonl.gz from rows.jsonl, byte for byte the same for the same rows (no timestamp)."""
    path = out / ROWS
    if path.exists():
        (out / SNAPSHOT).write_bytes(gzip.compress(path.read_bytes(), mtime=0))


def append_row(out: Path, row: dict[str, Any]) -> None:
    with (out / ROWS).open("a") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")


def complete_cells(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """(scenario, arm, run) -> the step rows of its last cell that has every step."""
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("kind") == "step":
            by_cell.setdefault(row["cell"], []).append(row)
    done: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for steps in by_cell.values():
        if len({s["step"] for s in steps}) == steps[0]["steps"]:
            done[(steps[0]["scenario"], steps[0]["arm"], steps[0]["run"])] = sorted(
                steps, key=lambda s: s["step"]
            )
    return done


def judged(rows: Sequence[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(r["scenario"], r["run"]) for r in rows if r.get("kind") == "judge"}


class Progress:
    """One line per finished step: where the run is, how long the step took, what it found."""

    def __init__(self, turns: int, say: Printer) -> None:
        self.turns, self.done, self.say = turns, 0, say
        self.started = time.monotonic()

    def step(self, row: dict[str, Any]) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.turns - self.done)
        passed = [name for name, value in row["checks"].items() if value]
        failed = [name for name, value in row["checks"].items() if not value]
        found = (f"; yes: {', '.join(passed)}" if passed else "") + (
            f"; no: {', '.join(failed)}" if failed else ""
        )
        self.say(
            f"[{self.done}/{self.turns} turns, {_clock(elapsed)} in, ~{_clock(left)} left] "
            f"{row['scenario']} / {row['arm']} / run {row['run']} / step {row['step']}/{row['steps']}: "
            f"{row['status']}, {row['wall_s']:.0f} s, {row['model_calls']} calls, "
            f"{row['input_tokens']:,} in / {row['output_tokens']:,} out tokens{found}"
        )


def _clock(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{int(seconds % 60):02d}s"


def judge_run(
    model: BaseChatModel,
    spec: str,
    scenario: Scenario,
    run: int,
    cells: dict[str, list[dict[str, Any]]],
    seed: int,
    sink: Callable[[dict[str, Any]], None],
    say: Printer,
) -> None:
    """Grade the arms' transcripts of one scenario's run and the two controls, blinded and shuffled."""
    for assignment in shuffled([*sorted(cells), *CONTROLS], scenario.name, run, seed):
        subject = assignment.subject
        replies = (
            [row["reply"] for row in cells[subject]]
            if subject in cells
            else control_replies(scenario, subject)
        )
        started = time.monotonic()
        grades, said = grade(model, judge_prompt(scenario, replies, assignment.label))
        row = {
            "kind": "judge",
            "scenario": scenario.name,
            "run": run,
            "order": assignment.order,
            "label": assignment.label,
            "subject": subject,
            **grades,
            "said": said,
            "judge_model": spec,
            "seconds": round(time.monotonic() - started, 2),
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        sink(row)
        say(f"  judge {scenario.name} run {run}: {assignment.label} graded {grades} ({row['seconds']:.0f} s)")


async def run_all(options: Options, say: Printer = print) -> list[dict[str, Any]]:
    """Run every cell not yet complete in `options.out`, judge what is ready; returns every row."""
    options.out.mkdir(parents=True, exist_ok=True)
    backend = model_spec(options.model)
    rows = read_rows(options.out)

    def sink(row: dict[str, Any]) -> None:
        rows.append(row)
        append_row(options.out, row)

    scenarios = [SCENARIOS[name] for name in options.scenarios]
    arms = [ARMS[name] for name in options.arms]
    done = complete_cells(rows)
    plan = [
        (run, scenario, arm)
        for run in range(1, options.runs + 1)
        for scenario in scenarios
        for arm in arms
        if (scenario.name, arm.name, run) not in done
    ]
    turns = sum(len(scenario.steps) for _, scenario, _ in plan)
    started = time.monotonic()
    sink(
        {
            "kind": "run",
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            # as JSON reads it back (lists, not tuples): the row kept is the row written
            "options": json.loads(
                json.dumps({k: v for k, v in asdict(options).items() if k != "server_url"}, default=str)
            ),
            "cells": len(plan),
            "turns": turns,
            "load": list(os.getloadavg()),
            "cpus": os.cpu_count(),
        }
    )
    say(f"{len(plan)} cells, {turns} turns to run ({len(done)} cells already done) in {options.out}")
    progress = Progress(turns, say)
    judge: BaseChatModel | None = None

    def judge_ready() -> None:
        nonlocal judge
        if options.judge_model is None:
            return
        cells = complete_cells(rows)
        for scenario in scenarios:
            for run in range(1, options.runs + 1):
                present = {arm.name: cells.get((scenario.name, arm.name, run)) for arm in arms}
                if any(v is None for v in present.values()) or (scenario.name, run) in judged(rows):
                    continue
                if judge is None:
                    judge = judge_model(options.judge_model)
                complete = {name: steps for name, steps in present.items() if steps is not None}
                judge_run(judge, options.judge_model, scenario, run, complete, options.seed, sink, say)

    from bench.reliability.servers import server_or_own

    with server_or_own(options.server_url) as server:
        template = await make_template(server, backend, options.embedder) if plan else None
        try:
            for run, scenario, arm in plan:
                assert template is not None
                say(f"{scenario.name} / {arm.name} / run {run}: {arm.about}")

                def step_done(row: dict[str, Any]) -> None:
                    sink(row)
                    progress.step(row)

                await run_cell(
                    server,
                    template,
                    scenario,
                    arm,
                    run,
                    model=options.model,
                    model_setting=backend,
                    embedder=options.embedder,
                    sink=step_done,
                )
                judge_ready()
            judge_ready()
        finally:
            if template is not None:
                drop_database(server, template)
    sink(
        {
            "kind": "run_end",
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - started, 1),
            "turns": progress.done,
            "load": list(os.getloadavg()),
        }
    )
    return rows
