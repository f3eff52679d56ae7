"""The words around each value, read fast, are the words the plain reading finds: a long message's
claims are read once per value, and the plain reading was quadratic in their length."""

from __future__ import annotations

import random

import pytest

from memory.rules.corrections import alignment
from memory.rules.corrections.claims import clause_bounds, parse
from memory.rules.corrections.vocabulary import WORD, Spans, outside

WORDS = ["budget", "API", "x-ray", "we're", "C++", "v2.1", "rate", "e.g.", "Q3", "a", "is", "now", "up"]
VALUES = ["$120k", "40 connections", "March 14", "25:50", "3.5%", "v5.3.0", "seven", "Redis", "eu-west-1"]


def _plain_reading(body: str, lo: int, end: int, spans: list[tuple[int, int]], n: int) -> list[str]:
    """The reading `_last_words` stands for: every word of the range, the last `n` kept."""
    return [w.group(0) for w in outside(WORD.finditer(body, lo, end), spans)][-n:]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        pieces = [rng.choice(WORDS + VALUES) for _ in range(rng.randint(1, 120))]
        glue = [rng.choice([" ", " ", " ", ", ", "-", "", ". ", "\n"]) for _ in pieces]
        texts.append("".join(p + g for p, g in zip(pieces, glue, strict=True)))
    return texts


@pytest.mark.parametrize("seed", range(4))
def test_the_last_words_before_a_value_are_the_plain_readings(seed: int) -> None:
    for text in _texts(seed, 150):
        claim = parse(text)
        spans = [(v.start, v.end) for v in claim.values if v.kind != "name"]
        for value in claim.values:
            lo, _ = clause_bounds(text, value)
            for n in (1, 6, 40):
                fast = alignment._last_words(text, lo, value.start, Spans.of(spans), n)
                assert [w.group(0) for w in fast] == _plain_reading(text, lo, value.start, spans, n)


def test_a_word_cut_by_the_reading_start_is_never_among_the_words_returned() -> None:
    # the tail read first starts inside the long word; fewer than n words after it: it reads further
    text = "alpha " + "b" * 300 + " gamma delta 7 kg"
    value = next(v for v in parse(text).values if v.text.startswith("7"))
    words = alignment._last_words(text, 0, value.start, Spans.of([]), 3)
    assert [w.group(0) for w in words] == ["b" * 300, "gamma", "delta"]


def test_a_position_is_inside_a_span_from_its_start_to_before_its_end() -> None:
    covered = Spans.of([(10, 20), (12, 14), (30, 31)])
    assert [p for p in range(0, 35) if covered.covers(p)] == [*range(10, 20), 30]
    assert not Spans.of([]).covers(0)


def test_each_values_slot_words_are_what_they_were() -> None:
    # values close together: each one's words stop at the others
    claim = parse("Our API budget is now $120k, up from $100k, with 40 connections in eu-west-1.")
    slots = {v.text: sorted(alignment._context(claim, v)) for v in claim.values}
    assert slots == {
        "API": ["budget"],
        "$120k": ["api", "budget", "connection"],
        "$100k": ["api", "budget", "connection"],
        "40": ["budget", "connection"],
        "eu-west-1": ["connection"],
    }
