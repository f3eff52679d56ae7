"""The summary (markdown) and the plot (PNG), computed from the rows file alone.

Nothing here reads the data or the database: `python -m bench.eval report` rebuilds both from a
committed rows.jsonl (plus run-info.json for load issues and runtime, when present).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.eval.arms import ARM_NAMES
from bench.eval.judging import accuracy_by_type, pairwise
from bench.eval.metrics import aggregate
from bench.eval.reader_tables import answered, reader_line, reader_table
from bench.eval.reader_tables import paired_table as reader_paired_table
from bench.eval.tiers import MARGIN_PLOT, has_tiers, margin_table, plot_margins

SUMMARY_FILE = "summary.md"
PLOT_FILE = "metrics-by-budget.png"
HEADLINE_ARM = "beads"  # the middleware itself (bench.eval.assembled.BeadsArm)
SPLIT_ORDER = ("tune", "holdout")

Group = tuple[str, str, int | None]  # dataset, arm, budget


def _arm_order(arm: str) -> int:
    return ARM_NAMES.index(arm) if arm in ARM_NAMES else len(ARM_NAMES)


def group_rows(rows: Sequence[dict[str, Any]]) -> dict[Group, list[dict[str, Any]]]:
    groups: dict[Group, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["dataset"], row["arm"], row["budget"])].append(row)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2] or 1 << 30, _arm_order(kv[0][1]))))


def summarise(rows: Sequence[dict[str, Any]]) -> dict[Group, dict[str, Any]]:
    return {group: aggregate(members) for group, members in group_rows(rows).items()}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _budget(budget: int | None) -> str:
    return "none (all)" if budget is None else f"{budget:,}"


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines


def paired_table(
    left: Sequence[dict[str, Any]], right: Sequence[dict[str, Any]], names: tuple[str, str]
) -> list[str]:
    """Evidence recall of two runs question by question: for each dataset, arm and budget both ran,
    each run's recall over the questions both answered, the difference, and how many questions only
    one of them found (a difference of a few questions each way is noise; one way only is not). And
    of every question both ran there, how many got the very same window (a change meant to leave
    what memory returns alone, a faster statement, shows all of them) and how many the same lines in
    any order (a change of the order lines are read in shows all of those)."""

    def keyed(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, int | None, str], bool]:
        return {
            (r["dataset"], r["arm"], r.get("budget"), r["question_id"]): bool(r["hit_any"])
            for r in rows
            if r.get("hit_any") is not None
        }

    def windows(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, int | None, str], Any]:
        return {(r["dataset"], r["arm"], r.get("budget"), r["question_id"]): r.get("window") for r in rows}

    a, b = keyed(left), keyed(right)
    groups: dict[Group, list[tuple[bool, bool]]] = defaultdict(list)
    for key in a.keys() & b.keys():
        groups[key[:3]].append((a[key], b[key]))
    wa, wb = windows(left), windows(right)
    alike: dict[Group, list[bool]] = defaultdict(list)
    same_lines: dict[Group, list[bool]] = defaultdict(list)
    for key in wa.keys() & wb.keys():
        alike[key[:3]].append(wa[key] is not None and wa[key] == wb[key])
        same_lines[key[:3]].append(
            wa[key] is not None and wb[key] is not None and sorted(wa[key]) == sorted(wb[key])
        )
    body = []
    for (dataset, arm, budget), pairs in sorted(
        groups.items(), key=lambda g: (g[0][0], _arm_order(g[0][1]), g[0][2] or 0)
    ):
        ra = sum(x for x, _ in pairs) / len(pairs)
        rb = sum(y for _, y in pairs) / len(pairs)
        only = f"{sum(x and not y for x, y in pairs)} / {sum(y and not x for x, y in pairs)}"
        body.append(
            [
                f"{dataset} ({len(pairs)})",
                arm,
                _budget(budget),
                _pct(ra),
                _pct(rb),
                f"{100 * (rb - ra):+.1f}",
                only,
                f"{sum(alike[(dataset, arm, budget)])} of {len(alike[(dataset, arm, budget)])}",
                f"{sum(same_lines[(dataset, arm, budget)])}",
            ]
        )
    header = [
        "dataset (questions)",
        "arm",
        "budget",
        names[0],
        names[1],
        "difference",
        f"only {names[0]} / only {names[1]}",
        "the same window",
        "the same lines, in any order",
    ]
    return _table(header, body)


def _abstention_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per arm and budget with a signal: how well each abstention signal separates (0.5 = chance)."""
    body = []
    for (_, arm, budget), figures in summarise(rows).items():
        if not figures["abstain_n"] or figures["abstain_auroc"] is None:
            continue
        cells = [figures["abstain_auroc"], figures["abstain_auroc_coverage"], figures["abstain_auroc_both"]]
        body.append(
            [arm, _budget(budget), f"{figures['abstain_n']}"]
            + ["–" if c is None else f"{c:.3f}" for c in cells]
        )
    header = ["arm", "budget", "unanswerable", "best score", "question words in window", "both (rank mean)"]
    return _table(header, body) if body else []


