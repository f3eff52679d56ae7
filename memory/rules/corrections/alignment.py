"""Slot alignment: which value of one claim and which of another fill the same slot?

A slot is a thing of an owner that holds one value at a time: my rent, the standup's time, the team's
size. Two claims give one slot two values when a changed value sits among the same content words in
both (its context: the words around it in its clause), so "$120k per year" aligns with "$100k per
year" and not with "12 engineers". Values both claims hold anchor the slot too, as does the old value
named as the old one ("switched from Jira to Linear"), or, for two claims with one value of a kind
each, their common subject ("launch is set for October 3rd" / "launch got pushed to October 17").
Some words frame a value alike under different verbs ("live in", "moved to", "based in"), so those
claims meet though they share no other word.

`slot_changes` is what the judge (memory.rules.corrections.verdicts) weighs; `same_slot` and
`may_share_slot` are what ranking asks of two current claims (memory.rules.slots), and `restates` what
capture asks of an echo (memory.graph.restatements).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from typing import TypeVar

from memory.rules.corrections.claims import (
    WISH,
    Claim,
    claim_content,
    clause_bounds,
    content,
    is_short,
    looks_like_code,
    parse,
)
from memory.rules.corrections.cues import marked_as_old
from memory.rules.corrections.stated_values import (
    MEASURES,
    Value,
    kind_family,
    same_value,
    same_value_loosely,
    small,
    unit_of,
    unit_words,
    values,
    worded,
)
from memory.rules.corrections.subjects import (
    other_person,
    periods_differ,
    qualified_apart,
    subjects_differ,
)
from memory.rules.corrections.vocabulary import (
    CUES,
    RELATIONS,
    STOP,
    WORD,
    Spans,
    outside,
    outside_lazily,
    same_words,
    stem,
)

_T = TypeVar("_T")


# ranking compares every pair of a block's claims (memory.rules.slots): what one claim's analysis yields is
# computed once per claim, not once per pair
@functools.lru_cache(maxsize=16384)
def _context(claim: Claim, value: Value, window: int = 6) -> frozenset[str]:
    """Content words around `value` within its clause (other values out): the slot it fills."""
    body = claim.body
    lo, hi = clause_bounds(body, value)
    # the other values' spans, read as `_value_spans` holds them: with the value's own, which changes
    # nothing (no word before it starts inside it, and every word after starts at or past its end)
    others = _value_spans(claim)
    before = _last_words(body, lo, value.start, others, window)
    following = list(itertools.islice(outside_lazily(WORD.finditer(body, value.end, hi), others), window))
    picked = [w.group(0) for w in before] + [w.group(0) for w in following]
    frames = {_FRAMES_OF[w.lower()] for w in picked if w.lower() in _FRAMES_OF}
    return (
        frozenset(stem(w) for w in picked if w.lower() not in STOP and w.lower() not in CUES and len(w) > 1)
        | frames
    )


# where `_last_words` starts reading: about a dozen words
_TAIL_CHARS = 120


def _last_words(body: str, lo: int, end: int, others: Spans, n: int) -> list[re.Match[str]]:
    """The last `n` words of `body[lo:end]` that start inside none of `others`, as reading the whole
    range would find them, reading only as much of its end as it takes. A long message's clause is
    read once per value in it; reading each from its start made a claim's analysis quadratic in its
    length. A scan that starts inside a word may find part of it first; every word after that one
    is a word of the whole range's reading, so more than `n` found settles the last `n`."""
    width = _TAIL_CHARS
    while True:
        start = max(lo, end - width)
        found = outside(WORD.finditer(body, start, end), others)
        if start == lo or len(found) > n:
            return found[-n:]
        width *= 4


@functools.lru_cache(maxsize=8192)
def _value_spans(claim: Claim) -> Spans:
    """The spans of the claim's values other than names, sorted once for all of its values."""
    return Spans.of((v.start, v.end) for v in claim.values if v.kind != "name")


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


