"""Scores of a reader's answer that need no judge: LoCoMo's token F1 and exact match, "not mentioned",
and, for knowledge updates, whether the answer names the current value, the stale one, both or neither.

F1 and exact match follow LoCoMo's own evaluation (snap-research/LoCoMo `task_eval/evaluation.py`,
Maharana et al., ACL 2024): commas dropped, lowercased, punctuation and the words a/an/the/and removed;
F1 over the remaining tokens; exact match = the same set of tokens; a multi-hop reference is split at
commas (each part scored against the best-matching part of the answer, then averaged); an open-domain
reference keeps its part before the first ";"; an adversarial (unanswerable) question is right when the
answer says "not mentioned" or "no information available". One difference: LoCoMo stems each token
with nltk's Porter stemmer, which this project does not depend on, so "plays" and "play" differ here
and F1 reads a little lower than LoCoMo's own on the same answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from bench.eval.conversation import Question

UpdateAnswer = Literal["current", "stale", "both", "neither"]

# LoCoMo's evaluation counts a reference this short (in normalised tokens) as a short answer
SHORT_ANSWER_TOKENS = 5
NOT_MENTIONED = ("not mentioned", "no information available")

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: commas out, lowercase, punctuation out, a/an/the/and out, spaces folded."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the normalised tokens the prediction shares with the reference (counts clipped)."""
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(reference).split()
    same = sum((Counter(predicted) & Counter(wanted)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(wanted)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, reference: str) -> float:
    """LoCoMo's multi-hop F1: each comma-separated part of the reference against its best part of the
    prediction, averaged over the reference's parts."""
    predictions = [p.strip() for p in prediction.split(",")]
    parts = [r.strip() for r in reference.split(",")]
    return sum(max(token_f1(p, part) for p in predictions) for part in parts) / len(parts)


def exact_match(prediction: str, reference: str) -> bool:
    """LoCoMo's exact match: the same set of normalised tokens."""
    return set(normalize_answer(prediction).split()) == set(normalize_answer(reference).split())


def says_not_mentioned(answer: str) -> bool:
    lowered = answer.lower()
    return any(phrase in lowered for phrase in NOT_MENTIONED)


def scored_reference(question: Question) -> str | None:
    """The reference F1 is computed against, or None where F1 says nothing: unanswerable questions and
    rubric-graded ones (preferences, instructions, summaries), whose reference is not an answer."""
    if question.abstention or question.judge_prompt == "preference" or not question.reference.strip():
        return None
    if question.type == "open-domain":  # LoCoMo keeps the part before the first ";"
        return question.reference.split(";")[0].strip()
    return question.reference


def answer_f1(answer: str, question: Question) -> float | None:
    reference = scored_reference(question)
    if reference is None:
        return None
    if question.type == "multi-hop":
        return multi_answer_f1(answer, reference)
    return token_f1(answer, reference)


def short_exact_match(answer: str, question: Question) -> bool | None:
    """Exact match where the reference is short (at most SHORT_ANSWER_TOKENS tokens); None elsewhere."""
    reference = scored_reference(question)
    if reference is None or len(normalize_answer(reference).split()) > SHORT_ANSWER_TOKENS:
        return None
    return exact_match(answer, reference)


# -- knowledge updates: which value the answer names --------------------------------------------------

_MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
# words between a number and what it counts ("12 more problems", "10 new cards"): skipped for its unit
_UNIT_FILLER = frozenset(
    [
        "more",
        "new",
        "additional",
        "extra",
        "total",
        "of",
        "in",
        "over",
        "about",
        "around",
        "per",
        "a",
        "an",
        "the",
    ]
)
_UNIT_WORDS = 3  # words after a number read as what it counts
_YEAR = re.compile(r"(?:19|20)\d\d")
_TOKEN = re.compile(r"\$?\d[\d,.:]*%?|[a-z]+")


def _tokens(text: str) -> list[str]:
    """Words and numbers, numbers kept with their $ / % / : ("$95,000", "87%", "4:30")."""
    out = []
    for raw in _TOKEN.findall(text.lower()):
        token = raw.rstrip(".,:")
        out.append(_NUMBER_WORDS.get(token, token))
    return [t for t in out if t]


def _is_number(token: str) -> bool:
    return token[0].isdigit() or token[0] == "$"


def _number(token: str) -> str:
    """The number itself: "$95,000" -> "95000", "87%" -> "87", "4:30" -> "4:30"."""
    return token.lstrip("$").rstrip("%").replace(",", "")


def _unit(tokens: Sequence[str], i: int) -> tuple[str, ...]:
    """What the number at `i` measures: a money / percent / time / date mark, else the next few words,
    nearest first ("150 commits" -> ("commit",), "12 conditional probability problems" ->
    ("conditional", "probability", "problem")); empty when nothing says."""
    token = tokens[i]
    if token.startswith("$"):
        return ("$",)
    if token.endswith("%") or (i + 1 < len(tokens) and tokens[i + 1] == "percent"):
        return ("%",)
    if ":" in token or (i + 1 < len(tokens) and tokens[i + 1] in ("am", "pm")):
        return ("time",)
    if i > 0 and tokens[i - 1] in _MONTHS:
        return ("date",)
    words: list[str] = []
    for word in tokens[i + 1 : i + 1 + _UNIT_WORDS]:
        if _is_number(word):
            break
        if word not in _UNIT_FILLER:
            words.append(word.removesuffix("s"))
    return tuple(words)


def _quantities(text: str) -> list[tuple[str, tuple[str, ...], str]]:
    """(number, unit, span as written) for each number in `text`."""
    tokens = _tokens(text)
    out = []
    for i, token in enumerate(tokens):
        if not _is_number(token):
            continue
        unit = _unit(tokens, i)
        if "date" in unit:
            span = f"{tokens[i - 1]} {token}"
        elif unit in (("$",), ("%",)) or not unit or i + 1 >= len(tokens):
            span = token
        else:
            span = f"{token} {tokens[i + 1]}"
        out.append((_number(token), unit, span))
    return out


def stale_values_from(
    current_values: Sequence[str], stale_texts: Iterable[str], reference: str = ""
) -> tuple[str, ...]:
    """The replaced values a stale message states, found by what the current value measures: a
    number in the stale message that measures the same thing as one in the current value ("150
    commits" beside "165 commits", "April 20" beside "April 25", "8 cards" beside "10 project
    cards") and is a different number. A current number written bare ("12") takes its unit from the
    reference answer ("12 conditional probability problems"). A value whose unit the stale message
    never mentions gives none, and the question then has no stale value to name."""
    from_reference = {number: unit for number, unit, _ in _quantities(reference) if unit}
    units: set[str] = set()  # any word near a current number; a stale number's nearest word must be one
    current_numbers: set[str] = set()
    for value in current_values:
        for number, unit, _ in _quantities(value):
            current_numbers.add(number)
            units.update(unit or from_reference.get(number, ()))
    found: list[str] = []
    for text in stale_texts:
        for number, unit, span in _quantities(text):
            if number.count(".") > 1 or number in current_numbers or span in found:
                continue  # a version ("5.3.0") measures nothing
            if unit and unit[0] in units:
                found.append(span)
    return tuple(found)


def _numbers(text: str) -> set[str]:
    return {_number(t) for t in _tokens(text) if _is_number(t)}


def _words(text: str) -> set[str]:
    from bm25s.stopwords import STOPWORDS_EN  # the word lists answer_words uses

    return {t for t in _tokens(text) if not _is_number(t) and t not in STOPWORDS_EN}


def names_value(answer: str, value: str, others: Sequence[str]) -> bool:
    """Whether the answer states `value` rather than only what it shares with `others`: every number
    of the value that the others lack is in the answer; a value without such numbers ("Mrs. Okafor"),
    every word it has and the others lack."""
    other_numbers = set().union(*(_numbers(o) for o in others)) if others else set()
    numbers = _numbers(value) - other_numbers
    # "April 5, 2024" is named by "April 5": a year counts only where it is all the value says
    numbers = {n for n in numbers if not _YEAR.fullmatch(n)} or numbers
    if numbers:
        return numbers <= _numbers(answer)
    other_words = set().union(*(_words(o) for o in others)) if others else set()
    words = _words(value) - other_words
    return bool(words) and words <= _words(answer)


def update_answer(
    answer: str, current_values: Sequence[str], stale_values: Sequence[str]
) -> UpdateAnswer | None:
    """Which value a knowledge-update answer names: the current one, the stale one, both, or neither.
    None when either value is unknown (nothing to tell apart)."""
    if not current_values or not stale_values:
        return None
    current = any(names_value(answer, v, stale_values) for v in current_values)
    stale = any(names_value(answer, v, current_values) for v in stale_values)
    return "both" if current and stale else "current" if current else "stale" if stale else "neither"


def answer_scores(answer: str, question: Question) -> dict[str, Any]:
    """The row fields of one reader answer (None where a score does not apply to the question)."""
    f1 = answer_f1(answer, question)
    return {
        "reader_f1": None if f1 is None else round(f1, 4),
        "reader_em": short_exact_match(answer, question),
        "reader_not_mentioned": says_not_mentioned(answer),
        "reader_update": update_answer(answer, question.current_values, question.stale_values),
    }