def _figure_cells(figures: dict[str, Any]) -> list[str]:
    return [
        f"{figures['questions']}",
        f"{_pct(figures['recall_any'])} ({figures['evidence_n']})",
        _pct(figures["recall_all"]),
        _pct(figures["evidence_whole"]) if figures.get("readable_n") else "–",
        _pct(figures["evidence_readable"]) if figures.get("readable_n") else "–",
        f"{_pct(figures['ku_current_present'])} ({figures['ku_n']})" if figures["ku_n"] else "–",
        _pct(figures["ku_stale_as_current"]) if figures["ku_n"] else "–",
        _pct(figures["ku_stale_turn_unmarked"]) if figures["ku_n"] else "–",
        _pct(figures["ku_current_above_stale"]) if figures["ku_n"] else "–",
        _pct(figures["ku_current_marked"]) if figures["ku_n"] else "–",
        f"{_pct(figures['ku_told_apart'])} ({figures['ku_both_n']})" if figures.get("ku_both_n") else "–",
        _pct(figures["abstain_precision"]),
        f"{_pct(figures['abstain_recall'])} ({figures['abstain_n']})" if figures["abstain_n"] else "–",
        "–" if figures["abstain_auroc"] is None else f"{figures['abstain_auroc']:.3f}",
        f"{_pct(figures['answer_words'])} ({figures['answer_n']})" if figures.get("answer_n") else "–",
        f"{figures['tokens_mean']:.0f}" if figures["tokens_mean"] is not None else "–",
        f"{figures['tokens_max']}",
    ]


FIGURE_HEADER = [
    "arm",
    "budget",
    "questions",
    "evidence recall any (n)",
    "recall all",
    "evidence turn whole",
    "evidence turn readable",
    "KU current present (n)",
    "KU stale shown as current",
    "KU stale turn unmarked",
    "KU current above stale",
    "KU current marked outdated",
    "KU both shown, told apart (n)",
    "abstain precision",
    "abstain recall (n)",
    "abstain AUROC",
    "answer words in window (n)",
    "tokens mean",
    "tokens max",
]