def slot_changes(old: Claim, new: Claim) -> list[tuple[Value, Value, frozenset[str]]]:
    """Pairs (old value, new value, shared slot words) where `new` gives an aligned slot another value."""

    def key(v: Value) -> tuple[str, str]:
        return (kind_family(v.kind), v.norm)

    old_norms = {key(v) for v in old.values}
    new_marked = {id(v): marked_as_old(new.body, v) for v in new.values}
    new_by_key: dict[tuple[str, str], list[Value]] = {}
    for v in new.values:
        new_by_key.setdefault(key(v), []).append(v)
    shared_values = frozenset(n for _, n in old_norms & new_by_key.keys())
    # several names on a side: a list (brands, people), not one slot's value
    listed_names = _listed(new, lambda v: new_marked[id(v)]) or _listed(old, lambda v: False)
    old_norm_count: dict[str, int] = {}
    for v in old.values:
        old_norm_count[v.norm] = old_norm_count.get(v.norm, 0) + 1
    marked = [v for v in new.values if new_marked[id(v)]]
    # whether every copy of a value in the new claim is unmarked, read once per value rather than once
    # per pair (a number a long text repeats has hundreds of copies)
    restated_unmarked = {k: not any(new_marked[id(v)] for v in vs) for k, vs in new_by_key.items()}
    # what a value's name is, and whether it is its clause's only number, read once per value, not once
    # per pair: two long answers hold hundreds of values, and each reading scans them all
    named_by, alone = _read_once(_named_by), _read_once(_alone_in_clause)

    pairs = []
    for nv in new.values:
        if key(nv) in old_norms or new_marked[id(nv)]:
            continue
        for ov in old.values:
            counted = (
                _counted_alike(old, ov, new, nv, alone)
                if kind_family(ov.kind) != kind_family(nv.kind)
                else None
            )
            if same_value(ov, nv) or (kind_family(ov.kind) != kind_family(nv.kind) and not counted):
                continue
            if _count_other_things(old, ov, new, nv):
                continue
            if (nv.kind == "name" and listed_names) or _owner(old, ov) or _owner(new, nv):
                continue
            # a count written as a word is a small one: "two campaigns" is no "40k" budget
            if worded(ov) != worded(nv) and not small(ov if worded(nv) else nv):
                continue
            # "Flask 2.3.1" / "Gunicorn 20.1.0": each version is its own thing's
            owners = named_by(old, ov), named_by(new, nv)
            if owners[0] and owners[1] and not same_value(owners[0], owners[1]):
                continue
            if _apposed(old, ov) != _apposed(new, nv):  # "my friend Carla, 58": her age, no one else's
                continue
            # the old value restated in the new claim, unmarked: a list of values, not a change
            if restated_unmarked.get(key(ov), False):
                continue
            # values both claims hold, other than the one changing: they anchor the slot too
            anchors = {n for n in shared_values if n != ov.norm or old_norm_count[n] > 1}
            # "switched from Jira to Linear": the old value, named as the old one, is the slot
            if any(same_value(v, ov) and abs(v.start - nv.start) <= 30 for v in marked):
                anchors.add(ov.norm)
            slot = (_context(old, ov) & _context(new, nv)) | anchors | ({counted} if counted else set())
            # "Product launch is set for October 3rd" / "ok launch got pushed ..., now targeting
            # October 17": both about the launch, each with one date
            if not slot and _count(old, ov.kind) == 1 and _count(new, nv.kind) == 1:
                slot = old.subject & new.subject
            if slot:
                pairs.append((ov, nv, slot))
    return pairs


@functools.lru_cache(maxsize=8192)
def _owners(claim: Claim) -> frozenset[int]:
    """Where the claim's owners start: each name said right after who the person is to the user, in a
    claim that gives another name ("My sister Ana lives in Denver"). The owner is whose slot the claim
    fills, not its value; Denver is the value. Where the name is all the claim gives ("first 1:1 with
    my manager Raj Patel"), it is the value."""
    if claim.person in (None, "self"):
        return frozenset()
    names = [v for v in claim.values if v.kind == "name"]
    return frozenset(
        v.start
        for v in names
        if (introduced := _INTRODUCED.search(claim.body, max(0, v.start - 40), v.start)) is not None
        and introduced.group(1).lower() in RELATIONS
        and any(other.start > v.end for other in names)
    )


# "my sister " right before a name
_INTRODUCED = re.compile(r"\b(?:my|our)\s+([A-Za-z'-]+)\s+$", re.IGNORECASE)


def _owner(claim: Claim, value: Value) -> bool:
    return value.kind == "name" and value.start in _owners(claim)


def _listed(claim: Claim, marked: Callable[[Value], bool]) -> bool:
    """Whether `claim` names several things (brands, people) besides its owner: a list, whose names are
    no one slot's value. One marked as the old value is the slot, not a listed one."""
    return sum(v.kind == "name" and not marked(v) and not _owner(claim, v) for v in claim.values) > 1


def _read_once(read: Callable[[Claim, Value], _T]) -> Callable[[Claim, Value], _T]:
    """`read` of a claim's value, computed once per value: for one comparison, whose claims and values
    stay alive while it runs (their ids are the key)."""
    seen: dict[tuple[int, int], _T] = {}

    def once(claim: Claim, value: Value) -> _T:
        key = (id(claim), id(value))
        if key not in seen:
            seen[key] = read(claim, value)
        return seen[key]

    return once


