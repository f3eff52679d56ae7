"""Does a new claim correct an old one? Rules from how people correct themselves; no model.

`judge(old, new)` decides whether claim `new`, stated after `old`, replaces it: the two must be about
the same slot (the same thing of the same owner) and `new` must give that slot another value, or say
the old state ended. Each rule traces to a way people restate or correct a fact:

  values      what a correction changes: an amount, a number with its unit, a date or a time, a
              version, a name (a capitalised word inside the sentence), or a state ("no longer X").
  slot        a changed value must sit among the same content words in both claims (its context:
              the words around it in its clause), so "$120k per year" aligns with "$100k per year"
              and not with "12 engineers".
  subject     the thing a claim is about (the words before its verb) must be the same: another
              person ("my brother" against "I"), another pet or owner ("my cat Luna" against "my dog
              Rex") or another qualifier of the same thing ("the marketing budget" against "the
              engineering budget") makes them look-alikes, never versions of one claim.
  additions   "also", "too", "another", "as well": the new claim adds a value, it replaces none.
  history     "used to", "previously", "back in 2019": a past state told as history sits beside
              the present one; it neither replaces it nor is replaced.
  ambiguity   a new claim that states the old value too, without marking it as the old one
              ("from", "not", "instead of"), lists values; it corrects none.

  intent      a changed value in an aligned slot is a correction only with a sign that the speaker
              means one: a strong cue just before the new value ("moved it to Friday", "correction:
              ..."), the old value named as the old one ("from Friday to Monday"), a weak cue ("now")
              with two slot words, or a restatement (the same words around another value). Long
              chats about one project are full of dated plans and amounts of different things that
              share a word; without this, each would retire something the user still means.
  code        a line of code pasted into a chat ("margin: 20px;") states nothing about the user.

Where the rules cannot decide, `judge` says no and both facts stay active: ranking then orders them
(memory.slots). Everything here is a pure function of the two texts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from memory.splitting import states_a_goal

__all__ = [
    "Value",
    "Verdict",
    "asks",
    "is_strong_cue",
    "judge",
    "looks_like_code",
    "may_share_slot",
    "restates",
    "same_slot",
    "says_one_thing",
    "states_something",
    "values",
    "word_count",
]


@dataclass(frozen=True, slots=True)
class Value:
    """A value a claim states: `kind` says what may replace it, `norm` what makes two values equal."""

    kind: str  # money, percent, quantity:<unit>, number, time, date, version, name
    text: str
    norm: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Verdict:
    supersedes: bool
    reason: str
    # said outright: a changed value with a cue that marks a change (not one that only places the
    # claim in time, "currently"), a state named right after its ending, what it replaced named.
    # Below the similarity guard only these count (memory.supersession).
    outright: bool = False


def _words(spec: str) -> frozenset[str]:
    return frozenset(spec.split())


_STOP = _words(
    "a an the and or but if of to in on at by for with from into onto over under about as is are was were be "
    "been being am do does did done have has had having it its it's this that these those there here then than "
    "so very just really quite my our your his her their me us him them i we you he she they i'm we're i've "
    "we've i'd we'd i'll we'll you're they're it'll what which who whom whose when where why how all any some "
    "each every no not can could would should will shall may might must up down out off per via one also too "
    "still yet now currently actually correction update updated new latest recently anymore longer again "
    "just right sorry oops wait instead rather meant mean sure let me know please thanks "
    "got get gets getting go goes going gone went make made makes "
    # words too general to anchor a slot: "last", "time", "really", "great" sit beside any value
    "last next first time times day really good great nice love like lot lots thing things something "
    "way ways much many more most little bit kind sort pretty super awesome amazing fun glad happy "
    "hope think know see say said tell told feel felt thank thanks congrats congratulations hey hi "
    # what a chat message opens or closes with, around any claim: "ok launch got pushed", "ugh"
    "ok okay yeah yes yep nope well anyway anyways lol haha ugh tbh honestly basically btw hmm oh ah "
    # when something happened qualifies no thing: "after completing" / "already completed"
    "after before already during until ever never often always usually sometimes"
)
# Words that mark the new claim as a correction; they are not part of any slot.
_CUES = _words(
    "actually correction correct corrected update updated now currently changed change changes changing "
    "moved move moves switched switch switches swapped replaced raised increased decreased lowered dropped "
    "reduced bumped upgraded downgraded migrated grew grown reached rose fell went became become becomes "
    "new newest latest recently since instead rather longer anymore revised revise amended amend fixed "
    "rescheduled postponed pushed shifted turns turned improved misremembered misspoke mistaken wrong"
)
# Cues that say the speaker means to replace something. A strong one is enough with an aligned slot; a
# weak one ("now", "new", "since") also starts stories, so it needs two slot words; with none, only a
# restatement (the same words around another value) is a correction. Without this gate, long chats
# about one project (many dated plans, amounts and versions of different things that share a word)
# retired most of what the user had said: 298 edges in 12 BEAM chats, about 1 in 25 right by hand.
_STRONG_CUES = _words(
    "actually correction corrected update updated changed change moved moving switched swapped replaced "
    "raised increased decreased lowered reduced bumped upgraded downgraded migrated revised amended "
    "rescheduled rebooked postponed extended relocated scaled shuffled slipped delayed meant typo instead "
    "rather anymore longer cut renamed slashed hiked trimmed pushed fired misremembered misspoke mistaken wrong"
)
_WEAK_CUES = _CUES - _STRONG_CUES - _words("since new")
# A claim's value changing, below the guard (memory.supersession): everything but the cues that only
# place a claim in time ("currently", "recently", "my new role"), which any story has
_ONLY_TIME = _words("currently recently new latest since")
_SHORT_WEAK_CUES = _WEAK_CUES | _words("new")  # in a short message "my new manager is Priya" is one
# a line of code (pasted into a chat) is not a claim about the world: "margin: 20px;" / "margin: 10px;"
_CODE = re.compile(
    r"[{}`]|;\s*$|\b[\w.-]+/[\w.-]+@[\w.-]+|\s==?\s|=>|</?[a-z][\w-]*(?:\s[^>]*)?>|\b\w+\([^)]*\)|^\s*(?:import|from\s+\S+\s+import|"
    r"const|let|var|def|return|function|class|if|else|for|while)\b",
    re.M,
)
_ADDITION = re.compile(
    r"\b(?:also|too|as well|another|in addition|additionally|besides|as a second|a second|a 2nd)\b", re.I
)
_HISTORY = re.compile(
    r"\b(?:used to|previously|formerly|originally|back in|back then|in the past|before that|grew up|"
    r"years ago|when i was|as a (?:kid|child|student|teenager)|at the time|once upon|"
    r"in (?:high school|college|university|grad school|school)|before (?:moving|i moved|we moved)|"
    r"when (?:i|we) (?:first )?(?:joined|started|began|arrived|met)|last (?:year|summer|winter|spring|fall|autumn))\b",
    re.I,
)
_NEGATED_ENDING = re.compile(
    r"\b(?:never|not|won't|wouldn't|don't|didn't|can't|cannot|n't)\s+(?:\w+\s+)?$", re.I
)
_ENDED = re.compile(
    r"(?:\b(?:no longer|not anymore|not \w+ anymore|stopped|quit|gave up|left (?:my|our|the|his|her|their)|is gone|are gone|"
    r"not \w+ing any ?more|no more|retired|cancell?ed|called off)|n't (?:\w+\s+){1,4}?any ?more)\b",
    re.I,
)
# "from X to Y", "X, not Y", "instead of X": the old value named as the old one
_OLD_MARKER = re.compile(
    r"(?:\bfrom|\bnot|\binstead of|\brather than|\bno longer|\bwas|\bwere|\bformerly)\s+$", re.I
)

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
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’+#.-]*[A-Za-z0-9+#]|[A-Za-z]")
_CLAUSE_BREAK = re.compile(r"[;:!?]|,\s+(?:and|but|so|while|whereas|which)\b|\.\s|\s[-–—]\s")
# Who or what a claim is about, when its subject is a person: these are other people (or pets).
_RELATIONS = _words(
    "brother sister wife husband partner spouse mom mother dad father son daughter friend boss manager "
    "colleague coworker co-worker roommate neighbor neighbour kid kids child children cousin aunt uncle "
    "grandma grandpa grandmother grandfather boyfriend girlfriend fiance fiancee teammate landlord "
    "doctor dog cat puppy kitten horse bird parrot fish hamster rabbit pet client customer parent "
    "parents folks family grandparents in-laws nephew niece"
)
_SELF = _words("i i'm i've i'd i'll we we're we've we'd we'll me us myself ourselves")
_SELF_POSSESSIVE = _words("my our")
_USER = re.compile(r"^(?:the\s+)?user(?:'s|’s)?\b", re.I)
# Words that end a subject: a verb or an auxiliary. Subjects are short, so the scan stops early.
_VERBISH = _words(
    "is are was were be been am has have had do does did will would can could should must may might shall "
    "isn't aren't wasn't weren't doesn't don't didn't won't can't cannot "
    "works work worked working lives live lived living runs run ran running uses use used using costs cost "
    "takes take took leads lead led manages manage managed owns own owned drives drive drove plays play "
    "played weighs weigh weighed earns earn earned pays pay paid starts start started begins begin began "
    "ends end ended sits sit sat meets meet met holds hold held needs need needed wants want wanted "
    "prefers prefer preferred likes like liked loves love loved hates hate hated drinks drink drank eats "
    "eat ate reports report reported moved move switched switch changed change got get gets became become "
    "becomes stands stand stood goes go went comes come came has reached reach hit hits "
    "grew grows rose rises fell falls dropped drops"
)
# A numbered thing: "service 3", "item #7", "line 12" (in a subject, the number names the thing)
_ITEM = re.compile(r"\b([A-Za-z][A-Za-z-]+)\s+#?(\d+)\b(?![.:,]?\d)")
_LABEL = re.compile(
    r"^(?:[^\s:]+\s+){0,2}[^\s:]+:\s+"
)  # "Correction: ...", "Update: ...", "New personal best: ..."


def _stem(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ies", "es", "s", "ed", "ing"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    # "smoke" / "smoking", "live" / "lived": the bare form's final e goes too, so both meet
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


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
    worded = re.fullmatch(r"(quarter|half)\s+(past|to)\s+(\w+)|(\w+)\s+o'?clock", text.lower())
    if worded:
        hour_text = worded[3] or worded[4]
        hour = int(hour_text) if hour_text.isdigit() else _CLOCK.index(hour_text) + 1
        if worded[4]:
            return f"{hour}:00"
        minutes = 30 if worded[1] == "half" else 15
        if worded[2] == "to":
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
    for match in _VALUE.finditer(text):
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
    spans = [(v.start, v.end) for v in taken]
    found = []
    for m in _NUMBER_WORD.finditer(text):
        start = next(m.start(group) for group in (1, 3, 4) if m[group])
        if any(a <= start < b for a, b in spans):
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
    spans = [(v.start, v.end) for v in taken]
    names: list[Value] = []
    for sentence in re.finditer(r"[^.!?\n]+", text):
        words = list(_WORD.finditer(sentence.group(0)))
        run: list[re.Match[str]] = []
        for index, word in enumerate(words):
            token = word.group(0)
            capital = token[0].isupper() and token.lower() not in _SELF and token.lower() not in _STOP
            if (
                capital
                and token.isupper()
                and index > 0
                and _GENERIC_BEFORE.search(sentence.group(0)[: word.start()])
            ):
                capital = False  # "this new RPG", "an API": a kind of thing, not a name
            after_label = index > 0 and sentence.group(0)[: word.start()].rstrip().endswith(":")
            if capital and ((index > 0 and not after_label) or _looks_like_name(token)):
                run.append(word)
                continue
            if run:
                names.append(_name_value(sentence.start(), run))
                run = []
        if run:
            names.append(_name_value(sentence.start(), run))
    return [n for n in names if not any(s <= n.start < e for s, e in spans) and not _vocative(text, n)]


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


def _kind_family(kind: str) -> str:
    # a share changes into a share: "completed 40%" is no earlier "5,000-word draft"
    return "number" if kind in ("number", "money") else kind


@dataclass(frozen=True, slots=True)
class _Claim:
    text: str
    body: str  # without a leading label ("Correction: ")
    values: tuple[Value, ...]
    subject: frozenset[str]
    person: str | None  # "self", a relation word, a name, or None when the subject is a thing
    items: frozenset[tuple[str, str]]  # numbered things its subject names: ("service", "3")
    subject_end: int  # where, in `body`, its subject ends
    history: bool
    addition: bool
    ended: bool


# sized for a long conversation's claims, and the clauses of them the rules parse too: a capture
# compares each new claim with up to 13 earlier ones, whose parses it finds here
@functools.lru_cache(maxsize=16384)
def _parse(text: str) -> _Claim:
    body = _LABEL.sub("", text.strip(), count=1) if _LABEL.match(text.strip()) else text.strip()
    found = tuple(values(body))
    subject, person, subject_end = _subject(body)
    head = text.strip()[: len(text.strip()) - len(body) + subject_end]  # the label and the subject
    return _Claim(
        text=text,
        body=body,
        values=found,
        subject=subject,
        person=person,
        items=frozenset((_stem(m[1]), m[2]) for m in _ITEM.finditer(head) if m[1].lower() not in _STOP),
        subject_end=subject_end,
        history=bool(_HISTORY.search(body)),
        addition=bool(_ADDITION.search(body)),
        ended=_ends_a_state(body),
    )


def _named_after_ending(body: str) -> frozenset[str]:
    """The first two content words after each ending ("quit smoking", "stopped training for")."""
    found: set[str] = set()
    for m in _ENDED.finditer(body):
        following = list(_WORD.finditer(body, m.end(), min(len(body), m.end() + 40)))[:2]
        found.update(_stem(w.group(0)) for w in following)
    return frozenset(found)


def _ended_for_another(body: str) -> bool:
    """ "you can't volunteer there anymore", "she quit": someone else's state ended, not the user's."""
    return any(
        re.search(
            r"\b(?:you|he|she|they)\b(?:\s+\S+){0,2}\s*$", body[max(0, m.start() - 30) : m.start()], re.I
        )
        for m in _ENDED.finditer(body)
    )


def _ends_a_state(body: str) -> bool:
    """'I no longer work there', 'we stopped using Jenkins'; not 'I'll never quit'."""
    return any(
        m.group(0).lower().startswith(("no longer", "not ")) or not _NEGATED_ENDING.search(body[: m.start()])
        for m in _ENDED.finditer(body)
    )


