"""summary.md from the rows alone: per scenario and arm the checks with their spread over runs, the
judge's grades beside the controls', tokens, calls and latency; the predictions beside the outcomes;
the injected block per call as the store grows; the final replies.

A cell's metrics are its run's: a check is 1 or 0, tokens, calls and seconds are summed over the
scenario's steps, `_max` metrics are the largest of any one model call. Across runs a check is shown
as k/N with each run's value, a figure as mean (min-max).
"""

from __future__ import annotations

import operator
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from bench.scenarios.arms import ARMS
from bench.scenarios.checks import CHECKS, LOWER_IS_BETTER
from bench.scenarios.harness import complete_cells
from bench.scenarios.judge import CONTROLS, DIMENSIONS
from bench.scenarios.script import SCENARIOS

FIGURES = (
    ("input_tokens", "input tokens"),
    ("output_tokens", "output tokens"),
    ("model_calls", "model calls"),
    ("latency_s", "lane seconds"),
    ("errors", "steps that failed"),
)
MECHANISM = (
    ("injected_facts_max", "most facts in one block"),
    ("injected_tokens_max", "most tokens in one block"),
    ("recall_chars_max", "largest search_memory result (chars)"),
    ("store_facts_final", "store after the last step (facts or items)"),
    ("store_growth", "store growth, first step to last"),
    ("block_growth", "block growth, second step to last"),
    ("supersedes_final", "supersedes edges"),
)


def _max(values: Sequence[int]) -> int:
    return max(values, default=0)