def _alone_in_clause(claim: Claim, bare: Value) -> bool:
    """No other number or count in the clause that holds `bare`."""
    lo, hi = clause_bounds(claim.body, bare)
    return not any(
        (v.kind == "number" or v.kind.startswith("quantity:")) and v is not bare and lo <= v.start < hi
        for v in claim.values
    )


def _counted_alike(
    old: Claim, ov: Value, new: Claim, nv: Value, alone: Callable[[Claim, Value], bool] = _alone_in_clause
) -> str | None:
    """ "150 commits" / "commits merged ..., which has now reached 165": a count with its unit, and a
    bare number in a claim that names that unit (or another word for it: "9 members" / "three new
    people came, so the book club is 12 now") and no other count in the bare number's clause ("Two
    people joined, so the platform team is 14 now": 14 is the team's count, two the change), unless
    the bare number says it counts something else ("165 stars"). The unit, or None."""
    for counted, claim, bare in ((ov, new, nv), (nv, old, ov)):
        if counted.kind.startswith("quantity:") and bare.kind == "number":
            unit = unit_of(counted)
            if not (unit and alone(claim, bare)):
                return None
            # "165 stars" counts stars, whatever else its claim says of commits
            words, own = frozenset(map(_singular, unit_words(counted))), _counted_words(claim, bare)
            if own and own.isdisjoint(words):
                return None
            return unit if not words.isdisjoint(claim_content(claim)) else None
    return None


def _count_other_things(old: Claim, ov: Value, new: Claim, nv: Value) -> bool:
    """ "52 sources in the library" / "it flagged 15 citation errors": each number is followed by what
    it counts, and the two name different things, so they are two counts, not one slot's values."""
    counts = _counted_words(old, ov), _counted_words(new, nv)
    return bool(counts[0]) and bool(counts[1]) and counts[0].isdisjoint(counts[1])


@functools.lru_cache(maxsize=16384)  # asked of each value once per value of every other claim
def _counted_words(claim: Claim, value: Value) -> frozenset[str]:
    """What a bare number counts, as the words right after it ("15 APA citation errors": citation,
    error; "the 7th edition": edition), up to three, to the first word that names nothing ("12 now",
    "5 of them"). Read past: a name ("42 Harbor Street" is an address, not a count of anything), a
    word saying the count is partial or added ("3 new metrics"), and a unit or its abbreviation
    ("650 square feet" / "720 sq ft" stay one area), which say what a number measures, not what it
    counts."""
    if value.kind != "number":
        return frozenset()
    words: list[str] = []
    ordinal = _ORDINAL_SUFFIX.match(claim.body, value.end)
    at = ordinal.end() if ordinal else value.end
    for _ in range(6):
        word = _WORD_AFTER.match(claim.body, at)
        if word is None:
            break
        at = word.end()
        token = word.group(1)
        lowered = token.lower()
        # "new" is a stop word and a cue, read past before either stops the reading
        if lowered in _READ_PAST:
            continue
        if lowered in STOP or lowered in CUES or len(words) == 3:
            break
        if token[0].isupper() or lowered in MEASURES or _abbreviation(lowered):
            continue
        words.append(_singular(stem(lowered)))
    return frozenset(words)


def _singular(word_stem: str) -> str:
    # a short plural keeps its s in `stem` ("cups"), and "1 cup" counts what "1.5 cups" does
    return word_stem[:-1] if word_stem.endswith("s") and not word_stem.endswith("ss") else word_stem


def _abbreviation(word: str) -> bool:
    # "sq", "ft", "mbps": too short or without a vowel to be a word that names a thing
    return len(word) < 3 or not any(c in "aeiouy" for c in word)


# the next word, with only spaces between it and what came before
_WORD_AFTER = re.compile(r"[ \t]+([A-Za-z][A-Za-z'-]*)\b")
_ORDINAL_SUFFIX = re.compile(r"(?:st|nd|rd|th)\b", re.I)
_READ_PAST = frozenset({"new", "more", "other", "extra", "additional", "different", "total", "separate"})


def _named_by(claim: Claim, value: Value) -> Value | None:
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


def _apposed(claim: Claim, value: Value) -> bool:
    """A number set off after a name by a comma ("Carla, 58,"): that person's, said in passing."""
    return value.kind == "number" and bool(
        _APPOSED.search(claim.body[max(0, value.start - 30) : value.start])
    )