def render_markdown(rows: Sequence[dict[str, Any]], run_info: dict[str, Any] | None) -> str:
    summary = summarise(rows)
    datasets = sorted({r["dataset"] for r in rows})
    graded = any(r.get("correct") is not None for r in rows)
    out = ["# Evaluation summary", ""]
    out.append(
        f"{len(rows):,} rows (one per question, arm and budget). Budgets are counted with the bundled "
        "all-MiniLM-L6-v2 tokenizer, the same count for every arm; `full` has no budget."
    )
    if not graded and answered(rows):
        out += [
            "",
            "**No judge was configured**: grades, accuracy per question type and pairwise wins were "
            "skipped. The reader's answers are scored without one (token F1, exact match, which value a "
            "knowledge update names); every other figure needs no model.",
        ]
    elif not graded:
        out += [
            "",
            "**No answer model was configured**: answers, judge grades, accuracy per question type and "
            "pairwise wins were skipped. Every figure below needs no model.",
        ]
    out += ["", "## Headline", ""]
    out += _headline(rows, summary)
    if has_tiers(rows):
        out += ["", "## BEAM's tiers: the margin over the better whole-turn baseline", ""]
        out += [
            f"`{HEADLINE_ARM}` minus the better of `docstore` and `bm25` (chosen per tier, budget and "
            "figure, and named), in points, with a 95% paired bootstrap interval against that baseline "
            f"over the questions both have a figure for (* excludes zero). The plot: `{MARGIN_PLOT}`.",
            "",
        ]
        out += margin_table(rows)
    for dataset in datasets:
        out += ["", f"## {dataset}", ""]
        out += _dataset_notes(dataset, run_info)
        out += ["### Model-free figures", ""]
        out += _table(
            FIGURE_HEADER,
            [
                [arm, _budget(budget), *_figure_cells(f)]
                for (d, arm, budget), f in summary.items()
                if d == dataset
            ],
        )
        mine = [r for r in rows if r["dataset"] == dataset]
        out += ["", "### Evidence recall (any) by question type", ""]
        out += _recall_by_type(mine)
        for arm in ("beads", "facts"):
            if any(r["arm"] == arm for r in mine):
                out += ["", f"### Where the {arm} arm's evidence hits come from", ""]
                out += _facts_sources(mine, arm)
        abstention = _abstention_table(mine)
        if abstention:
            out += ["", "### Abstention signals (AUROC: unanswerable questions ranked above answerable)", ""]
            out += abstention
        if any("ku_current_present" in r for r in mine):
            out += ["", "### Knowledge updates in detail (count of questions)", ""]
            out += _ku_detail(mine)
        if answered(mine):
            out += ["", "### The reader's answers", "", reader_line(mine), ""]
            out += reader_table(summary, dataset, _table, _budget)
        intervals = reader_paired_table(mine, split_names(mine), _table, _budget)
        if intervals:
            out += ["", f"### {HEADLINE_ARM} against each arm, question by question", ""]
            out += intervals
        if graded:
            out += ["", "### Accuracy by question type (correct / graded)", ""]
            out += _accuracy_tables(mine)
            out += ["", "### Pairwise (questions both arms were graded on)", ""]
            pairs = pairwise(mine)
            out += _table(
                ["budget", "arm A", "arm B", "A right, B wrong", "B right, A wrong", "same"],
                [
                    [
                        _budget(p["budget"]),
                        p["arm_a"],
                        p["arm_b"],
                        str(p["wins_a"]),
                        str(p["wins_b"]),
                        str(p["ties"]),
                    ]
                    for p in pairs
                ],
            )
    out += ["", _DEFINITIONS]
    return "\n".join(out) + "\n"