def cell_metrics(steps: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """One run of one arm through one scenario, as numbers."""
    out: dict[str, float | None] = {}
    for step in steps:
        out.update({name: float(bool(value)) for name, value in step["checks"].items()})
    out["input_tokens"] = sum(s["input_tokens"] for s in steps)
    out["output_tokens"] = sum(s["output_tokens"] for s in steps)
    out["model_calls"] = sum(s["model_calls"] for s in steps)
    out["latency_s"] = sum(s["latency_ms"] for s in steps) / 1000
    out["errors"] = sum(s["status"] != "done" for s in steps)
    first, last = steps[0]["store"]["facts"], steps[-1]["store"]["facts"]
    out["store_facts_final"] = last
    out["store_chars_final"] = steps[-1]["store"]["chars"]
    out["store_growth"] = last / first if first else None
    if steps[0]["lane"] == "stock":  # no block: what it recalls arrives as search_memory results
        out["recall_chars_max"] = _max([c for s in steps for c in s["recall_chars"]])
        return out
    calls = [i for s in steps for i in s["injections"]]
    out["injected_facts_max"] = _max([i["facts"] for i in calls])
    out["injected_chars_max"] = _max([i["chars"] for i in calls])
    out["injected_tokens_max"] = _max([i["tokens"] for i in calls])
    second = _max([i["tokens"] for i in steps[1]["injections"]]) if len(steps) > 1 else 0
    final = _max([i["tokens"] for i in steps[-1]["injections"]])
    out["block_growth"] = final / second if second else None
    out["supersedes_final"] = steps[-1]["store"]["supersedes"]
    return out


@dataclass
class Table:
    """(scenario, subject) -> the per-run values of every metric, in run order."""

    values: dict[tuple[str, str], dict[str, list[float]]]
    runs: dict[tuple[str, str], list[int]]

    def get(self, scenario: str, subject: str, metric: str) -> list[float]:
        return self.values.get((scenario, subject), {}).get(metric, [])


def build_table(rows: Sequence[dict[str, Any]]) -> Table:
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    runs: dict[tuple[str, str], list[int]] = {}
    for (scenario, arm, run), steps in sorted(complete_cells(rows).items(), key=lambda kv: kv[0][2]):
        runs.setdefault((scenario, arm), []).append(run)
        for metric, value in cell_metrics(steps).items():
            if value is not None:
                values.setdefault((scenario, arm), {}).setdefault(metric, []).append(value)
    latest: dict[tuple[str, int, str], dict[str, Any]] = {}
    for row in rows:
        if row.get("kind") == "judge":
            latest[(row["scenario"], row["run"], row["subject"])] = (
                row  # a rerun's grade replaces the earlier
            )
    for (scenario, _run, subject), row in sorted(latest.items()):
        for dim in DIMENSIONS:
            if row.get(dim) is not None:
                values.setdefault((scenario, subject), {}).setdefault(f"judge_{dim}", []).append(row[dim])
        ungraded = sum(row.get(dim) is None for dim in DIMENSIONS)
        values.setdefault((scenario, subject), {}).setdefault("judge_ungraded", []).append(ungraded)
    return Table(values, runs)


def rate(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{int(sum(values))}/{len(values)} ({','.join(str(int(v)) for v in values)})"


def spread(values: Sequence[float], digits: int = 0) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1 or min(values) == max(values):
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


# -- predictions ---------------------------------------------------------------------------------

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
_PREDICTED = re.compile(r"^(>=|<=|==|>|<)\s*(\S+)$")


@dataclass(frozen=True)
class Prediction:
    scenario: str
    arm: str
    metric: str
    predicted: str
    why: str


def read_predictions(path: Path) -> list[Prediction]:
    """The rows of the predictions table (| scenario | arm | metric | predicted | why |)."""
    if not path.exists():
        return []
    found, inside = [], False
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:4] == ["scenario", "arm", "metric", "predicted"]:
            inside = True
            continue
        if not inside or not line.startswith("|"):
            inside = inside and line.startswith("|")
            continue
        if set(cells[0]) <= {"-"}:
            continue
        scenario, arm, metric, predicted = cells[:4]
        found.append(Prediction(scenario, arm, metric, predicted, cells[4] if len(cells) > 4 else ""))
    return found


def _observed(table: Table, scenario: str, arm: str, metric: str) -> float | None:
    if arm == "judge" and metric == "latest_gap":
        gold, stale = (table.get(scenario, c, "judge_latest") for c in CONTROLS)
        return statistics.fmean(gold) - statistics.fmean(stale) if gold and stale else None
    values = table.get(scenario, arm, metric)
    if not values:
        return None
    return max(values) if metric.endswith("_max") else statistics.fmean(values)


def _number(text: str) -> float:
    return float(Fraction(text))


def judge_prediction(
    table: Table, p: Prediction, scenarios: Sequence[str], arms: Sequence[str]
) -> list[dict[str, Any]]:
    """Each (scenario, arm) the prediction names, with what was observed and whether it held."""
    names = list(scenarios) if p.scenario == "both" else [p.scenario]
    subjects = list(arms) if p.arm == "all" else [a.strip() for a in p.arm.split(",")]
    out = []
    for scenario in names:
        if p.predicted.startswith("within"):
            means = [v for a in subjects if (v := _observed(table, scenario, a, p.metric)) is not None]
            width = max(means) - min(means) if len(means) > 1 else None
            held = None if width is None else width < _number(p.predicted.split()[1])
            out.append(
                _outcome(
                    p, scenario, "+".join(subjects), None if width is None else f"spread {width:.2f}", held
                )
            )
            continue
        match = _PREDICTED.match(p.predicted)
        if not match:
            out.append(_outcome(p, scenario, p.arm, "unreadable prediction", None))
            continue
        op, target = match[1], match[2]
        for arm in subjects:
            value = _observed(table, scenario, arm, p.metric)
            other = _observed(table, scenario, target, p.metric) if target in ARMS else None
            if target in ARMS:
                bound = other
                shown = (
                    None if value is None or other is None else f"{_show(value)} vs {target} {_show(other)}"
                )
            else:
                bound = _number(target)
                shown = None if value is None else _show(value, rate=p.metric in CHECKS)
            out.append(_outcome(p, scenario, arm, shown, _holds(op, value, bound)))
    return out


def _holds(op: str, value: float | None, bound: float | None) -> bool | None:
    """`value op bound`, with a rounding error's tolerance (2/3 of runs is 0.666...)."""
    if value is None or bound is None:
        return None
    if op == "==":
        return abs(value - bound) < 1e-9
    if op in (">=", "<="):
        return _OPS[op](value + (1e-9 if op == ">=" else -1e-9), bound)
    return _OPS[op](value, bound)


def _show(value: float, rate: bool = False) -> str:
    if rate:
        return f"{value:.2f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _outcome(
    p: Prediction, scenario: str, arm: str, observed: str | None, held: bool | None
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "arm": arm,
        "metric": p.metric,
        "predicted": p.predicted,
        "observed": observed or "no data",
        "held": held,
    }


