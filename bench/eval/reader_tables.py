"""The report's reader tables: what the reader answered with each arm's window, and paired intervals.

Computed from the rows alone, like the rest of the report (bench.eval.report).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench.eval.bootstrap import LEVEL, RESAMPLES, SEED, arm_intervals
from bench.eval.metrics import is_answered
from bench.eval.reader import reader_label

HEADLINE_ARM = "beads"
# the figures a paired interval is reported for: the reader's, then the model-free one it leans on
PAIRED_FIELDS = (("reader_f1", "reader F1"), ("answer_words", "answer words"))

Table = Callable[[Sequence[str], Sequence[Sequence[str]]], list[str]]


def answered(rows: Sequence[dict[str, Any]]) -> bool:
    return any(is_answered(r) for r in rows)


def reader_line(rows: Sequence[dict[str, Any]]) -> str:
    """Which reader answered, how many answers, and what they took."""
    done = [r for r in rows if is_answered(r)]
    names = sorted({reader_label(r.get("answer_model")) for r in done})
    seconds = [float(r["answer_seconds"]) for r in done if r.get("answer_seconds") is not None]
    timing = (
        f", {sum(seconds) / len(seconds):.1f} s per answer on average ({sum(seconds) / 60:.0f} min in all)"
        if seconds
        else ""
    )
    errors = sum(1 for r in rows if r.get("answer_error"))
    failed = f"; {errors} windows the reader could not take (`answer_error`)" if errors else ""
    return f"Reader: {', '.join(names)}; {len(done):,} answers{timing}{failed}."


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _with_n(value: float | None, n: int) -> str:
    return f"{_pct(value)} ({n})" if n else "–"


def reader_table(
    summary: dict[tuple[str, str, int | None], dict[str, Any]],
    dataset: str,
    table: Table,
    budget: Callable[[int | None], str],
) -> list[str]:
    """Per arm and budget: F1, exact match, "not mentioned", which value a knowledge update named."""
    body = []
    for (d, arm, b), f in summary.items():
        if d != dataset or not f.get("reader_n"):
            continue
        body.append(
            [
                arm,
                budget(b),
                str(f["reader_n"]),
                _with_n(f["reader_f1"], f["reader_f1_n"]),
                _with_n(f["reader_em"], f["reader_em_n"]),
                _with_n(f["reader_abstained"], f["reader_abstained_n"]),
                _pct(f["reader_missed"]),
                _with_n(f["reader_current"], f["reader_update_n"]),
                _pct(f["reader_stale"]) if f["reader_update_n"] else "–",
                _pct(f["reader_both"]) if f["reader_update_n"] else "–",
                _pct(f["reader_neither"]) if f["reader_update_n"] else "–",
                "–" if f["reader_seconds"] is None else f"{f['reader_seconds']:.1f}",
            ]
        )
    header = [
        "arm",
        "budget",
        "answers",
        "F1 (n)",
        "exact match, short references (n)",
        '"not mentioned", unanswerable (n)',
        '"not mentioned", answerable',
        "KU names current only (n)",
        "KU stale only",
        "KU both",
        "KU neither",
        "seconds per answer",
    ]
    return table(header, body)


def _interval(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "–"
    i = cell["interval"]
    mark = " *" if i.excludes_zero else ""
    return f"{100 * i.difference:+.1f} [{100 * i.low:+.1f}, {100 * i.high:+.1f}]{mark} ({i.n})"


def paired_table(
    rows: Sequence[dict[str, Any]], splits: Sequence[str], table: Table, budget: Callable[[int | None], str]
) -> list[str]:
    """The headline arm minus each other arm, per budget and split, with paired bootstrap intervals:
    the reader's F1 where a reader ran, and answer words (model-free) always."""
    groups = [(s, [r for r in rows if r.get("split") == s]) for s in splits] + [("all", list(rows))]
    fields = [(f, name) for f, name in PAIRED_FIELDS if any(r.get(f) is not None for r in rows)]
    cells: dict[tuple[str, int | None, str, str], dict[str, Any]] = {}
    for split, members in groups:
        for field, _ in fields:
            for cell in arm_intervals(members, field, HEADLINE_ARM):
                cells[(split, cell["budget"], cell["arm"], field)] = cell
    keys = sorted({(k[1], k[2]) for k in cells}, key=lambda k: (k[0] or 0, k[1]))
    if not keys:
        return []
    body = []
    for b, arm in keys:
        line = [budget(b), arm]
        for field, _ in fields:
            line += [_interval(cells.get((split, b, arm, field))) for split, _ in groups]
        body.append(line)
    header = ["budget", f"{HEADLINE_ARM} minus"]
    for _, name in fields:
        header += [f"{name}, {split} (n)" for split, _ in groups]
    intro = [
        f"Points of difference ({HEADLINE_ARM} minus the arm), paired over the questions both arms "
        f"have a figure for, with {int(100 * LEVEL)}% paired bootstrap intervals ({RESAMPLES:,} "
        f"resamples of the questions, seed {SEED}); * marks an interval that excludes zero.",
        "",
    ]
    return intro + table(header, body)