def _subject(body: str) -> tuple[frozenset[str], str | None, int]:
    """The content words before the first verb, who the subject is when it is a person, and where
    the subject ends. An aside in brackets is about something else ("Guest list grew (my mom ...)").
    A month or a day in it names a period ("The January electric bill"), so it stays."""
    if _USER.match(body):
        body = _USER.sub("my", body, count=1)
    aside = body.find("(", 0, 160)
    words = list(_WORD.finditer(body[: aside if aside >= 0 else 160]))
    subject: list[str] = []
    person: str | None = None
    # no verb in the first words: the whole of a short claim is its subject ("Body Paragraph 2")
    end = words[7].end() if len(words) >= 8 else (aside if aside >= 0 else len(body))
    for index, match in enumerate(words[:8]):
        word = match.group(0)
        lowered = word.lower().replace("’", "'")
        after_determiner = index > 0 and words[index - 1].group(0).lower() in _DETERMINERS
        if not after_determiner and (
            lowered in _VERBISH or (index > 0 and lowered.endswith("ed") and lowered not in _RELATIONS)
        ):
            end = match.start()
            if person is None and lowered in _CHANGE_VERBS:
                # "They moved the conference to ...", "Finance cut the budget to $8k": who acted is
                # not what changed; the thing after the verb is
                acted_on = _acted_on(words[index + 1 :])
                if acted_on:
                    return acted_on, None, end
            break
        if lowered in _SELF and index == 0:
            # "We transferred my daughter to Oakridge": what the user changed is the subject
            verb = next((w for w in words[1:4] if w.group(0).lower() in _CHANGE_VERBS), None)
            if verb is not None:
                rest = words[words.index(verb) + 1 :]
                owner = _owner(rest)
                acted_on = _acted_on(rest)
                if acted_on and owner is not None:
                    return acted_on - {owner}, owner, verb.start()
            return frozenset(), "self", 0
        if lowered in _SELF_POSSESSIVE:
            person = person or "self"
            continue
        if lowered in _STOP or lowered in _CUES:
            continue
        stem = _stem(lowered)
        if (stem in _RELATIONS or lowered in _RELATIONS) and person in (None, "self"):
            person = stem  # the first relation owns the rest: "my husband's manager" is his
        elif (
            index == 0
            and word[0].isupper()
            and person is None
            and len(words) > 1
            and words[1].group(0).lower() in _VERBISH
        ):
            person = "name:" + lowered  # "Sarah works at ...": a named person or thing
        subject.append(stem)
    return frozenset(subject), person, end