# -- the summary ---------------------------------------------------------------------------------


def _run_info(rows: Sequence[dict[str, Any]]) -> list[str]:
    starts = [r for r in rows if r.get("kind") == "run"]
    ends = [r for r in rows if r.get("kind") == "run_end"]
    lines = []
    for start in starts:
        opts = start["options"]
        lines.append(
            f"- invocation of {start['started']}: {start['cells']} cells, {start['turns']} turns; model "
            f"`{opts['model']}`, judge `{opts['judge_model']}`, embedder `{opts['embedder']}`, "
            f"load at start {', '.join(f'{x:.1f}' for x in start['load'])} on {start['cpus']} CPUs"
        )
    for end in ends:
        lines.append(
            f"- finished {end['finished']}: {end['turns']} turns in {end['elapsed_s'] / 60:.0f} min, "
            f"load at the end {', '.join(f'{x:.1f}' for x in end['load'])}"
        )
    return lines


def run_command(rows: Sequence[dict[str, Any]]) -> str:
    """The command of the first invocation that ran cells, from its options."""
    for row in rows:
        if row.get("kind") == "run" and row.get("turns"):
            o = row["options"]
            judge = o["judge_model"] or "none"
            return (
                f"python -m bench.scenarios --runs {o['runs']} --model {o['model']} --judge-model {judge} "
                f"--out {o['out']}"
            )
    return ""


