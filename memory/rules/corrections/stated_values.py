"""The values a claim states, read from its text: what a correction changes.

A correction gives something another value: an amount, a number with its unit, a share, a date or a
time, a version, a code ("eu-west-1"), a name (a capitalised word inside a sentence). `values` finds
each with its kind and a normal form: the kind says what may replace it (a time replaces a time, a
count of days a count of days, an amount any number), the normal form when two values are the same
one ("$1.6k" and "$1,600", "half past four" and "4:30", "7pm" and "at 7"). Units, periods and
measures ("mg", "a month") make two values comparable without naming what they are values of, so
the slot rules (memory.rules.corrections.alignment) set them apart: `MEASURES`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from memory.rules.corrections.vocabulary import SELF, STOP, WORD, Spans, stem, word_set


@dataclass(frozen=True, slots=True)
class Value:
    """A value a claim states: `kind` says what may replace it, `norm` what makes two values equal."""

    kind: str  # money, percent, quantity:<unit>, number, time, date, version, name
    text: str
    norm: str
    start: int
    end: int


_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_WEEKDAYS = (
    "monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun"
)
_UNITS = {
    # unit spelling -> family; two quantities align only within one family
    **dict.fromkeys(["ms", "millisecond", "milliseconds", "msec"], "ms"),
    **dict.fromkeys(["s", "sec", "secs", "second", "seconds"], "s"),
    **dict.fromkeys(["min", "mins", "minute", "minutes"], "min"),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], "h"),
    **dict.fromkeys(["day", "days"], "day"),
    **dict.fromkeys(["week", "weeks", "wk", "wks"], "week"),
    **dict.fromkeys(["month", "months", "mo"], "month"),
    **dict.fromkeys(["year", "years", "yr", "yrs"], "year"),
    **dict.fromkeys(["km", "kilometer", "kilometers", "kilometre", "kilometres", "k"], "km"),
    **dict.fromkeys(["mi", "mile", "miles"], "mi"),
    **dict.fromkeys(["m", "meter", "meters", "metre", "metres"], "m"),
    **dict.fromkeys(["kg", "kgs", "kilo", "kilos", "kilogram", "kilograms"], "kg"),
    **dict.fromkeys(["lb", "lbs", "pound", "pounds"], "lb"),
    **dict.fromkeys(["kb", "mb", "gb", "tb"], "bytes"),
    **dict.fromkeys(["gib", "mib", "tib"], "bytes"),
    **dict.fromkeys(
        ["people", "persons", "engineers", "developers", "members", "users", "employees", "seats"], "people"
    ),
    **dict.fromkeys(["commits", "branches", "tests", "requests", "rps", "qps", "tickets"], "count"),
}
_NUMBER = r"\d+(?:[.,]\d+)*"
_CLOCK = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_CLOCK_WORDS = "|".join(_CLOCK)
_SCALE = r"(?:k|m|bn|b|million|billion|thousand|mil)\b"
_VALUE = re.compile(
    r"(?P<money>(?:[$€£¥]\s?" + _NUMBER + r"(?:\s?" + _SCALE + r")?)|(?:" + _NUMBER + r"\s?"
    r"(?:" + _SCALE + r"\s?)?(?:dollars|euros|usd|eur|gbp|pounds sterling|bucks)\b))"
    r"|(?P<time>\b\d{1,2}(?::\d{2}){1,2}\s?(?:am|pm|a\.m\.|p\.m\.)?(?![\w:])|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)"
    r"(?!\w)|\b(?:noon|midnight)\b|\b(?:quarter|half)\s+(?:past|to)\s+(?:\d{1,2}|" + _CLOCK_WORDS + r")\b"
    r"|\b(?:\d{1,2}|" + _CLOCK_WORDS + r")\s+o'?clock\b)"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:"
    + "|".join(_MONTHS.split())
    + r")\.?"
    # a date's year is part of it: "March 12, 2024" / "May 2, 2024" share no value, only a year
    r"\s+\d{1,2}(?:st|nd|rd|th)?\b(?:,?\s+(?:19|20)\d{2}\b)?|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:"
    + "|".join(_MONTHS.split())
    + r")\b(?:,?\s+(?:19|20)\d{2}\b)?"
    r"|\b(?:" + "|".join(_WEEKDAYS.split()) + r")s?\b|\b(?:" + "|".join(_MONTHS.split()[:12]) + r")\b)"
    r"|(?P<version>\bv\d+(?:\.\d+)*\b|\b\d+\.\d+\.\d+\b|(?<=version )\d+(?:\.\d+)*\b)"
    # a token of letters and digits: a password, a region, a model ("maple-87", "eu-west-1")
    r"|(?P<code>\b[a-z][a-z-]*\d[\w-]*\b)"
    r"|(?P<percent>\b" + _NUMBER + r"\s?(?:%|percent\b))"
    r"|(?P<quantity>\b" + _NUMBER + r"\s?(?P<unit>[a-z]+)\b)"
    r"|(?P<number>\b" + _NUMBER + r"\b)",
    re.I,
)


# Where a value can start: a digit or a currency sign, a word with a digit in it (a code), or a word
# that can open a time or a date. Searched in the lowered text: the same alternation under IGNORECASE
# costs about four times as much, and `_VALUE` tried at every position of a long message was most
# of what reading its values took.
_VALUE_START = re.compile(
    r"[\d$€£¥]|\b(?:[a-z][a-z-]*\d|"
    + "|".join(
        sorted(
            {*_MONTHS.split(), *_WEEKDAYS.split(), *_CLOCK, "noon", "midnight", "quarter", "half"},
            key=len,
            reverse=True,
        )
    )
    + ")"
)


def _value_matches(text: str) -> Iterator[re.Match[str]]:
    """What `_VALUE.finditer(text)` finds, trying `_VALUE` only where a value can start."""
    lowered = text.lower()
    if len(lowered) != len(text) or "ſ" in text:
        # lowering moved characters ("İ" is two in lower case), or left one that IGNORECASE reads as
        # a letter of [a-z] ("ſ"): the positions would not line up
        yield from _VALUE.finditer(text)
        return
    at = 0
    while (start := _VALUE_START.search(lowered, at)) is not None:
        match = _VALUE.match(text, start.start())
        if match is None:
            at = start.start() + 1
            continue
        yield match
        at = match.end()


def _norm_number(text: str) -> float | None:
    digits = text.replace(",", "")
    try:
        return float(digits)
    except ValueError:
        return None


def _money_norm(text: str) -> str:
    lowered = text.lower()
    match = re.search(_NUMBER, lowered)
    amount = _norm_number(match.group(0)) if match else None
    if amount is None:
        return lowered
    scale = re.search(r"(?<=\d)\s?(k|m|bn|b|million|billion|thousand|mil)\b", lowered)
    factor = {
        "k": 1e3,
        "thousand": 1e3,
        "m": 1e6,
        "million": 1e6,
        "mil": 1e6,
        "b": 1e9,
        "bn": 1e9,
        "billion": 1e9,
    }.get(scale.group(1) if scale else "", 1.0)
    return f"{amount * factor:g}"


def _time_norm(text: str) -> str:
    # "half past four" is 4:30, "quarter to three" 2:45, "seven o'clock" 7:00
    in_words = re.fullmatch(r"(quarter|half)\s+(past|to)\s+(\w+)|(\w+)\s+o'?clock", text.lower())
    if in_words:
        hour_text = in_words[3] or in_words[4]
        hour = int(hour_text) if hour_text.isdigit() else _CLOCK.index(hour_text) + 1
        if in_words[4]:
            return f"{hour}:00"
        minutes = 30 if in_words[1] == "half" else 15
        if in_words[2] == "to":
            hour, minutes = (hour - 2) % 12 + 1, 60 - minutes
        return f"{hour}:{minutes:02d}"
    lowered = text.lower().replace(".", "").replace(" ", "")
    match = re.match(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?(am|pm)?$", lowered)
    if not match:
        return lowered
    hour, minute, second, half = int(match[1]), match[2] or "00", match[3] or "", match[4]
    if half == "pm" and hour < 12:
        hour += 12
    if half == "am" and hour == 12:
        hour = 0
    return f"{hour}:{minute}" + (f":{second}" if second else "")


_YEAR = re.compile(r",?\s+(?:19|20)\d{2}$")
_AT = re.compile(r"\bat\s+$", re.I)
_MERIDIEM = re.compile(r"am|pm|a\.m|p\.m|noon|midnight", re.I)


def values(text: str) -> list[Value]:
    """The values `text` states, in order: what a later claim could change."""
    found: list[Value] = []
    for match in _value_matches(text):
        kind = match.lastgroup if match.lastgroup != "unit" else "quantity"
        raw = match.group(0).strip()
        if kind == "quantity":
            unit = (match.group("unit") or "").lower()
            family = _UNITS.get(unit)
            number = re.match(_NUMBER, raw)
            n = _norm_number(number.group(0)) if number else None
            if unit == "k" and n is not None and not (raw.endswith("K") and n <= 50):
                # "72k a year", "10k steps": thousands, comparable with "$80,000" and "8,000"; a "5K"
                # or "10K" is a race's kilometres
                found.append(Value("number", raw, f"{n * 1000:g}", match.start(), match.end()))
                continue
            if family is None or number is None:
                # "3 engineers" with an unknown unit: the number alone, its word stays in the slot
                kind, raw = "number", number.group(0) if number else raw
                found.append(
                    Value("number", raw, raw.replace(",", ""), match.start(), match.start() + len(raw))
                )
                continue
            found.append(
                Value(
                    f"quantity:{family}", raw, f"{_norm_number(number.group(0))}", match.start(), match.end()
                )
            )
            continue
        if kind == "money":
            norm = _money_norm(raw)
        elif kind == "time":
            norm = _time_norm(raw)
        elif kind in ("number", "percent"):
            leading = re.match(_NUMBER, raw)
            n = _norm_number(leading.group(0)) if leading else None
            norm = raw.lower() if n is None else f"{n:g}"
        elif kind == "date":
            # the year goes: "March 12, 2024" is the same day as "March 12"
            norm = _YEAR.sub("", raw.lower()).rstrip(".").strip()
        elif kind == "version":
            norm = raw.lower().lstrip("v")  # "v5.3.0" is "5.3.0"
        else:
            norm = raw.lower().rstrip(".")
        found.append(Value(kind or "number", raw, norm, match.start(), match.end()))
    found.extend(_number_words(text, found))
    found.extend(_names(text, found))
    return sorted((_as_hour(text, v) for v in found), key=lambda v: v.start)


@functools.lru_cache(maxsize=8192)  # capture asks it twice of each new fact
def names_a_value(text: str) -> bool:
    """Whether `text` names any value (memory.graph.restatements: what an echo must carry)."""
    return bool(values(text))


def _as_hour(text: str, value: Value) -> Value:
    """ "Game night starts at 7 now": a bare number from 1 to 12 after "at" is an hour."""
    hour = value.kind == "number" and value.norm.isdigit() and 1 <= int(value.norm) <= 12
    if hour and _AT.search(text[max(0, value.start - 4) : value.start]):
        return Value("time", value.text, f"{int(value.norm)}:00", value.start, value.end)
    return value


_NUMBER_WORDS = {
    w: n
    for n, w in enumerate(_CLOCK, start=1)
    if n >= 2  # "one" is a pronoun as often as a count: "the one I use"
} | {"dozen": 12}
_TENS = {
    w: 10 * n
    for n, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2
    )
}
_NUMBER_WORD = re.compile(
    r"\b(?:a\s+)?(?:("
    + "|".join(_TENS)
    + r")(?:-("
    + "|".join(_CLOCK[:9])
    + r"))?\b(?!-)|("
    + "|".join(_NUMBER_WORDS)
    + r")\b(?!-)|a (couple) of\b)",
    re.I,
)


def _number_words(text: str, taken: Iterable[Value]) -> list[Value]:
    """Counts written as words ("three kids", "down to six"): the number a digit would have said."""
    spans = Spans.of((v.start, v.end) for v in taken)
    found = []
    for m in _NUMBER_WORD.finditer(text):
        start = next(m.start(group) for group in (1, 3, 4) if m[group])
        if spans.covers(start):
            continue
        if m[1]:  # "seventy-five"
            n = _TENS[m[1].lower()] + (_CLOCK.index(m[2].lower()) + 1 if m[2] else 0)
        else:
            n = 2 if m[4] else _NUMBER_WORDS[m[3].lower()]
        # "four hours" is a quantity, as "4 hours" is
        unit = _UNIT_AFTER.match(text, m.end())
        family = _UNITS.get(unit[1].lower()) if unit else None
        if unit and family:
            found.append(
                Value(f"quantity:{family}", text[start : unit.end()], f"{float(n)}", start, unit.end())
            )
        else:
            found.append(Value("number", m.group(0), str(n), start, m.end()))
    return found


_UNIT_AFTER = re.compile(r"\s([a-z]+)\b", re.I)


def _names(text: str, taken: Iterable[Value]) -> list[Value]:
    """Capitalised words inside a sentence (not its first word): products, places, people, companies."""
    spans = Spans.of((v.start, v.end) for v in taken)
    names: list[Value] = []
    for sentence in re.finditer(r"[^.!?\n]+", text):
        words = list(WORD.finditer(sentence.group(0)))
        run: list[re.Match[str]] = []
        for index, word in enumerate(words):
            token = word.group(0)
            capital = token[0].isupper() and token.lower() not in SELF and token.lower() not in STOP
            if (
                capital
                and token.isupper()
                and index > 0
                and _GENERIC_BEFORE.search(sentence.group(0)[: word.start()])
            ):
                capital = False  # "this new RPG", "an API": a kind of thing, not a name
            # the label is looked for only before a capital: sliced off before every word, it was
            # quadratic in a long sentence's length
            if capital and (
                (index > 0 and not _after_label(sentence.group(0), word.start())) or _looks_like_name(token)
            ):
                run.append(word)
                continue
            if run:
                names.append(_name_value(sentence.start(), run))
                run = []
        if run:
            names.append(_name_value(sentence.start(), run))
    return [n for n in names if not spans.covers(n.start) and not _vocative(text, n)]


def _after_label(sentence: str, at: int) -> bool:
    """Whether the last character before `at` that is not a space is a colon ("Note: Redis")."""
    before = at - 1
    while before >= 0 and sentence[before].isspace():
        before -= 1
    return before >= 0 and sentence[before] == ":"


# a name said to someone: "Thanks, Caroline!", "Hey Mel,", "Congrats Jon." (the addressee, not a value)
_VOCATIVE_BEFORE = re.compile(
    r"(?:^|[,;:!?.]\s*|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|dear|yo|bye|"
    r"cheers|sorry|good (?:morning|night|luck))\s*,?\s*)$",
    re.I,
)
_VOCATIVE_AFTER = re.compile(r"^\s*(?:[!?,.]|$)")


_GENERIC_BEFORE = re.compile(r"\b(?:a|an|this|that|these|new|any|some|every)\s+(?:\w+\s+)?$", re.I)


def _vocative(text: str, name: Value) -> bool:
    before, after = text[max(0, name.start - 30) : name.start], text[name.end : name.end + 3]
    return bool(_VOCATIVE_AFTER.match(after)) and bool(_VOCATIVE_BEFORE.search(before))


def _looks_like_name(token: str) -> bool:
    # a first word can still be a name when it cannot be an ordinary capitalised word: "SAP", "PostgreSQL"
    return (
        (token.isupper() and len(token) > 1)
        or any(c.isupper() for c in token[1:])
        or any(c.isdigit() for c in token)
    )


def _name_value(offset: int, run: list[re.Match[str]]) -> Value:
    start, end = offset + run[0].start(), offset + run[-1].end()
    text = " ".join(w.group(0) for w in run)
    return Value("name", text, text.lower(), start, end)


def unit_of(count: Value) -> str:
    """A count's unit as its claim would name it: "150 commits" -> "commit", "four hours" -> "hour"."""
    return stem(re.sub(r"^(?:[\d.,\s]+|[a-z-]+\s+)", "", count.text, flags=re.I))