# verbs that change a thing's value: the thing is their object, whoever did it
_CHANGE_VERBS = _words(
    "moved switched changed raised increased decreased lowered reduced bumped upgraded downgraded "
    "migrated revised rescheduled postponed pushed shifted renamed cut slashed extended replaced swapped "
    "dropped hiked updated"
)
_OBJECT_ENDS = _words("to from by for with until till back at in on into as because since so and but")


def _owner(words: list[re.Match[str]]) -> str | None:
    """Whose thing a change verb's object is: "my daughter" is the daughter's, "our budget" ours."""
    first = [w.group(0).lower() for w in words[:3]]
    if first and first[0] in _SELF_POSSESSIVE:
        nxt = _stem(first[1]) if len(first) > 1 else ""
        return nxt if nxt in _RELATIONS else "self"
    return None


def _acted_on(words: list[re.Match[str]]) -> frozenset[str]:
    """The content words of a change verb's object: "the conference" of "moved the conference to"."""
    found: list[str] = []
    for match in words[:5]:
        lowered = match.group(0).lower()
        if lowered in _OBJECT_ENDS:
            break
        if lowered in _STOP or lowered in _CUES or lowered in _DETERMINERS:
            continue
        found.append(_stem(lowered))
    return frozenset(found)


# ranking compares every pair of a block's claims (memory.slots): what one claim's analysis yields is
# computed once per claim, not once per pair
@functools.lru_cache(maxsize=16384)
def _context(claim: _Claim, value: Value, window: int = 6) -> frozenset[str]:
    """Content words around `value` within its clause (other values out): the slot it fills."""
    body = claim.body
    lo, hi = _clause_bounds(body, value)
    others = [(v.start, v.end) for v in claim.values if v is not value and v.kind != "name"]
    before = _outside(_WORD.finditer(body, lo, value.start), others)
    following = _outside(_WORD.finditer(body, value.end, hi), others)
    picked = [w.group(0) for w in before[-window:]] + [w.group(0) for w in following[:window]]
    frames = {_FRAMES_OF[w.lower()] for w in picked if w.lower() in _FRAMES_OF}
    return (
        frozenset(
            _stem(w) for w in picked if w.lower() not in _STOP and w.lower() not in _CUES and len(w) > 1
        )
        | frames
    )


# What a value is, said with different verbs: where someone lives ("live in", "based in", "moved to"),
# works ("work at", "joined", "hired by"), what they earn ("make", "paid", "salary"). Two claims that
# frame their values alike fill one slot though they share no other word ("I live in Austin" / "We
# relocated to Denver"); the subject and qualifier rules still keep other people and things apart.
_FRAMES_OF = {
    **dict.fromkeys(
        [
            "live",
            "lives",
            "lived",
            "living",
            "based",
            "reside",
            "resides",
            "moved",
            "relocated",
            "relocating",
            "settled",
        ],
        "@home",
    ),
    **dict.fromkeys(
        ["work", "works", "worked", "working", "employer", "job", "joined", "hired", "employed"], "@work"
    ),
    **dict.fromkeys(
        [
            "salary",
            "salaries",
            "paid",
            "pay",
            "make",
            "makes",
            "earn",
            "earns",
            "earning",
            "income",
            "base",
            "wage",
            "wages",
        ],
        "@pay",
    ),
}