def split_names(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The split tags the rows carry ("tune" before "holdout", others after them by name)."""
    tags = {r["split"] for r in rows if r.get("split")}
    return sorted(tags, key=lambda t: (SPLIT_ORDER.index(t) if t in SPLIT_ORDER else len(SPLIT_ORDER), t))


HEADLINE_ORDER = (
    "Read from the left: what a reader answers with the window (**reader F1**, LoCoMo's token F1 of its "
    "answer; **stale answers**, knowledge updates whose answer names only the replaced value), then "
    "how many of a short reference answer's words the window carries (**answer words**), then "
    "**evidence recall**. Evidence recall counts a question as found when any claim carved from an "
    "evidence turn is in the window, so fine claims from many turns score more per token than whole "
    "turns, whether or not the words that answer came along."
)


def _headline(rows: Sequence[dict[str, Any]], summary: dict[Group, dict[str, Any]]) -> list[str]:
    """Per dataset, budget and arm (the middleware's own arm first): the reader's F1 and stale answers
    where a reader ran, answer words, evidence recall; a column per split when the rows are tagged:
    settings are chosen on one split and reported on the other."""
    splits = split_names(rows)
    by_split: dict[tuple[str, str, int | None, str], dict[str, Any]] = {}
    for split in splits:
        for group, members in group_rows([r for r in rows if r.get("split") == split]).items():
            by_split[(*group, split)] = aggregate(members)
    reader = answered(rows)
    updates = reader and any(r.get("reader_update") is not None for r in rows)
    lines = [HEADLINE_ORDER, ""]
    lines += [reader_line(rows) if reader else "No reader answered these rows (`--answer-model`).", ""]
    if splits:
        lines += [
            "A column per split of the conversations ("
            + ", ".join(f"**{s}**: {_conversations(rows, s)}" for s in splits)
            + "), then over every question of the run.",
            "",
        ]
    header = [
        "dataset",
        "budget",
        "arm",
        *([*(f"reader F1, {s} (n)" for s in splits), "reader F1, all (n)"] if reader else []),
        *([*(f"stale answers, {s}" for s in splits), "stale answers, all (n)"] if updates else []),
        *(f"answer words, {s}" for s in splits),
        "answer words, all",
        *(f"recall, {s} (n)" for s in splits),
        "recall, all (n)",
        *(f"KU current above stale, {s}" for s in splits),
        "KU current above stale, all",
        "tokens used (mean)",
        "accuracy",
    ]
    body = []
    for (dataset, arm, budget), f in summary.items():

        def recall(figures: dict[str, Any] | None) -> str:
            if figures is None or not figures["evidence_n"]:
                return "–"
            return f"{_pct(figures['recall_any'])} ({figures['evidence_n']})"

        def words(figures: dict[str, Any] | None) -> str:
            return _pct(figures["answer_words"]) if figures and figures.get("answer_n") else "–"

        def ku(figures: dict[str, Any] | None) -> str:
            return _pct(figures["ku_current_above_stale"]) if figures and figures["ku_n"] else "–"

        def f1(figures: dict[str, Any] | None) -> str:
            if figures is None or not figures.get("reader_f1_n"):
                return "–"
            return f"{_pct(figures['reader_f1'])} ({figures['reader_f1_n']})"

        def stale(figures: dict[str, Any] | None, n: bool = False) -> str:
            if figures is None or not figures.get("reader_update_n"):
                return "–"
            tail = f" ({figures['reader_update_n']})" if n else ""
            return _pct(figures["reader_stale"]) + tail

        parts = [by_split.get((dataset, arm, budget, s)) for s in splits]
        body.append(
            [
                dataset,
                _budget(budget),
                f"**{arm}**" if arm == HEADLINE_ARM else arm,
                *([*(f1(p) for p in parts), f1(f)] if reader else []),
                *([*(stale(p) for p in parts), stale(f, n=True)] if updates else []),
                *(words(p) for p in parts),
                words(f),
                *(recall(p) for p in parts),
                recall(f),
                *(ku(p) for p in parts),
                ku(f),
                f"{f['tokens_mean']:.0f}" if f["tokens_mean"] is not None else "–",
                _pct(f["accuracy"]),
            ]
        )
    return lines + _table(header, body)


def _conversations(rows: Sequence[dict[str, Any]], split: str) -> str:
    ids = sorted({r["conversation_id"] for r in rows if r.get("split") == split})
    return f"{len(ids)} conversations"


def _dataset_notes(dataset: str, run_info: dict[str, Any] | None) -> list[str]:
    """Source, database and load issues from the latest invocation that loaded `dataset`."""
    records = [
        d for run in (run_info or {}).get("runs", []) for d in run.get("datasets", []) if d["name"] == dataset
    ]
    if not records:
        return []
    latest = records[-1]
    # a resumed run with nothing left to do opens no database: name the one the rows came from
    database = next((d["database"] for d in reversed(records) if d.get("database")), None)
    lines = [f"Source: `{Path(latest['source']).name}`; database `{database}`.", ""]
    if latest["issues"]:
        lines += ["Load issues (counted, not hidden):", ""]
        lines += _table(["issue", "count"], [[k, str(v)] for k, v in sorted(latest["issues"].items())])
        lines.append("")
    return lines


def _recall_by_type(rows: Sequence[dict[str, Any]]) -> list[str]:
    cells: dict[tuple[str, int | None, str], list[bool]] = defaultdict(list)
    for r in rows:
        if r.get("hit_any") is not None:
            cells[(r["type"], r["budget"], r["arm"])].append(bool(r["hit_any"]))
    arms = sorted({k[2] for k in cells}, key=_arm_order)
    # full context has no budget: its figure is repeated at each budget for comparison
    keys = sorted({(k[0], k[1]) for k in cells if k[1] is not None}, key=lambda k: (k[0], k[1] or 0))
    body = []
    for qtype, budget in keys:
        row = [qtype, _budget(budget)]
        for arm in arms:
            hits = cells.get((qtype, None if arm == "full" else budget, arm))
            row.append(f"{_pct(sum(hits) / len(hits))} ({len(hits)})" if hits else "–")
        body.append(row)
    return _table(["type", "budget", *arms], body)


def _facts_sources(rows: Sequence[dict[str, Any]], arm: str) -> list[str]:
    """Evidence found as a fact from memory vs only as a transcript turn in the tail (an arm with both)."""
    body = []
    for budget in sorted({r["budget"] for r in rows if r["arm"] == arm}):
        scored = [
            r for r in rows if r["arm"] == arm and r["budget"] == budget and r.get("hit_any") is not None
        ]
        via_fact = 0
        for r in scored:
            evidence = set(r["evidence_ids"])
            if any("@" in item and item.split("@")[0] in evidence for item in r["window"]):
                via_fact += 1
        hits = sum(1 for r in scored if r["hit_any"])
        body.append(
            [
                _budget(budget),
                str(len(scored)),
                _pct(hits / len(scored)) if scored else "–",
                _pct(via_fact / len(scored)) if scored else "–",
                _pct((hits - via_fact) / len(scored)) if scored else "–",
            ]
        )
    return _table(
        ["budget", "questions", "recall any", "as a fact from memory", "only in the transcript tail"], body
    )


def _ku_detail(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Which of the stale and current values reached each window, and in which order."""
    body = []
    for (_, arm, budget), members in group_rows([r for r in rows if "ku_current_present" in r]).items():
        both = [r for r in members if r["ku_current_present"] and r["ku_stale_present"]]
        body.append(
            [
                arm,
                _budget(budget),
                str(len(members)),
                str(len(both)),
                str(sum(1 for r in both if r["ku_stale_as_current"])),
                str(sum(1 for r in both if r["ku_current_above_stale"])),
                str(sum(1 for r in members if r["ku_current_present"] and not r["ku_stale_present"])),
                str(sum(1 for r in members if r["ku_stale_present"] and not r["ku_current_present"])),
                str(sum(1 for r in members if not r["ku_current_present"] and not r["ku_stale_present"])),
            ]
        )
    header = [
        "arm",
        "budget",
        "KU questions",
        "both present",
        "of which stale unmarked",
        "of which current first",
        "only current",
        "only stale",
        "neither",
    ]
    return _table(header, body)


def _accuracy_tables(rows: Sequence[dict[str, Any]]) -> list[str]:
    acc = accuracy_by_type(rows)
    arms = sorted({k[1] for k in acc}, key=_arm_order)
    keys = sorted({(k[3], k[2]) for k in acc}, key=lambda k: (k[0], k[1] or 1 << 30))
    body = []
    for qtype, budget in keys:
        row = [qtype, _budget(budget)]
        for arm in arms:
            cell = next((v for k, v in acc.items() if k[1] == arm and k[3] == qtype and k[2] == budget), None)
            row.append(f"{cell[0]}/{cell[1]}" if cell else "–")
        body.append(row)
    return _table(["type", "budget", *arms], body)


_DEFINITIONS = """## Definitions

- **evidence recall any / all**: the share of answerable questions with resolvable evidence for which any
  (all) gold evidence turns are in the window, as the turn or as a fact carved from it (fact.message_id =
  turn id). Unanswerable questions are left out.
- **evidence turn whole / readable**: closer to what a reader needs than recall. Per question, the
  evidence turn the window shows most of, counted as the turn's own words shown in runs of five in
  order: *whole* when at least 90% of them are there, *readable* when at least half are, or at least
  50 of its words (the claim and enough of its turn to read it: who said it, about what, the question
  it answered). A fact alone from a long turn is recalled but not readable.
- **KU** (BEAM knowledge updates, `original_info` = stale, `updated_info` = current): *current present*;
  *stale shown as current*: the stale turn (or a fact from it) is in the window and not marked superseded;
  *stale turn unmarked*: a stale turn is in the window and none of its facts is marked (a turn cut into
  several facts has its stale value marked and its other facts, about other things, rightly not);
  *current above stale*: the current value is in the window and chosen before the stale one (retrieval
  rank; newest first for a transcript), or the stale one is absent; *current marked outdated*: the
  current value is in the window and every fact of its turn is marked (shown only as possibly
  outdated); *both shown, told apart*: of the updates whose stale and current values are both in the
  window, the share where the window tells which is later, as a reader told "the later one holds"
  needs to: every line of the stale value marked outdated and none of the current one, or no line of
  either said at a time ("7 Feb 2024 00:03", "[07 Feb 2024 00:05]") a line of the other was said at. Sequences (`--sequences`) read the same way; for a look-alike the fact is "current" and
  the look-alike "stale".
- **abstain precision / recall**: the arm's "memory holds nothing relevant" signal against the
  unanswerable questions (LoCoMo category 5, BEAM abstention, LongMemEval `_abs`). facts:
  `SearchResult.not_in_memory` (the library's relevance floor); docstore: best cosine below the same
  floor; bm25: no turn shares a term with the question; tail and full have no signal. **AUROC**: how well
  the best retrieval score alone separates unanswerable from answerable questions (0.5 = chance),
  independent of any floor.
- **answer words in window**: for short reference answers (at most 8 content words once stopwords and
  the question's own words are left out), the share of those words the window's text contains, averaged.
  Evidence recall counts a fact from the right turn; this counts the words of the answer.
- **tokens**: the window as the model would see it (headers included), by the one shared count.
- **reader** (`--answer-model`): one model answers every question from each arm's window with the same
  prompt (bench.eval.reader). **F1** and **exact match** are LoCoMo's own (bench.eval.answer_scores:
  commas, punctuation and a/an/the/and out, lowercased; a multi-hop reference split at commas; no
  stemming, so a little below LoCoMo's figures on the same answers), F1 on every answerable question
  whose reference is an answer (not a rubric), exact match on references of at most 5 tokens;
  **"not mentioned"**: the answer LoCoMo's scorer takes as right on an unanswerable question;
  **stale answers** / **KU names current**: for knowledge updates whose current and replaced values
  are both known (BEAM: the rubric's value and the number of the same unit in the `original_info`
  message; sequences: their `current` and `stale`), whether the answer names only the current value,
  only the stale one, both, or neither. The bootstrap intervals pair the two arms' scores question by
  question (bench.eval.bootstrap).
"""


# one look per arm in every panel; distinct markers and dashes because arms often tie
_STYLES = {
    "beads": ("*", "-", "black"),
    "beads_gated": ("h", (0, (3, 1, 1, 1)), "tab:gray"),
    "tail": ("o", ":", "tab:blue"),
    "docstore": ("s", "--", "tab:orange"),
    "bm25": ("^", "-.", "tab:green"),
    "facts": ("D", "-", "tab:red"),
    "facts_gated": ("v", (0, (5, 1)), "tab:purple"),
    "assembled": ("P", "-", "tab:brown"),
    "assembled_pinned": ("X", "--", "tab:pink"),
    "assembled_noclear": ("p", ":", "tab:olive"),
}


def plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Each metric against budget, one line per arm (full context as a dashed level), one row per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise(rows)
    datasets = sorted({d for d, _, _ in summary})
    metrics = [
        ("recall_any", "evidence recall (any)"),
        ("recall_all", "evidence recall (all)"),
        ("ku_current_above_stale", "KU current above stale"),
        ("abstain_recall", "abstention recall"),
        ("tokens_mean", "tokens used (mean)"),
    ]
    if any(f.get("reader_f1") is not None for f in summary.values()):
        metrics.insert(0, ("reader_f1", "reader F1"))
    if any(f["accuracy"] is not None for f in summary.values()):
        metrics.append(("accuracy", "accuracy (judged)"))
    fig, axes = plt.subplots(
        len(datasets), len(metrics), figsize=(3.4 * len(metrics), 3.0 * len(datasets)), squeeze=False
    )
    for i, dataset in enumerate(datasets):
        for j, (key, title) in enumerate(metrics):
            ax = axes[i][j]
            ax.set_title(f"{dataset}: {title}", fontsize=9)
            plotted = False
            for arm in sorted({a for d, a, _ in summary if d == dataset}, key=_arm_order):
                points = sorted(
                    (b, f[key])
                    for (d, a, b), f in summary.items()
                    if d == dataset and a == arm and b is not None
                )
                points = [(b, v) for b, v in points if v is not None]
                full = summary.get((dataset, arm, None))
                if points:
                    marker, style, color = _STYLES.get(arm, ("o", "-", "tab:purple"))
                    xs, ys = [b for b, _ in points], [v for _, v in points]
                    ax.plot(xs, ys, marker=marker, linestyle=style, color=color, alpha=0.85, label=arm)
                    plotted = True
                elif full is not None and full.get(key) is not None and key != "tokens_mean":
                    ax.axhline(full[key], linestyle="--", color="grey", label=f"{arm} (no budget)")
                    plotted = True
            if not plotted:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            else:
                ax.set_xticks(sorted({b for d, _, b in summary if d == dataset and b is not None}))
            ax.set_xlabel("budget (tokens)", fontsize=8)
            ax.tick_params(labelsize=7)
            if key != "tokens_mean":
                ax.set_ylim(-0.02, 1.02)
            if plotted:
                ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(out_dir: Path, rows: Sequence[dict[str, Any]]) -> tuple[Path, Path, str]:
    """summary.md and the PNG in `out_dir`; returns their paths and the markdown."""
    info_path = out_dir / "run-info.json"
    run_info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else None
    markdown = render_markdown(rows, run_info)
    summary_path = out_dir / SUMMARY_FILE
    summary_path.write_text(markdown, encoding="utf-8")
    plot_path = plot(rows, out_dir / PLOT_FILE)
    if has_tiers(rows):
        plot_margins(rows, out_dir / MARGIN_PLOT)
    return summary_path, plot_path, markdown