def summary(rows: Sequence[dict[str, Any]], predictions: Path | None = None, command: str = "") -> str:
    command = command or run_command(rows)
    table = build_table(rows)
    steps = [r for r in rows if r.get("kind") == "step"]
    scenarios = [s for s in SCENARIOS if any(r["scenario"] == s for r in steps)]
    arms = [a for a in ARMS if any(r["arm"] == a for r in steps)]
    models = sorted({r.get("model_name", "?") for r in steps})
    lines = ["# Multi-turn scenarios: four arms through the playground's turn runner", ""]
    if command:
        lines += [f"`{command}`", ""]
    lines += [
        f"Model: {', '.join(models) or '-'}. Every message on a new LangGraph thread; each arm's lane run "
        "alone, one turn at a time. A check is k/N runs (each run's value); a figure is mean "
        "(min-max) over runs, summed over the scenario's steps. Model calls and tokens are the lane's own "
        "model calls, as the playground counts them: a research sub-agent's calls are not in them (its "
        "time is in the lane's seconds).",
        "",
        *_run_info(rows),
    ]
    for name in scenarios:
        scenario = SCENARIOS[name]
        lines += ["", f"## {scenario.title} (`{name}`)", ""]
        lines += ["| | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]
        for check in CHECKS:
            if not any(table.get(name, a, check) for a in arms):
                continue
            label = f"{check} (lower is better)" if check in LOWER_IS_BETTER else check
            lines.append(f"| {label} | " + " | ".join(rate(table.get(name, a, check)) for a in arms) + " |")
        for metric, label in FIGURES:
            digits = 1 if metric == "latency_s" else 0
            lines.append(
                f"| {label} | " + " | ".join(spread(table.get(name, a, metric), digits) for a in arms) + " |"
            )
        for metric, label in MECHANISM:
            digits = 1 if "growth" in metric else 0
            lines.append(
                f"| {label} | " + " | ".join(spread(table.get(name, a, metric), digits) for a in arms) + " |"
            )
        subjects = [*arms, *CONTROLS]
        if any(table.get(name, s, "judge_ungraded") for s in subjects):
            lines += ["", "The judge (1 to 5; blinded, shuffled, one call per transcript):", ""]
            lines += ["| | " + " | ".join(subjects) + " |", "|---|" + "---:|" * len(subjects)]
            for dim in DIMENSIONS:
                lines.append(
                    f"| {dim} | "
                    + " | ".join(spread(table.get(name, s, f"judge_{dim}"), 1) for s in subjects)
                    + " |"
                )
            lines.append(
                "| grades missing | "
                + " | ".join(str(int(sum(table.get(name, s, "judge_ungraded")))) for s in subjects)
                + " |"
            )
    if predictions is not None:
        outcomes = [
            o for p in read_predictions(predictions) for o in judge_prediction(table, p, scenarios, arms)
        ]
        if outcomes:
            held = sum(o["held"] is True for o in outcomes)
            missed = [o for o in outcomes if o["held"] is False]
            lines += [
                "",
                "## Predictions beside the outcomes",
                "",
                f"From `{predictions.name}`, written before the first run for the offline model: {held} held, {len(missed)} missed, "
                f"{sum(o['held'] is None for o in outcomes)} without data.",
                "",
                "| scenario | arm | metric | predicted | observed | |",
                "|---|---|---|---|---|---|",
            ]
            for o in outcomes:
                mark = {True: "held", False: "**missed**", None: "no data"}[o["held"]]
                lines.append(
                    f"| {o['scenario']} | {o['arm']} | {o['metric']} | {o['predicted']} | {o['observed']} | {mark} |"
                )
    lines += mechanism(rows, scenarios, arms)
    lines += final_replies(rows, scenarios, arms)
    return "\n".join(lines) + "\n"


def mechanism(rows: Sequence[dict[str, Any]], scenarios: Sequence[str], arms: Sequence[str]) -> list[str]:
    """Per step: the store after it, and the block injected into each of our root agent's calls (or
    the stock lane's search results), over every run and call."""
    cells = complete_cells(rows)
    lines = [
        "",
        "## The injected block as the store grows",
        "",
        "Per step, over every run: the store after the step (mean facts, or the stock lane's items, and "
        "characters), and per model call of our root agent the block it was given (facts, characters, "
        "tokens: min-max over runs and calls; a sub-agent's blocks do not reach the turn's stream). For the stock "
        "lane, the search_memory results it read instead (characters per result).",
    ]
    for name in scenarios:
        lines += [
            "",
            f"### `{name}`",
            "",
            "| arm | step | store facts | store chars | calls | facts per call | chars per call | tokens per call |",
        ]
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for arm in arms:
            runs = [steps for (s, a, _), steps in cells.items() if s == name and a == arm]
            if not runs:
                continue
            for index in range(len(runs[0])):
                at = [steps[index] for steps in runs]
                store_facts = statistics.fmean(s["store"]["facts"] for s in at)
                store_chars = statistics.fmean(s["store"]["chars"] for s in at)
                if arm == "stock":
                    recall = [c for s in at for c in s["recall_chars"]]
                    cols = [str(len(recall)), "-", _range(recall), "-"]
                else:
                    calls = [i for s in at for i in s["injections"]]
                    cols = [
                        str(len(calls)),
                        _range([i["facts"] for i in calls]),
                        _range([i["chars"] for i in calls]),
                        _range([i["tokens"] for i in calls]),
                    ]
                lines.append(
                    f"| {arm} | {index + 1} ({at[0]['role']}) | {store_facts:.0f} | {store_chars:,.0f} | "
                    + " | ".join(cols)
                    + " |"
                )
    return lines


def _range(values: Sequence[int]) -> str:
    if not values:
        return "-"
    return f"{min(values):,}" if min(values) == max(values) else f"{min(values):,}-{max(values):,}"


def final_replies(rows: Sequence[dict[str, Any]], scenarios: Sequence[str], arms: Sequence[str]) -> list[str]:
    cells = complete_cells(rows)
    lines = ["", "## The last step's replies", ""]
    for name in scenarios:
        lines += [
            f"`{name}`: {SCENARIOS[name].steps[-1].text}",
            "",
            "| arm | run | reply |",
            "|---|---:|---|",
        ]
        for arm in arms:
            for (s, a, run), steps in sorted(cells.items()):
                if s == name and a == arm:
                    reply = " ".join(steps[-1]["reply"].split())
                    reply = reply if len(reply) <= 300 else reply[:300] + " [...]"
                    shown = reply.replace("|", "\\|") or f"(no reply: {steps[-1]['status']})"
                    lines.append(f"| {arm} | {run} | {shown} |")
        lines.append("")
    return lines