def _clause_bounds(body: str, value: Value) -> tuple[int, int]:
    """Where the clause that holds `value` starts and ends in `body`."""
    lo = max((m.end() for m in _CLAUSE_BREAK.finditer(body, 0, value.start)), default=0)
    after = _CLAUSE_BREAK.search(body, value.end)
    return lo, after.start() if after else len(body)


def _outside(words: Iterable[re.Match[str]], spans: list[tuple[int, int]]) -> list[re.Match[str]]:
    """The words (in text order) that start inside none of `spans`: one pass over both, sorted, so a
    long claim with many values costs words + values, not words x values."""
    ordered = sorted(spans)
    out: list[re.Match[str]] = []
    i, reach = 0, -1  # spans[:i] are behind the word; reach: the furthest end among them
    for word in words:
        start = word.start()
        while i < len(ordered) and ordered[i][0] <= start:
            reach = max(reach, ordered[i][1])
            i += 1
        if start >= reach:
            out.append(word)
    return out


def _subjects_differ(old: _Claim, new: _Claim) -> str | None:
    old_items, new_items = dict(old.items), dict(new.items)
    for noun in old_items.keys() & new_items.keys():
        if old_items[noun] != new_items[noun]:
            return f"about another item: {noun} {old_items[noun]} / {noun} {new_items[noun]}"
    persons = {old.person, new.person}
    if (
        old.person
        and new.person
        and old.person != new.person
        and not ("self" in persons and any(p is not None and p.startswith("name:") for p in persons))
        and not _same_possession(old, new)
    ):
        return (
            f"about another {'person' if 'self' in (old.person, new.person) else 'owner'}: "
            f"{old.person} / {new.person}"
        )
    if old.person is None and new.person is None and old.subject and new.subject:
        only_old, only_new = old.subject - new.subject, new.subject - old.subject
        if not old.subject & new.subject:
            return f"about other things: {' '.join(sorted(old.subject))} / {' '.join(sorted(new.subject))}"
        if only_old and only_new:
            return f"another qualifier: {' '.join(sorted(only_old))} / {' '.join(sorted(only_new))}"
    if old.person and old.person == new.person and old.subject and new.subject:
        # the same owner, two of their things: "my dog Rex" / "my dog Bella", "my work laptop" /
        # "my personal laptop"
        only_old, only_new = old.subject - new.subject, new.subject - old.subject
        if only_old and only_new:
            return f"another qualifier: {' '.join(sorted(only_old))} / {' '.join(sorted(only_new))}"
    return None


_DETERMINERS = _words("my our your his her their the a an this that")
_FRAMES = _DETERMINERS | _words("for of on in at with to")


def _qualifier_conflict(old: _Claim, new: _Claim) -> str | None:
    """One thing named with two qualifiers: "the staging server" / "the build server", "free users" /
    "paid users". Two claims share a content word, and each puts another content word before it."""
    before_old, before_new = _modifiers(old), _modifiers(new)
    for head in before_old.keys() & before_new.keys():
        a, b = before_old[head], before_new[head]
        if a and b and not a & b:
            return f"another qualifier: {sorted(a)[0]} {head} / {sorted(b)[0]} {head}"
    return None


@functools.lru_cache(maxsize=8192)
def _modifiers(claim: _Claim) -> dict[str, frozenset[str]]:  # cached: never mutate the result
    spans = [(v.start, v.end) for v in claim.values]
    words = _outside(_WORD.finditer(claim.body), spans)
    found: dict[str, set[str]] = {}
    for index in range(1, len(words)):
        prev, word = words[index - 1], words[index]
        head, mod = word.group(0).lower(), prev.group(0).lower()
        if head in _STOP or head in _CUES or len(head) < 3:
            continue
        found.setdefault(_stem(head), set())
        # after "the" or "for", even a verb's form is an adjective: "the paid plan", "for paid users"
        framed = index > 1 and words[index - 2].group(0).lower() in _FRAMES
        if claim.body[prev.end() : word.start()].strip() == "" and (
            _is_modifier(mod) or (framed and mod in _VERBISH and mod.endswith(("ed", "id", "ing")))
        ):
            found[_stem(head)].add(_stem(mod))
    return {h: frozenset(m) for h, m in found.items()}


def _is_modifier(word: str) -> bool:
    return not (
        word in _STOP
        or word in _CUES
        or word in _DETERMINERS
        or word in _VERBISH
        or word in _SELF
        or word.endswith("ly")
        or len(word) < 3
    )


_POSSESSION = re.compile(r"\b(?:my|our)\s+([a-z][a-z'-]+)", re.I)


def _same_possession(old: _Claim, new: _Claim) -> bool:
    """Both claims name the same thing of the user's ("my rent"): whoever acts on it, it is theirs."""
    mine = {_stem(m) for m in _POSSESSION.findall(old.body)}
    return bool(mine & {_stem(m) for m in _POSSESSION.findall(new.body)} - _RELATIONS)


def _marked_as_old(body: str, value: Value) -> bool:
    marker = _OLD_MARKER.search(body[max(0, value.start - 20) : value.start])
    if marker is None:
        return False
    said = marker.group(0).lower()
    # "the nuc was $165, not 185": what it was, set against what it was not, is the value meant
    if said.startswith(("was", "were")) and _NOT_AFTER.match(body, value.end):
        return False
    # "from Friday to Monday" names the old value; "skills gained from Caribbean and UK work" does not
    return not said.startswith("from") or bool(_TO_AFTER.match(body, value.end))


_TO_AFTER = re.compile(r"\s*(?:\S+\s+){0,2}?to\b", re.I)
_NOT_AFTER = re.compile(r",?\s*(?:not|rather than|instead of)\s", re.I)