def unit_words(count: Value) -> frozenset[str]:
    """The words that name what a count counts, stemmed: its own unit, and where its unit's family
    is one thing said in several words, the family's ("9 members" and "people": one club's head
    count). The grab bag of other counts (commits, tests, tickets) names each alone."""
    own = unit_of(count)
    family = count.kind.removeprefix("quantity:")
    if family == count.kind or family == "count":
        return frozenset({own})
    return frozenset({own}) | _FAMILY_WORDS[family]


_FAMILY_WORDS = {
    family: frozenset(stem(unit) for unit, f in _UNITS.items() if f == family and len(unit) > 2)
    for family in set(_UNITS.values())
}


def kind_family(kind: str) -> str:
    # a share changes into a share: "completed 40%" is no earlier "5,000-word draft"
    return "number" if kind in ("number", "money") else kind


def worded(value: Value) -> bool:
    """A count written as a word ("three kids"), not in digits."""
    return value.kind == "number" and value.text[:1].isalpha()


def small(value: Value) -> bool:
    """A count of twenty or less: the size of count people write as a word."""
    return value.kind == "number" and (n := _norm_number(value.norm)) is not None and n <= 20


def same_value(a: Value, b: Value) -> bool:
    """The two are one value: the same normal form, one hour on a 12-hour dial, or one name inside
    the other ("Linear" / "Linear app")."""
    if a.norm == b.norm:
        return True
    if a.kind == b.kind == "time" and not (_MERIDIEM.search(a.text) and _MERIDIEM.search(b.text)):
        # "7pm" and "at 7" are one hour: without am or pm a clock says either
        dial = _on_the_dial(a.norm)
        return dial is not None and dial == _on_the_dial(b.norm)
    if a.kind == b.kind == "name":
        x, y = re.sub(r"\W", "", a.norm), re.sub(r"\W", "", b.norm)
        return bool(x) and bool(y) and (x in y or y in x)
    return False