_APPOSED = re.compile(r"\b[A-Z][a-z]+,\s*$")


def _count(claim: Claim, kind: str, *, unmarked: bool = False) -> int:
    return sum(v.kind == kind and not (unmarked and marked_as_old(claim.body, v)) for v in claim.values)


@functools.lru_cache(maxsize=65536)  # a conversation's searches meet the same pairs again and again
def same_slot(a: str, b: str) -> bool:
    """`a` and `b` fill one slot with different values (either could be the newer): what ranking
    orders by time when no edge links two facts. What states no current value takes no part: a
    claim that opens with a wish or a condition, a short addition, history, code. Goals and questions
    do: "I'm trying to speed up the API, which now averages 250ms" says where things stand, and
    ranking never lets a question outdate a statement (memory.rules.slots)."""
    if looks_like_code(a) or looks_like_code(b):
        return False
    pa, pb = parse(a), parse(b)
    if _two_things(pa, pb):
        return False
    # ranking flags without the sign of intent `judge` asks for, so the slot must name a thing, not
    # only what its values are measured in or hold for: around the values, or elsewhere in both
    # claims ("Our cloud bill runs 3,200 euros a month" / "Correction on the cloud bill: ... 4,100
    # euros a month")
    slots = [slot for _, _, slot in slot_changes(pa, pb)]
    return any(slot - MEASURES for slot in slots) or (
        bool(slots) and bool(claim_content(pa) & claim_content(pb) - MEASURES)
    )


def _two_things(pa: Claim, pb: Claim) -> bool:
    """Whether two claims, whatever their words in common, are told as two things: history, a wish or
    a condition, a standing instruction beside a statement, a short addition ("got a second line": in
    a long claim "also" is about anything), other subjects, qualifiers or periods."""
    if pa.history or pb.history or WISH.match(pa.body) or WISH.match(pb.body):
        return True
    if pa.instructs != pb.instructs:  # a rule for later turns beside a statement of what is
        return True
    if (pa.addition and is_short(pa)) or (pb.addition and is_short(pb)):
        return True
    if not _fragment(pa) and not _fragment(pb) and subjects_differ(pa, pb):
        return True
    # the words naming the thing are read (both ways' slot changes) only where a qualifier conflicts
    apart = qualified_apart(pa, pb)
    return bool(apart and not _named(pa, pb).isdisjoint(apart)) or bool(periods_differ(pa, pb))


def _fragment(claim: Claim) -> bool:
    """A text that opens in the middle of a sentence (an excerpt of a message, "…Redis configuration:
    ```python ... client = redis.Redis(...)"): what it opens with is not its subject, so it tells no
    one's or nothing's apart ("a Redis client" read as a person)."""
    return claim.body.startswith(("…", "..."))


def _named(pa: Claim, pb: Claim) -> frozenset[str]:
    """The words that may name the thing two claims give values to: their subjects, and the words
    around the values either gives another. A long message names many things in passing, each with
    its own words before it ("to reduce evictions" / "reducing cache evictions", "git merge" /
    "commit merge"); a qualifier tells two things apart only on the thing whose value changes."""
    named = set(pa.subject | pb.subject)
    for old, new in ((pa, pb), (pb, pa)):
        for _, _, slot in slot_changes(old, new):
            named |= slot
    return frozenset(named)


def may_order(a: str, b: str) -> bool:
    """The looser reading of one slot, which only orders two lines (memory.rules.slots.later_first):
    a value kind and an anchor in common (`may_share_slot`), and nothing that tells them as two
    things (`same_slot`'s exclusions). Code counts: a value set in a config block is the user's value."""
    return may_share_slot(a, b) and not _two_things(parse(a), parse(b))