def _changes(old: _Claim, new: _Claim) -> list[tuple[Value, Value, frozenset[str]]]:
    """Pairs (old value, new value, shared slot words) where `new` gives an aligned slot another value."""

    def key(v: Value) -> tuple[str, str]:
        return (_kind_family(v.kind), v.norm)

    old_norms = {key(v) for v in old.values}
    new_marked = {id(v): _marked_as_old(new.body, v) for v in new.values}
    new_by_key: dict[tuple[str, str], list[Value]] = {}
    for v in new.values:
        new_by_key.setdefault(key(v), []).append(v)
    shared_values = frozenset(n for _, n in old_norms & new_by_key.keys())
    # several names on a side: a list (brands, people), not one slot's value
    listed_names = (
        sum(v.kind == "name" and not new_marked[id(v)] for v in new.values) > 1 or _count(old, "name") > 1
    )
    old_norm_count: dict[str, int] = {}
    for v in old.values:
        old_norm_count[v.norm] = old_norm_count.get(v.norm, 0) + 1
    pairs = []
    for nv in new.values:
        if key(nv) in old_norms or new_marked[id(nv)]:
            continue
        for ov in old.values:
            counted = (
                _counted_alike(old, ov, new, nv) if _kind_family(ov.kind) != _kind_family(nv.kind) else None
            )
            if _same_value(ov, nv) or (_kind_family(ov.kind) != _kind_family(nv.kind) and not counted):
                continue
            if nv.kind == "name" and listed_names:
                continue
            # a count written as a word is a small one: "two campaigns" is no "40k" budget
            if _worded(ov) != _worded(nv) and not _small(ov if _worded(nv) else nv):
                continue
            # "Flask 2.3.1" / "Gunicorn 20.1.0": each version is its own thing's
            owners = _named_by(old, ov), _named_by(new, nv)
            if owners[0] and owners[1] and not _same_value(owners[0], owners[1]):
                continue
            if _apposed(old, ov) != _apposed(new, nv):  # "my friend Carla, 58": her age, no one else's
                continue
            # the old value restated in the new claim, unmarked: a list of values, not a change
            restated = new_by_key.get(key(ov), [])
            if restated and not any(new_marked[id(v)] for v in restated):
                continue
            # values both claims hold, other than the one changing: they anchor the slot too
            anchors = {n for n in shared_values if n != ov.norm or old_norm_count[n] > 1}
            # "switched from Jira to Linear": the old value, named as the old one, is the slot
            if any(
                new_marked[id(v)] and _same_value(v, ov) and abs(v.start - nv.start) <= 30 for v in new.values
            ):
                anchors.add(ov.norm)
            slot = (_context(old, ov) & _context(new, nv)) | anchors | ({counted} if counted else set())
            # "Product launch is set for October 3rd" / "ok launch got pushed ..., now targeting
            # October 17": both about the launch, each with one date
            if not slot and _count(old, ov.kind) == 1 and _count(new, nv.kind) == 1:
                slot = old.subject & new.subject
            if slot:
                pairs.append((ov, nv, slot))
    return pairs


def _counted_alike(old: _Claim, ov: Value, new: _Claim, nv: Value) -> str | None:
    """ "150 commits" / "commits merged ..., which has now reached 165": a count with its unit, and a
    bare number in a claim that names that unit and no other count. The unit, or None."""
    for counted, claim, bare in ((ov, new, nv), (nv, old, ov)):
        if counted.kind.startswith("quantity:") and bare.kind == "number":
            unit = _unit_of(counted)
            alone = sum(v.kind == "number" or v.kind.startswith("quantity:") for v in claim.values) == 1
            return unit if unit and alone and unit in _claim_content(claim) else None
    return None


@functools.lru_cache(maxsize=8192)
def _claim_content(claim: _Claim) -> frozenset[str]:
    # ranking compares every pair of a block's claims: a claim's words are read once
    return _content(claim.body)


def _worded(value: Value) -> bool:
    return value.kind == "number" and value.text[:1].isalpha()


def _small(value: Value) -> bool:
    return value.kind == "number" and (n := _norm_number(value.norm)) is not None and n <= 20


def _named_by(claim: _Claim, value: Value) -> Value | None:
    """The name a value follows directly ("Python" of "Python 3.12"), if any."""
    if value.kind == "name":
        return None
    return next(
        (
            v
            for v in claim.values
            if v.kind == "name" and claim.body[v.end : value.start].strip() == "" and v.end <= value.start
        ),
        None,
    )


def _apposed(claim: _Claim, value: Value) -> bool:
    """A number set off after a name by a comma ("Carla, 58,"): that person's, said in passing."""
    return value.kind == "number" and bool(
        _APPOSED.search(claim.body[max(0, value.start - 30) : value.start])
    )


_APPOSED = re.compile(r"\b[A-Z][a-z]+,\s*$")


def _same_value(a: Value, b: Value) -> bool:
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


def _on_the_dial(norm: str) -> tuple[int, str] | None:
    """A normalised time on a 12-hour dial: "19:00" and "7:00" are both (7, "00")."""
    hour, _, rest = norm.partition(":")
    return (int(hour) % 12, rest) if hour.isdigit() and rest else None


def _count(claim: _Claim, kind: str, *, unmarked: bool = False) -> int:
    return sum(v.kind == kind and not (unmarked and _marked_as_old(claim.body, v)) for v in claim.values)


_INSTEAD = re.compile(r"\b(?:instead of|rather than|in place of)\s+((?:\w+\s*){1,3})", re.I)
_COPULA = re.compile(r"(?:\b(?:is|are|was|were)|'s)$", re.I)


def _replaced_state(old: _Claim, new: _Claim) -> str | None:
    """'I've started cycling to work instead of taking the bus': the new claim names what it replaces."""
    # what the old claim itself set aside ("a Canadian visa instead of a Jamaican one") is not its state
    set_aside = frozenset().union(*(_content(m.group(1)) for m in _INSTEAD.finditer(old.body)))
    for match in _INSTEAD.finditer(new.body):
        named = _content(match.group(1))
        if named & (_content(old.body) - set_aside):
            return f"replaced: {match.group(1).strip()}"
    return None


def _restated(old: _Claim, new: _Claim) -> str | None:
    """The same statement with another ending: "the default branch is master" / "... is main"."""
    a, b = old.body.rstrip(".!").split(), new.body.rstrip(".!").split()
    head = 0
    while head < min(len(a), len(b)) and a[head].lower() == b[head].lower():
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail].lower() == b[-1 - tail].lower():
        tail += 1
    changed_a, changed_b = a[head : len(a) - tail], b[head : len(b) - tail]
    prefix = " ".join(a[:head])
    if not (1 <= len(changed_a) <= 3 and 1 <= len(changed_b) <= 3) or not _COPULA.search(prefix):
        return None
    # the restated part must name a slot: "the default branch is", not "Caroline, that's" (a reaction)
    named = {_stem(w.group(0)) for w in _WORD.finditer(prefix) if not w.group(0)[0].isupper()}
    if len(named - _STOP - _CUES - _DETERMINERS) < 2 or old.body.rstrip().endswith("!"):
        return None
    return f"same statement, value changed: {' '.join(changed_a)} -> {' '.join(changed_b)}"