def same_value_loosely(a: Value, b: Value) -> bool:
    """`same_value`, with a plural day or unit read as the singular ("Tuesdays" / "Tuesday")."""
    return same_value(a, b) or (a.kind == b.kind and a.norm.rstrip("s") == b.norm.rstrip("s"))


def _on_the_dial(norm: str) -> tuple[int, str] | None:
    """A normalised time on a 12-hour dial: "19:00" and "7:00" are both (7, "00")."""
    hour, _, rest = norm.partition(":")
    return (int(hour) % 12, rest) if hour.isdigit() and rest else None


# What a value is measured in or holds for ("mg", "year"): it makes two values comparable, it does not
# make two claims one. "I take metformin 500 mg" / "Doc added lisinopril 10 mg" share only the unit,
# "My property tax this year is $4,200" / "next year's assessment puts it at $4,650" only the year.
# Counted things ("commits", "engineers") do name what is counted, and stay anchors.
MEASURES = frozenset(
    stem(w)
    for w in [
        *(unit for unit, family in _UNITS.items() if family not in ("people", "count")),
        *word_set("mg mcg ml g oz l cm mm inch inches ft feet percent degrees calories kcal"),
        *word_set(
            "today tonight morning evening night weekend daily weekly monthly yearly annual annually quarter"
        ),
    ]
)
