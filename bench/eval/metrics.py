"""Figures that need no model: evidence recall, knowledge updates, abstention, tokens.

Per question and window (`window_metrics`), then aggregated over rows (`aggregate`), so every figure in
the summary is recomputable from the JSONL rows alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from bench.eval.conversation import Question
from bench.eval.window import Window, WindowItem, without_clock


def _first_priority(window: Window, turn_ids: Sequence[str]) -> int | None:
    """The best (lowest) priority of any window item from one of `turn_ids`."""
    wanted = set(turn_ids)
    found = [item.priority for item in window.items if item.turn_id in wanted]
    return min(found) if found else None


# a reference answer of at most this many content words counts as short: its words are looked for
ANSWER_WORDS_MAX = 8
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN  # the bm25 arm's stopwords

    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS_EN]


def answer_words(window: Window, question: Question) -> float | None:
    """The share of a short reference answer's content words that the window's text contains (words
    of the question left out: they say nothing about the answer). None for long references (rubrics,
    summaries) and unanswerable questions. Where evidence recall counts a fact from the right turn,
    this counts the words of the answer: a fact carved from the evidence turn may not be the one
    that says it, and a claim shown with its passage may say more. The time of day the lines' stamps
    say is not counted (`without_clock`); their dates are."""
    if question.abstention:
        return None
    asked = set(_words(question.question))
    wanted = list(dict.fromkeys(w for w in _words(question.reference) if w not in asked))
    if not wanted or len(wanted) > ANSWER_WORDS_MAX:
        return None
    present = set(_words(without_clock(window.text)))
    return sum(w in present for w in wanted) / len(wanted)


def word_coverage(window: Window, question: Question) -> float | None:
    """The share of the question's content words that the window's text contains: a second abstention
    signal beside the best retrieval score (a question about something never said tends to find its
    nouns nowhere). The question's words are those the keyword side searches for (english stop words
    out); None when it has none."""
    from memory.retrieval import keyword_words

    asked = list(dict.fromkeys(t for w in keyword_words(question.question) for t in _WORD.findall(w)))
    if not asked:
        return None
    present = set(_WORD.findall(window.text.lower()))
    return sum(w in present for w in asked) / len(asked)


# An evidence turn is within reach of a reader when the window shows it whole, or shows enough of it
# around the claim to read the claim in its turn (who said it, about what, the question it answered):
# half of the turn, or at least this many of its words.
READABLE_SHARE = 0.5
READABLE_WORDS = 50
WHOLE_SHARE = 0.9
_SHINGLE = 5


def _shingles(words: Sequence[str]) -> list[tuple[str, ...]]:
    if len(words) <= _SHINGLE:
        return [tuple(words)] if words else []
    return [tuple(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1)]


def evidence_in_reach(window_text: str, evidence_texts: Sequence[str]) -> dict[str, Any]:
    """How much of its best-shown evidence turn the window carries, and whether that turn is whole or
    readable. Answer words count a reference's words anywhere in the window; this counts the turn's
    own words shown in runs of five in order (a fact is a verbatim slice of its turn, so a claim shows
    the runs inside it, and the passage shown around it adds its own)."""
    if not evidence_texts:
        return {"evidence_share": None, "evidence_whole": None, "evidence_readable": None}
    shown = set(_shingles(_WORD.findall(window_text.lower())))
    share, words = 0.0, 0
    for text in evidence_texts:
        turn_words = _WORD.findall(text.lower())
        runs = _shingles(turn_words)
        if not runs:
            continue
        covered = [False] * len(turn_words)
        for i, run in enumerate(runs):
            if run in shown:
                covered[i : i + len(run)] = [True] * len(run)
        turn_share = sum(covered) / len(covered)
        if (turn_share, sum(covered)) > (share, words):
            share, words = turn_share, sum(covered)
    return {
        "evidence_share": round(share, 4),
        "evidence_whole": share >= WHOLE_SHARE,
        "evidence_readable": share >= READABLE_SHARE or words >= READABLE_WORDS,
    }


def window_metrics(window: Window, question: Question, evidence_texts: Sequence[str] = ()) -> dict[str, Any]:
    """Evidence, knowledge-update and abstention fields of one (question, window) row.

    An evidence turn counts as present when the turn itself, or any fact carved from it (the fact's
    message_id is the turn id), is in the window; a turn clipped to its end counts (rows list the
    clipped ids, so a stricter figure can be recomputed).
    """
    present = {item.turn_id for item in window.items}
    row: dict[str, Any] = {"tokens": window.tokens, "items": len(window.items)}

    evidence = list(question.evidence_ids)
    if evidence and not question.abstention:
        found = [e for e in evidence if e in present]
        row.update(
            evidence_found=found,
            hit_any=bool(found),
            hit_all=len(found) == len(evidence),
        )
        row.update(evidence_in_reach(window.text, evidence_texts))
    else:
        row.update(evidence_found=[], hit_any=None, hit_all=None)

    if question.current_ids and question.stale_ids:
        current_rank = _first_priority(window, question.current_ids)
        stale_rank = _first_priority(window, question.stale_ids)
        stale_items = [i for i in window.items if i.turn_id in set(question.stale_ids)]
        current_turns = set(question.current_ids)
        stale_as_current = any(not i.marked_outdated for i in stale_items)
        # a stale turn cut into several facts: its stale value marked, a sibling fact ("git checkout
        # main", a request about something else) rightly not. Per turn: none of its facts is marked.
        stale_turns: dict[str, bool] = {}
        for item in stale_items:
            stale_turns[item.turn_id] = stale_turns.get(item.turn_id, False) or item.marked_outdated
        row.update(
            ku_current_present=current_rank is not None,
            ku_stale_present=stale_rank is not None,
            ku_stale_as_current=stale_as_current,
            ku_stale_turn_unmarked=not all(stale_turns.values()),
            # the value true now shown only as outdated: a look-alike or a wrong edge flagged it
            ku_current_marked=current_rank is not None
            and all(i.marked_outdated for i in window.items if i.turn_id in current_turns),
            # both values shown, and the window tells which is later: every line of the stale one
            # marked (and none of the current one), or no line of either said when a line of the
            # other was, nor only the day or minute it was said in (a reader told "the later one
            # holds" needs to see which is later)
            ku_told_apart=_told_apart(stale_items, [i for i in window.items if i.turn_id in current_turns])
            if current_rank is not None and stale_rank is not None
            else None,
            ku_current_rank=current_rank,
            ku_stale_rank=stale_rank,
            # current ranked above stale: the current value is in the window and the stale one is either
            # absent or chosen later
            ku_current_above_stale=current_rank is not None
            and (stale_rank is None or current_rank < stale_rank),
        )
    best = None if window.best_score is None else round(window.best_score, 4)
    words = answer_words(window, question)
    coverage = word_coverage(window, question)
    row.update(
        nothing_relevant=window.nothing_relevant,
        best_score=best,
        word_coverage=None if coverage is None else round(coverage, 4),
        answer_words=None if words is None else round(words, 4),
    )
    return row


def _told_apart(stale: Sequence[WindowItem], current: Sequence[WindowItem]) -> bool:
    if all(i.marked_outdated for i in stale) and not any(i.marked_outdated for i in current):
        return True
    return all(_ordered(a.said, b.said) for a in stale for b in current)


def _ordered(a: str | None, b: str | None) -> bool:
    """Whether two lines' stamps say which was said first: both say a time, and neither says only
    the day (or minute) the other was said in ("7 Feb 2024" against "7 Feb 2024 00:05", "00:05"
    against "00:05:40" order nothing)."""
    return a is not None and b is not None and not (a.startswith(b) or b.startswith(a))


def _mean(values: Iterable[float | bool | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def auroc(scores_positive: Sequence[float], scores_negative: Sequence[float]) -> float | None:
    """P(a positive outranks a negative), ties counted half: threshold-free, comparable across arms."""
    if not scores_positive or not scores_negative:
        return None
    wins = 0.0
    for p in scores_positive:
        for n in scores_negative:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(scores_positive) * len(scores_negative))


def _doubt(row: dict[str, Any]) -> float:
    """How strongly a row suggests memory holds nothing: minus its best score (nothing found: highest)."""
    best = row.get("best_score")
    return float("inf") if best is None else -float(best)


def _uncovered(row: dict[str, Any]) -> float:
    """How little of the question the window mentions: minus its word coverage."""
    coverage = row.get("word_coverage")
    return 0.0 if coverage is None else -float(coverage)


def _percentiles(values: Sequence[float]) -> list[float]:
    """Each value's mean rank among `values`, scaled to 0..1 (ties share their rank)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    top = max(len(values) - 1, 1)
    return [r / top for r in ranks]