@functools.lru_cache(maxsize=16384)  # asked of both claims of every pair capture and ranking compare
def looks_like_code(text: str) -> bool:
    """A line of code or markup: braces, a statement's semicolon, an assignment, a call, a tag."""
    return bool(_CODE.search(text))


def _restatement(old: _Claim, new: _Claim) -> bool:
    """The two claims' words, outside their values, are mostly the same: one sentence said with
    another value ("our budget is $100k per year" / "... $120k per year"), not two sentences that
    share a topic word. One shared word is enough only when a single value changed: "I met Kimberly
    at the café on May 7" / "I met Matthew at the hub on June 5" changes everything but the verb."""
    a, b = _plain_words(old), _plain_words(new)
    shared = a & b
    if not shared or len(shared) / len(a | b) < RESTATEMENT_OVERLAP:
        return False
    old_norms = {v.norm for v in old.values}
    changed = sum(v.norm not in old_norms and not _marked_as_old(new.body, v) for v in new.values)
    return len(shared) >= 2 or changed == 1


RESTATEMENT_OVERLAP = 0.5  # of the words either claim has


@functools.lru_cache(maxsize=8192)
def _plain_words(claim: _Claim) -> frozenset[str]:
    # the whole text: a label says what the slot is ("New personal best: I got my 5K down to 25:50")
    spans = [(v.start, v.end) for v in values(claim.text)]
    return frozenset(
        _stem(w.group(0))
        for w in _outside(_WORD.finditer(claim.text), spans)
        if w.group(0).lower() not in _STOP and w.group(0).lower() not in _CUES and len(w.group(0)) > 1
    )


CUE_WINDOW = 6  # words before a changed value where its cue may stand


def _words_before(claim: _Claim, value: Value, window: int = CUE_WINDOW) -> frozenset[str]:
    """The `window` words just before `value`, and its claim's label ("Correction: ..."): where a
    speaker puts the word that marks a changed value ("moved it to Friday", "now $120k")."""
    offset = len(claim.text.strip()) - len(claim.body)  # the label's length
    words = [w.group(0).lower() for w in _WORD.finditer(_text_before(claim, value))]
    label = [w.group(0).lower() for w in _WORD.finditer(claim.text.strip()[:offset])]
    return frozenset(words[-window:] + label)


def _text_before(claim: _Claim, value: Value) -> str:
    """The claim's text, its label included, up to `value`."""
    return claim.text.strip()[: len(claim.text.strip()) - len(claim.body) + value.start]


def _intent(old: _Claim, new: _Claim, was: Value, value: Value, slot: frozenset[str]) -> str | None:
    """Why `new` means to replace `old`'s value `was` with `value`, or None. A short message is about
    the one thing it mentions, so any cue in it counts ("Sold the Civic; I drive a Tesla now"); in a
    long one a cue must stand just before the new value, a weak one with two slot words, since a cue
    elsewhere in a run-on sentence ("..., especially since I reduced filler words") is about something
    else. A date needs a strong cue: two dates are two events ("my new job starts May 1" / "anxiety
    spikes on May 29 with the new job") unless one was moved. The old value named as the old one ("from
    Friday to Monday") or a restatement (the same words around another value) needs no cue."""
    # "from Friday to Monday", "Monday, not Friday": this slot's old value named as the old one
    if any(_marked_as_old(new.body, v) and _same_value(v, was) for v in new.values):
        return "old value named"
    short = _is_short(new)
    words = _text_words(new) if short else _words_before(new, value)
    if cue := words & _STRONG_CUES:
        return f"cue: {sorted(cue)[0]}"
    near = new.text.strip() if short else _text_before(new, value)[-60:]
    if phrase := _CHANGE_PHRASE.search(near):
        return f"cue: {phrase.group(0).lower()}"
    # "I'll talk to Matthew" / "I'll talk to Stephen": two plans; a changed plan says so ("moved")
    if _PLAN.match(old.body) or _PLAN.match(new.body):
        return None
    if _restatement(old, new):
        return "restated"
    if value.kind == "date":
        return None
    if (cue := words & (_SHORT_WEAK_CUES if short else _WEAK_CUES)) and (short or len(slot) >= 2):
        return f"cue: {sorted(cue)[0]}"
    return None


SHORT_CLAIM_WORDS = 20  # a message this short is about one thing
# what people say when a value changes, in more than one word
_CHANGE_PHRASE = re.compile(
    r"\b(?:as of (?:today|now|this|last|yesterday|monday|tuesday|wednesday|thursday|friday|this)|"
    r"from now on|scratch that|change of plans?|turns out|down to|went from|"
    r"(?:is|are|'s) now)\b",
    re.I,
)
# "If the budget were 60k ...", "we'd pay $75 there", "thinking about switching": what might be
_HYPOTHETICAL = re.compile(
    r"^(?:if|what if|suppose|supposing|imagine|assuming|in case)\b|\b(?:if (?:we|i|it|they|the)\b.*\b(?:were|would|could|'d))|"
    r"\b(?:thinking (?:about|of)|considering|might (?:switch|move|go|change)|would (?:be|cost|mean))\b",
    re.I,
)
# what ranking reads as a wish or a condition: only at a claim's start, since long claims carry
# "considering ..." and "would be" about anything
_WISH = re.compile(
    r"(?:if|what if|suppose|supposing|imagine|assuming|in case|might|maybe)\b|"
    r"(?:(?:i'm|i am|we're|we are)\s+)?(?:thinking (?:about|of)|considering)\b",
    re.I,
)
_PLAN = re.compile(
    r"(?:i|we)(?:'ll|’ll| will| shall|'m going to| am going to|'re going to| are going to)\s", re.I
)


# a claim's own facts, computed once per claim rather than once per value pair `judge` weighs
@functools.lru_cache(maxsize=8192)
def _text_words(claim: _Claim) -> frozenset[str]:
    # "now that I've finished" opens a reason, it marks no change
    return frozenset(w.group(0).lower() for w in _WORD.finditer(_NOW_THAT.sub(" ", claim.text)))


_NOW_THAT = re.compile(r"\bnow that\b", re.I)


@functools.lru_cache(maxsize=8192)
def _is_short(claim: _Claim) -> bool:
    return word_count(claim.text) <= SHORT_CLAIM_WORDS


def says_one_thing(text: str) -> bool:
    """A claim short enough to be about one thing (at most SHORT_CLAIM_WORDS words)."""
    return _is_short(_parse(text))


def word_count(text: str) -> int:
    """How many words `text` has, counted as the rules count them."""
    return sum(1 for _ in _WORD.finditer(text))


