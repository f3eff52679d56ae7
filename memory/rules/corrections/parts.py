"""Which parts of an earlier claim a correction leaves standing.

Capture splits a message into claims, but some claims still hold several ("Budget is $100k per year,
self-hostable, and SOC 2 compliant."; "We have a $100k budget and a team of 5 engineers."). A
correction of one of them ("Correction: the budget is $120k per year.") must not retire the others:
that is one edge retiring every constraint that shared a row. So when the judge says a correction
replaces such a claim, `standing(old, new)` names the parts of `old` it does not touch, for capture
to keep as facts of their own.

A part is a stretch of the claim between commas, semicolons, dashes, or "and" / "but" / "while" /
"plus". The correction addresses a part when the judge says it replaces that part alone, or when the
part states a value of a kind the correction states too (a stale "at 10am" beside "the meeting is on
Monday" when the meeting moved to "Tuesday at 11am"). Where no part is addressed on its own (the
changed slot spans the cuts), nothing stands apart and the whole claim is replaced as before. Pure
functions of the two texts.
"""

from __future__ import annotations

import re

from memory.rules.corrections.claims import content
from memory.rules.corrections.stated_values import values
from memory.rules.corrections.verdicts import judge

# where a claim that lists several things may be cut: punctuation between items, and the
# conjunctions that join two statements (the word itself goes with the part after it)
_CUTS = re.compile(r"\s*[,;]\s+|\s+[-–—]+\s+|\s+(?=(?:and|but|while|whereas|plus)\s)", re.IGNORECASE)
_LEADING_JOINER = re.compile(r"^(?:and|but|while|whereas|plus|also)\s+", re.IGNORECASE)
_TRAILING = " \t,;:-–—"


def parts(text: str) -> list[tuple[int, int]]:
    """The spans of `text` between its cuts, without the punctuation around them."""
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in _CUTS.finditer(text):
        spans.append((start, cut.start()))
        start = cut.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip(_TRAILING)]


def standing(old: str, new: str) -> list[tuple[int, int]]:
    """The spans of `old` that `new`, a correction the judge accepted for the whole of `old`, leaves
    standing: maximal runs of parts it does not address that still name something. Empty where `old`
    has one part, or where no part is addressed on its own."""
    spans = parts(old)
    if len(spans) < 2:
        return []
    new_kinds = {v.kind for v in values(new)}
    addressed = [
        judge(old[a:b], new).supersedes or bool(new_kinds & {v.kind for v in values(old[a:b])})
        for a, b in spans
    ]
    if not any(addressed):
        return []
    runs: list[tuple[int, int]] = []
    run: tuple[int, int] | None = None
    for (a, b), hit in zip(spans, addressed, strict=True):
        if hit:
            if run is not None:
                runs.append(run)
            run = None
        else:
            run = (a, b) if run is None else (run[0], b)
    if run is not None:
        runs.append(run)
    return [_trimmed(old, a, b) for a, b in runs if content(_LEADING_JOINER.sub("", old[a:b]))]


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without a joining word before it or punctuation after it ("and SOC 2 compliant." keeps
    its full stop, "self-hostable," loses the comma)."""
    piece = text[start:end]
    lead = _LEADING_JOINER.match(piece)
    if lead:
        start += lead.end()
    while end > start and text[end - 1] in _TRAILING:
        end -= 1
    return start, end