def abstention_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Precision and recall of the "nothing relevant" signal for unanswerable questions.

    Positives are the unanswerable questions. Arms with no signal (tail, full) get None. The AUROCs
    rank questions, independently of where any arm puts its floor, by: the best retrieval score
    (lower = more likely unanswerable); the share of the question's content words the window
    contains (`word_coverage`); and both, as the mean of their percentile ranks among the group.
    """
    signalled = [r for r in rows if r.get("nothing_relevant") is not None]
    if not signalled:
        return {
            "abstain_precision": None,
            "abstain_recall": None,
            "abstain_auroc": None,
            "abstain_auroc_coverage": None,
            "abstain_auroc_both": None,
            "abstain_n": 0,
        }
    tp = sum(1 for r in signalled if r["nothing_relevant"] and r["abstention"])
    fp = sum(1 for r in signalled if r["nothing_relevant"] and not r["abstention"])
    fn = sum(1 for r in signalled if not r["nothing_relevant"] and r["abstention"])
    positive = [bool(r["abstention"]) for r in signalled]

    def separation(doubt: Sequence[float]) -> float | None:
        return auroc(
            [d for d, p in zip(doubt, positive, strict=True) if p],
            [d for d, p in zip(doubt, positive, strict=True) if not p],
        )

    by_score = [_doubt(r) for r in signalled]
    by_coverage = [_uncovered(r) for r in signalled]
    both = [(a + b) / 2 for a, b in zip(_percentiles(by_score), _percentiles(by_coverage), strict=True)]
    return {
        "abstain_precision": tp / (tp + fp) if tp + fp else None,
        "abstain_recall": tp / (tp + fn) if tp + fn else None,
        "abstain_auroc": separation(by_score),
        "abstain_auroc_coverage": separation(by_coverage),
        "abstain_auroc_both": separation(both),
        "abstain_n": sum(positive),
        "abstain_signalled": tp + fp,
    }


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every model-free figure for one (dataset, arm, budget) group of rows."""
    ku = [r for r in rows if "ku_current_present" in r]
    figures: dict[str, Any] = {
        "questions": len(rows),
        "evidence_n": sum(1 for r in rows if r.get("hit_any") is not None),
        "recall_any": _mean(r.get("hit_any") for r in rows),
        "recall_all": _mean(r.get("hit_all") for r in rows),
        # rows from before the figure existed carry none: left out
        "readable_n": sum(1 for r in rows if r.get("evidence_readable") is not None),
        "evidence_readable": _mean(r.get("evidence_readable") for r in rows),
        "evidence_whole": _mean(r.get("evidence_whole") for r in rows),
        "ku_n": len(ku),
        "ku_current_present": _mean(r["ku_current_present"] for r in ku),
        "ku_stale_as_current": _mean(r["ku_stale_as_current"] for r in ku),
        # rows from before the per-turn figure existed carry none: left out, not counted as marked
        "ku_stale_turn_unmarked": _mean(r.get("ku_stale_turn_unmarked") for r in ku),
        "ku_both_unmarked": _mean(r["ku_current_present"] and r["ku_stale_as_current"] for r in ku),
        "ku_current_above_stale": _mean(r["ku_current_above_stale"] for r in ku),
        "ku_current_marked": _mean(r.get("ku_current_marked") for r in ku),
        # of the knowledge updates with both values shown (rows from before the figure: none)
        "ku_told_apart": _mean(r.get("ku_told_apart") for r in ku),
        "ku_both_n": sum(1 for r in ku if r.get("ku_told_apart") is not None),
        "answer_words": _mean(r.get("answer_words") for r in rows),
        "answer_n": sum(1 for r in rows if r.get("answer_words") is not None),
        "tokens_mean": _mean(r.get("tokens") for r in rows),
        "tokens_max": max((r.get("tokens") or 0 for r in rows), default=0),
    }
    figures.update(abstention_figures(rows))
    figures.update(reader_figures(rows))
    graded = [r for r in rows if r.get("correct") is not None]
    figures["graded_n"] = len(graded)
    figures["accuracy"] = _mean(r["correct"] for r in graded)
    return figures