def judge(old: str, new: str) -> Verdict:
    """Whether `new`, said after `old`, replaces it; the reason either way."""
    if looks_like_code(old) or looks_like_code(new):
        return Verdict(False, "code")
    if asks(old) or asks(new):
        return Verdict(False, "a question, not a state")
    # a goal names a target, not a state: "I'm aiming for 90% on the final draft" is no version of "I
    # got 82% on the outline", and two attempts ("I'm trying to verify a triangle with sides 8, 15,
    # 17" / "... with sides 5, 12, 13") are two exercises. In BEAM's chats, once goals with a value
    # became claims, 19 of the 20 edges they added were wrong by hand check.
    if states_a_goal(old) or states_a_goal(new):
        return Verdict(False, "a goal, not a state")
    o, n = _parse(old), _parse(new)
    if n.history or o.history:
        return Verdict(False, "told as history")
    if _HYPOTHETICAL.search(n.body) or _HYPOTHETICAL.search(o.body):
        return Verdict(False, "a hypothetical, not a state")
    if period := _periods_differ(o, n):
        return Verdict(False, period)
    if different := _subjects_differ(o, n) or _qualifier_conflict(o, n):
        # "Landlord sent the renewal and we're paying $1.95k now": the value's own clause has its own
        # subject, the user, though the claim opens with someone else
        in_clause = [c for c in _changes(o, n) if _clauses_agree(o, n, c[0], c[1])]
        if not in_clause or n.addition:
            return Verdict(False, different)
        return _verdict_for(o, n, in_clause)
    if n.ended and not o.ended:
        shared = _content(o.body) & _content(n.body)
        # what ended, named: one word in a short message ("I'm no longer vegetarian"), two in a long
        # one, where one ("... 51 cards left ...") is a coincidence
        if len(shared) >= (1 if _is_short(n) else 2) and not _ended_for_another(n.body):
            # named right after its verb ("quit smoking", "stopped training"), or in two words
            named = len(shared) >= 2 or bool(_named_after_ending(n.body) & shared)
            return Verdict(True, f"state ended: no longer {' '.join(sorted(shared))}", outright=named)
    if n.addition:
        return Verdict(False, "adds a value")
    if replaced := _replaced_state(o, n):
        # what it replaced, named by a value or in two words ("instead of Jira"), not one common word
        instead = _INSTEAD.search(n.body)
        what = instead.group(1) if instead else ""
        specific = len(_content(what)) >= 2 or any(v.kind == "name" for v in values(what))
        return Verdict(True, replaced, outright=specific)
    if replaced := _restated(o, n):
        return Verdict(True, replaced)
    changes = _changes(o, n)
    if not changes:
        return Verdict(False, "no aligned value changed")
    return _verdict_for(o, n, changes)


def _verdict_for(o: _Claim, n: _Claim, changes: list[tuple[Value, Value, frozenset[str]]]) -> Verdict:
    for ov, nv, slot in changes:
        if intent := _intent(o, n, ov, nv, slot):
            return Verdict(
                True,
                f"same slot ({' '.join(sorted(slot)[:3])}), value changed: {ov.text} -> {nv.text} ({intent})",
                # said outright: a strong cue or the old value named, not "now" or a restatement
                outright=intent.removeprefix("cue: ") not in _ONLY_TIME,
            )
    ov, nv, slot = changes[0]
    return Verdict(
        False, f"same slot ({' '.join(sorted(slot)[:3])}) but no sign of a correction: {ov.text} / {nv.text}"
    )


_OTHERS = _words("he she they it his her their its he's she's they're it's")


def _clause_of(claim: _Claim, value: Value) -> str:
    """The clause that holds `value`, where a clause of the user's own also starts one."""
    body = claim.body
    lo, hi = _clause_bounds(body, value)
    lo = max([lo, *(m.end() for m in _SELF_CLAUSE.finditer(body, 0, value.start))])
    return body[lo:hi].strip()


# "... and we're paying", ", I'm now": a clause of the user's own inside a longer claim
_SELF_CLAUSE = re.compile(r"(?:,|\band|\bso|\bbut)\s+(?=(?:i|we|i'm|we're|i've|we've|my|our)\b)", re.I)


def _clauses_agree(o: _Claim, n: _Claim, ov: Value, nv: Value) -> bool:
    """The two values' own clauses are about the same subject, and both name theirs: a clause opening
    with "he" or "they" names no one this rule can check, so it never counts."""
    a, b = _clause_of(o, ov), _clause_of(n, nv)
    if (a == o.body and b == n.body) or not a or not b:
        return False
    pa, pb = _parse(a), _parse(b)
    for clause in (pa, pb):
        first = next(iter(_WORD.finditer(clause.body)), None)
        if first is None or first.group(0).lower() in _OTHERS or not (clause.person or clause.subject):
            return False
    return not (_subjects_differ(pa, pb) or _qualifier_conflict(pa, pb))


@functools.lru_cache(maxsize=8192)  # capture asks it twice of each new fact
def names_a_value(text: str) -> bool:
    """Whether `text` names any value (memory.restatements: what an echo must carry)."""
    return bool(values(text))


@functools.lru_cache(maxsize=8192)  # every search asks it of each hit, every capture of each claim
def states_something(text: str) -> bool:
    """Whether `text` states a value or ends a state: the only claims that can correct another."""
    return (
        _ends_a_state(text)
        or bool(_INSTEAD.search(text))
        or bool(_STATES.search(text))
        or bool(_parse(text).values)  # the values of the text after its label, parsed once per text
    )


_STATES = re.compile(r"(?:\b(?:is|are)|'s)\s+\S+")