# every block reads it of each line said within a minute of another, and a chat's lines come back
# block after block (a long answer's values cost milliseconds to read)
@functools.lru_cache(maxsize=8192)
def topic_and_kinds(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """What `text` is about (`content`) and the kinds of value it states, names aside: the loosest
    reading of one thing given two values, two lines sharing a word and a kind
    (memory.context.block.clocked gives such lines of one minute their second)."""
    return content(text), frozenset(kind_family(v.kind) for v in values(text) if v.kind != "name")


def may_share_slot(a: str, b: str) -> bool:
    """A cheap necessary condition for `same_slot`: a value kind and an anchor in common, or a count
    with its unit on one side and a bare number on the other, whose claim names the unit (the pairs
    `_counted_alike` aligns: "150 commits" / "commits merged ..., which has now reached 165")."""
    (kinds_a, anchors_a), (kinds_b, anchors_b) = _signature(a), _signature(b)
    if not kinds_a.isdisjoint(kinds_b) and not anchors_a.isdisjoint(anchors_b):
        return True
    return _may_count_alike(a, kinds_b, b) or _may_count_alike(b, kinds_a, a)


@functools.lru_cache(maxsize=8192)
def _signature(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The value kinds a claim states, and every word and value that could anchor one of its slots."""
    claim = parse(text)
    anchors: set[str] = set()
    for v in claim.values:
        anchors |= _context(claim, v)
        anchors.add(v.norm)
    return frozenset(kind_family(v.kind) for v in claim.values), frozenset(anchors)


def _may_count_alike(counted: str, other_kinds: frozenset[str], other: str) -> bool:
    # ranking asks this of most pairs in a block: the other claim's words are read only if a unit is
    units = _units(counted)
    return bool(units) and "number" in other_kinds and not units.isdisjoint(claim_content(parse(other)))


@functools.lru_cache(maxsize=8192)
def _units(text: str) -> frozenset[str]:
    """The words naming what the counts `text` states count ("150 commits": commit; "9 members":
    member and the other words for people)."""
    return frozenset(
        word for v in parse(text).values if v.kind.startswith("quantity:") for word in unit_words(v)
    )


def restates(old: str, new: str, *, by_user: bool = False) -> bool:
    """`new` says again what `old` said: the same words, or one of `old`'s values in the same slot
    (words of `old`'s slot around it) with no other value of its kind beside it. The agent's summary
    of a user's claim, a sub-agent's conclusion, the user's second mention of it, a question that
    names its value: an echo, not a second witness (memory.graph.restatements). Told as history or as a
    wish, or with the value in another person's clause, it restates nothing. Said `by_user`, it also
    says no value `old` does not: "... my Stripe integration, which is now at 78%" after "I want
    more unit tests for the Stripe integration" repeats a name and gives a figure of the user's own,
    which an echo's line would take out of the block. (The agent's "Given the March 14 deadline, a
    two day review fits" derives from the user's value, and goes with it.)"""
    if same_words(old) == same_words(new):
        return bool(same_words(old))
    if looks_like_code(old) or looks_like_code(new):
        return False
    o, n = parse(old), parse(new)
    if o.history or n.history or WISH.match(n.body) or periods_differ(o, n) or _gives_another_value(o, n):
        return False
    if by_user and _adds_a_value(o, n):
        return False
    # the user's rule for later turns is no echo of the user's statement, nor the reverse: an echo is
    # retired with what it echoes, and "I'm worried about Scott's progress" ending would take "Always
    # give detailed timelines when I ask about Scott's progress" with it (the agent's "Understood: I
    # will ..." still echoes the rule)
    if by_user and o.instructs != n.instructs:
        return False
    for ov in o.values:
        echoed = [nv for nv in n.values if same_value_loosely(ov, nv)]
        if not echoed or worded(ov):
            continue
        family = kind_family(ov.kind)
        # another value of this kind in `new` ("from Tuesday to Thursday", "Tuesday or Wednesday"):
        # a change or a choice, never a plain echo
        if any(kind_family(v.kind) == family and not same_value_loosely(ov, v) for v in n.values):
            continue
        # a short claim is about one thing: all its words name the slot; a long one's, those around it
        named = claim_content(o) if is_short(o) else _context(o, ov)
        value_words = content(ov.text)
        for nv in echoed:
            slot = (named & _context(n, nv)) - MEASURES - value_words
            if slot and not other_person(o, ov, n, nv):
                return True
    return False


def _adds_a_value(o: Claim, n: Claim) -> bool:
    """`n` states a value (not a count in words) that none of `o`'s values matches."""
    theirs = [ov for ov in o.values if not worded(ov)]
    return any(not worded(nv) and not any(same_value_loosely(ov, nv) for ov in theirs) for nv in n.values)


def _gives_another_value(o: Claim, n: Claim) -> bool:
    """`n` states a value of a kind `o` states too, and none of `o`'s: "The CFO moved the board report
    deadline up to Tuesday, October 15." after "The Q3 board report is due to the CFO on Friday,
    October 18." repeats the CFO and changes the date. An echo changes nothing, so that is a change
    (for supersession to judge), whatever else it repeats."""
    theirs = [ov for ov in o.values if not worded(ov)]
    for nv in n.values:
        if worded(nv):
            continue
        same_kind = [ov for ov in theirs if kind_family(ov.kind) == kind_family(nv.kind)]
        if same_kind and not any(same_value_loosely(ov, nv) for ov in same_kind):
            return True
    return False