def is_answered(row: dict[str, Any]) -> bool:
    """Whether the reader answered this row: its scores are there (the answer's text may not be: the
    committed snapshot leaves it out, bench.eval.runner.DATA_TEXT_FIELDS)."""
    return "reader_not_mentioned" in row


def reader_figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the reader's answers score (bench.eval.answer_scores), over the rows it answered.

    F1 and exact match over the answerable questions they apply to; "not mentioned" as the answer to
    unanswerable questions (right) and to answerable ones (a miss); for knowledge updates with both
    values known, the share of answers naming the current value only, the stale one only, both, or
    neither.
    """
    answered = [r for r in rows if is_answered(r)]
    updates = [r["reader_update"] for r in answered if r.get("reader_update") is not None]
    unanswerable = [r for r in answered if r.get("abstention")]
    answerable = [r for r in answered if not r.get("abstention")]

    def share(label: str) -> float | None:
        return sum(u == label for u in updates) / len(updates) if updates else None

    return {
        "reader_n": len(answered),
        "reader_errors": sum(1 for r in rows if r.get("answer_error")),
        "reader_f1": _mean(r.get("reader_f1") for r in answered),
        "reader_f1_n": sum(1 for r in answered if r.get("reader_f1") is not None),
        "reader_em": _mean(r.get("reader_em") for r in answered),
        "reader_em_n": sum(1 for r in answered if r.get("reader_em") is not None),
        "reader_abstained": _mean(r.get("reader_not_mentioned") for r in unanswerable),
        "reader_abstained_n": len(unanswerable),
        "reader_missed": _mean(r.get("reader_not_mentioned") for r in answerable),
        "reader_update_n": len(updates),
        "reader_current": share("current"),
        "reader_stale": share("stale"),
        "reader_both": share("both"),
        "reader_neither": share("neither"),
        "reader_seconds": _mean(r.get("answer_seconds") for r in answered),
        "reader_seconds_total": sum(float(r.get("answer_seconds") or 0) for r in answered),
    }