@functools.lru_cache(maxsize=8192)
def _signature(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The value kinds a claim states, and every word and value that could anchor one of its slots."""
    claim = _parse(text)
    anchors: set[str] = set()
    for v in claim.values:
        anchors |= _context(claim, v)
        anchors.add(v.norm)
    return frozenset(_kind_family(v.kind) for v in claim.values), frozenset(anchors)


def may_share_slot(a: str, b: str) -> bool:
    """A cheap necessary condition for `same_slot`: a value kind and an anchor in common, or a count
    with its unit on one side and a bare number on the other, whose claim names the unit (the pairs
    `_counted_alike` aligns: "150 commits" / "commits merged ..., which has now reached 165")."""
    (kinds_a, anchors_a), (kinds_b, anchors_b) = _signature(a), _signature(b)
    if not kinds_a.isdisjoint(kinds_b) and not anchors_a.isdisjoint(anchors_b):
        return True
    return _may_count_alike(a, kinds_b, b) or _may_count_alike(b, kinds_a, a)


def _may_count_alike(counted: str, other_kinds: frozenset[str], other: str) -> bool:
    # ranking asks this of most pairs in a block: the other claim's words are read only if a unit is
    units = _units(counted)
    return bool(units) and "number" in other_kinds and not units.isdisjoint(_claim_content(_parse(other)))


@functools.lru_cache(maxsize=8192)
def _units(text: str) -> frozenset[str]:
    """The units of the counts `text` states ("150 commits": commit)."""
    return frozenset(_unit_of(v) for v in _parse(text).values if v.kind.startswith("quantity:"))


def _unit_of(count: Value) -> str:
    """A count's unit as its claim would name it: "150 commits" -> "commit", "four hours" -> "hour"."""
    return _stem(re.sub(r"^(?:[\d.,\s]+|[a-z-]+\s+)", "", count.text, flags=re.I))


@functools.lru_cache(maxsize=65536)  # a conversation's searches meet the same pairs again and again
def same_slot(a: str, b: str) -> bool:
    """`a` and `b` fill one slot with different values (either could be the newer): what ranking
    orders by time when no edge links two facts. What states no current value takes no part: a
    claim that opens with a wish or a condition, a short addition, history, code. Goals and questions
    do: "I'm trying to speed up the API, which now averages 250ms" says where things stand, and
    ranking never lets a question outdate a statement (memory.slots)."""
    if looks_like_code(a) or looks_like_code(b):
        return False
    pa, pb = _parse(a), _parse(b)
    if pa.history or pb.history or _WISH.match(pa.body) or _WISH.match(pb.body):
        return False
    # a short claim that adds one ("got a second line") replaces none; in a long one "also" is about
    # anything
    if (pa.addition and _is_short(pa)) or (pb.addition and _is_short(pb)):
        return False
    if _subjects_differ(pa, pb) or _qualifier_conflict(pa, pb) or _periods_differ(pa, pb):
        return False
    # ranking flags without the sign of intent `judge` asks for, so the slot must name a thing, not
    # only what its values are measured in or hold for: around the values, or elsewhere in both
    # claims ("Our cloud bill runs 3,200 euros a month" / "Correction on the cloud bill: ... 4,100
    # euros a month")
    slots = [slot for _, _, slot in _changes(pa, pb)]
    return any(slot - _MEASURES for slot in slots) or (
        bool(slots) and bool(_claim_content(pa) & _claim_content(pb) - _MEASURES)
    )


def is_strong_cue(cue: str) -> bool:
    """Whether a cue `judge` named ("cue: moved", "cue: as of today") says the speaker means to
    replace a value, rather than only placing a claim in time ("now", "currently")."""
    if " " in cue:  # a phrase ("as of today", "turns out"), but "is now" only places a claim in time
        return not cue.endswith(" now")
    return cue in _STRONG_CUES


def restates(old: str, new: str) -> bool:
    """`new` says again what `old` said: the same words, or one of `old`'s values in the same slot
    (words of `old`'s slot around it) with no other value of its kind beside it. The agent's summary
    of a user's claim, a sub-agent's conclusion, the user's second mention of it, a question that
    names its value: an echo, not a second witness (memory.restatements). Told as history or as a
    wish, or with the value in another person's clause, it restates nothing."""
    if _same_words(old) == _same_words(new):
        return bool(_same_words(old))
    if looks_like_code(old) or looks_like_code(new):
        return False
    o, n = _parse(old), _parse(new)
    if o.history or n.history or _WISH.match(n.body) or _periods_differ(o, n):
        return False
    for ov in o.values:
        echoed = [nv for nv in n.values if _same_value_loosely(ov, nv)]
        if not echoed or _worded(ov):
            continue
        family = _kind_family(ov.kind)
        # another value of this kind in `new` ("from Tuesday to Thursday", "Tuesday or Wednesday"):
        # a change or a choice, never a plain echo
        if any(_kind_family(v.kind) == family and not _same_value_loosely(ov, v) for v in n.values):
            continue
        # a short claim is about one thing: all its words name the slot; a long one's, those around it
        named = _claim_content(o) if _is_short(o) else _context(o, ov)
        value_words = _content(ov.text)
        for nv in echoed:
            slot = (named & _context(n, nv)) - _MEASURES - value_words
            if slot and not _other_person(o, ov, n, nv):
                return True
    return False


def _other_person(o: _Claim, ov: Value, n: _Claim, nv: Value) -> bool:
    """The two values' own clauses name two different people ("my brother's sync" / "our sync")."""
    a, b = _parse(_clause_of(o, ov)), _parse(_clause_of(n, nv))
    return a.person is not None and b.person is not None and a.person != b.person


def _same_value_loosely(a: Value, b: Value) -> bool:
    """`_same_value`, with a plural day or unit read as the singular ("Tuesdays" / "Tuesday")."""
    return _same_value(a, b) or (a.kind == b.kind and a.norm.rstrip("s") == b.norm.rstrip("s"))


@functools.lru_cache(maxsize=16384)
def _same_words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


# What a value is measured in or holds for ("mg", "year"): it makes two values comparable, it does not
# make two claims one. "I take metformin 500 mg" / "Doc added lisinopril 10 mg" share only the unit,
# "My property tax this year is $4,200" / "next year's assessment puts it at $4,650" only the year.
# Counted things ("commits", "engineers") do name what is counted, and stay anchors.
_MEASURES = frozenset(
    _stem(w)
    for w in [
        *(unit for unit, family in _UNITS.items() if family not in ("people", "count")),
        *_words("mg mcg ml g oz l cm mm inch inches ft feet percent degrees calories kcal"),
        *_words(
            "today tonight morning evening night weekend daily weekly monthly yearly annual annually quarter"
        ),
    ]
)


def asks(text: str) -> bool:
    """A question states no value: "Would $700 be a more realistic budget?" changes none."""
    return text.rstrip().endswith("?")


def _period(claim: _Claim) -> str | None:
    """The period a claim opens with ("In March the truck did ...", "Q2 came in at ...", "April was
    slower"): what it says holds for that period only."""
    first = next((v for v in claim.values if v.start < claim.subject_end), None)
    if first is not None and (first.kind == "date" or _QUARTER.fullmatch(first.text)):
        return first.norm
    return None


_QUARTER = re.compile(r"(?:q[1-4]|h[12])", re.I)


def _periods_differ(a: _Claim, b: _Claim) -> str | None:
    pa, pb = _period(a), _period(b)
    return f"another period: {pa} / {pb}" if pa and pb and pa != pb else None


@functools.lru_cache(maxsize=16384)
def _content(text: str) -> frozenset[str]:
    return frozenset(
        _stem(w.group(0))
        for w in _WORD.finditer(text)
        if w.group(0).lower() not in _STOP
        and w.group(0).lower() not in _CUES
        and len(w.group(0)) > 1
        and not _ENDED.fullmatch(w.group(0))
    )
