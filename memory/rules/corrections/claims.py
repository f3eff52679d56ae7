"""One claim, read on its own: what it is about, and how it is told.

Before two claims can be compared, each is read once (`parse`, cached: capture and ranking meet the
same claims again and again). A claim may open with a label ("Correction: ..."), which is set aside
from its body. Its subject is the words before its verb: whose thing it is (the speaker's, a
relation's, a named person's) and which thing. How it is told decides whether it can replace
anything: told as history ("used to"), as an addition ("also"), as an ending ("no longer"), as a
hypothetical or a wish ("if we moved ..."), as a standing instruction ("always ...",
memory.rules.standing). Code, questions and nothing-but-talk state nothing. A
short claim (`SHORT_CLAIM_WORDS`) is about one thing, so all its words name that thing; a long one's
value belongs to its own clause. These facts are what the comparisons (memory.rules.corrections.subjects,
memory.rules.corrections.alignment, memory.rules.corrections.verdicts) read.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

from memory.rules.corrections.stated_values import Value, values
from memory.rules.corrections.vocabulary import (
    CUES,
    DETERMINERS,
    RELATIONS,
    SELF,
    SELF_POSSESSIVE,
    STOP,
    VERBISH,
    WORD,
    stem,
    word_count,
    word_set,
)
from memory.rules.standing import is_standing_instruction


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim as the rules read it (`parse`)."""

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
    # a standing instruction ("Always use APA 7th edition when I format references") asks for every
    # later turn; it is no version of a statement that shares its words, nor they of it
    instructs: bool

    def __hash__(self) -> int:
        # a claim is a key of the rules' caches, once per value of it (alignment._context): hashed
        # field by field, its values and word sets, a long answer's claim took 0.2 ms a lookup. Its
        # text decides every other field (only `parse` makes one), and equal claims share it
        return hash(self.text)


# sized for a long conversation's claims, and the clauses of them the rules parse too: a capture
# compares each new claim with the earlier ones nearest it (memory.graph.earlier_claims), whose parses it
# finds here
@functools.lru_cache(maxsize=16384)
def parse(text: str) -> Claim:
    """`text` read once: its label set aside, its values, its subject and whose it is, how it is told."""
    body = _LABEL.sub("", text.strip(), count=1) if _LABEL.match(text.strip()) else text.strip()
    found = tuple(values(body))
    subject, person, subject_end = _subject(body)
    head = text.strip()[: len(text.strip()) - len(body) + subject_end]  # the label and the subject
    return Claim(
        text=text,
        body=body,
        values=found,
        subject=subject,
        person=person,
        items=frozenset((stem(m[1]), m[2]) for m in _ITEM.finditer(head) if m[1].lower() not in STOP),
        subject_end=subject_end,
        history=bool(_HISTORY.search(body)),
        addition=bool(_ADDITION.search(body)),
        ended=ends_a_state(body),
        instructs=is_standing_instruction(body),
    )


_LABEL = re.compile(
    r"^(?:[^\s:]+\s+){0,2}[^\s:]+:\s+"
)  # "Correction: ...", "Update: ...", "New personal best: ..."
# A numbered thing: "service 3", "item #7", "line 12" (in a subject, the number names the thing)
_ITEM = re.compile(r"\b([A-Za-z][A-Za-z-]+)\s+#?(\d+)\b(?![.:,]?\d)")
_USER = re.compile(r"^(?:the\s+)?user(?:'s|’s)?\b", re.I)


def _subject(body: str) -> tuple[frozenset[str], str | None, int]:
    """The content words before the first verb, who the subject is when it is a person, and where
    the subject ends. An aside in brackets is about something else ("Guest list grew (my mom ...)").
    A month or a day in it names a period ("The January electric bill"), so it stays."""
    if _USER.match(body):
        body = _USER.sub("my", body, count=1)
    aside = body.find("(", 0, 160)
    words = list(WORD.finditer(body[: aside if aside >= 0 else 160]))
    subject: list[str] = []
    person: str | None = None
    # no verb in the first words: the whole of a short claim is its subject ("Body Paragraph 2")
    end = words[7].end() if len(words) >= 8 else (aside if aside >= 0 else len(body))
    for index, match in enumerate(words[:8]):
        word = match.group(0)
        lowered = word.lower().replace("’", "'")
        after_determiner = index > 0 and words[index - 1].group(0).lower() in DETERMINERS
        if not after_determiner and (
            lowered in VERBISH or (index > 0 and lowered.endswith("ed") and lowered not in RELATIONS)
        ):
            end = match.start()
            if person is None and lowered in _CHANGE_VERBS:
                # "They moved the conference to ...", "Finance cut the budget to $8k": who acted is
                # not what changed; the thing after the verb is
                acted_on = _acted_on(words[index + 1 :])
                if acted_on:
                    return acted_on, None, end
            break
        if lowered in SELF and index == 0:
            # "We transferred my daughter to Oakridge": what the user changed is the subject
            verb = next((w for w in words[1:4] if w.group(0).lower() in _CHANGE_VERBS), None)
            if verb is not None:
                rest = words[words.index(verb) + 1 :]
                owner = _owner(rest)
                acted_on = _acted_on(rest)
                if acted_on and owner is not None:
                    return acted_on - {owner}, owner, verb.start()
            return frozenset(), "self", 0
        if lowered in SELF_POSSESSIVE:
            person = person or "self"
            continue
        if lowered in STOP or lowered in CUES:
            continue
        stemmed = stem(lowered)
        if (stemmed in RELATIONS or lowered in RELATIONS) and person in (None, "self"):
            person = stemmed  # the first relation owns the rest: "my husband's manager" is his
        elif (
            index == 0
            and word[0].isupper()
            and person is None
            and len(words) > 1
            and words[1].group(0).lower() in VERBISH
        ):
            person = "name:" + lowered  # "Sarah works at ...": a named person or thing
        subject.append(stemmed)
    return frozenset(subject), person, end


# verbs that change a thing's value: the thing is their object, whoever did it
_CHANGE_VERBS = word_set(
    "moved switched changed raised increased decreased lowered reduced bumped upgraded downgraded "
    "migrated revised rescheduled postponed pushed shifted renamed cut slashed extended replaced swapped "
    "dropped hiked updated"
)
_OBJECT_ENDS = word_set("to from by for with until till back at in on into as because since so and but")


def _owner(words: list[re.Match[str]]) -> str | None:
    """Whose thing a change verb's object is: "my daughter" is the daughter's, "our budget" ours."""
    first = [w.group(0).lower() for w in words[:3]]
    if first and first[0] in SELF_POSSESSIVE:
        nxt = stem(first[1]) if len(first) > 1 else ""
        return nxt if nxt in RELATIONS else "self"
    return None


def _acted_on(words: list[re.Match[str]]) -> frozenset[str]:
    """The content words of a change verb's object: "the conference" of "moved the conference to"."""
    found: list[str] = []
    for match in words[:5]:
        lowered = match.group(0).lower()
        if lowered in _OBJECT_ENDS:
            break
        if lowered in STOP or lowered in CUES or lowered in DETERMINERS:
            continue
        found.append(stem(lowered))
    return frozenset(found)


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


def ends_a_state(body: str) -> bool:
    """'I no longer work there', 'we stopped using Jenkins'; not 'I'll never quit'."""
    return any(
        m.group(0).lower().startswith(("no longer", "not ")) or not _NEGATED_ENDING.search(body[: m.start()])
        for m in _ENDED.finditer(body)
    )


def named_after_ending(body: str) -> frozenset[str]:
    """The first two content words after each ending ("quit smoking", "stopped training for")."""
    found: set[str] = set()
    for m in _ENDED.finditer(body):
        following = list(WORD.finditer(body, m.end(), min(len(body), m.end() + 40)))[:2]
        found.update(stem(w.group(0)) for w in following)
    return frozenset(found)


def ended_for_another(body: str) -> bool:
    """ "you can't volunteer there anymore", "she quit": someone else's state ended, not the user's."""
    return any(
        re.search(
            r"\b(?:you|he|she|they)\b(?:\s+\S+){0,2}\s*$", body[max(0, m.start() - 30) : m.start()], re.I
        )
        for m in _ENDED.finditer(body)
    )


# "If the budget were 60k ...", "we'd pay $75 there", "thinking about switching": what might be
HYPOTHETICAL = re.compile(
    r"^(?:if|what if|suppose|supposing|imagine|assuming|in case)\b|\b(?:if (?:we|i|it|they|the)\b.*\b(?:were|would|could|'d))|"
    r"\b(?:thinking (?:about|of)|considering|might (?:switch|move|go|change)|would (?:be|cost|mean))\b",
    re.I,
)
# what ranking reads as a wish or a condition: only at a claim's start, since long claims carry
# "considering ..." and "would be" about anything
WISH = re.compile(
    r"(?:if|what if|suppose|supposing|imagine|assuming|in case|might|maybe)\b|"
    r"(?:(?:i'm|i am|we're|we are)\s+)?(?:thinking (?:about|of)|considering)\b",
    re.I,
)


# a line of code (pasted into a chat) is not a claim about the world: "margin: 20px;" / "margin: 10px;"
_CODE = re.compile(
    r"[{}`]|;\s*$|\b[\w.-]+/[\w.-]+@[\w.-]+|\s==?\s|=>|</?[a-z][\w-]*(?:\s[^>]*)?>|\b\w+\([^)]*\)|^\s*(?:import|from\s+\S+\s+import|"
    r"const|let|var|def|return|function|class|if|else|for|while)\b",
    re.M,
)


@functools.lru_cache(maxsize=16384)  # asked of both claims of every pair capture and ranking compare
def looks_like_code(text: str) -> bool:
    """A line of code or markup: braces, a statement's semicolon, an assignment, a call, a tag."""
    return bool(_CODE.search(text))


def asks(text: str) -> bool:
    """A question states no value: "Would $700 be a more realistic budget?" changes none."""
    return text.rstrip().endswith("?")


SHORT_CLAIM_WORDS = 20  # a message this short is about one thing


@functools.lru_cache(maxsize=8192)
def is_short(claim: Claim) -> bool:
    """At most SHORT_CLAIM_WORDS words: all of it is about one thing."""
    return word_count(claim.text) <= SHORT_CLAIM_WORDS


def says_one_thing(text: str) -> bool:
    """A claim short enough to be about one thing (at most SHORT_CLAIM_WORDS words)."""
    return is_short(parse(text))


@functools.lru_cache(maxsize=16384)
def content(text: str) -> frozenset[str]:
    """The stems of the words of `text` that name something: no stop word, cue word or ending."""
    return frozenset(
        stem(w.group(0))
        for w in WORD.finditer(text)
        if w.group(0).lower() not in STOP
        and w.group(0).lower() not in CUES
        and len(w.group(0)) > 1
        and not _ENDED.fullmatch(w.group(0))
    )


@functools.lru_cache(maxsize=8192)
def claim_content(claim: Claim) -> frozenset[str]:
    # ranking compares every pair of a block's claims: a claim's words are read once
    return content(claim.body)


_CLAUSE_BREAK = re.compile(r"[;:!?]|,\s+(?:and|but|so|while|whereas|which)\b|\.\s|\s[-–—]\s")


def clause_bounds(body: str, value: Value) -> tuple[int, int]:
    """Where the clause that holds `value` starts and ends in `body`."""
    starts, ends = _breaks(body)
    n = bisect.bisect_right(ends, value.start)  # the breaks that end before the value starts
    if (
        (n and ends[n - 1] == value.start)
        or (n < len(starts) and starts[n] < value.start)
        or (value.start > 0 and _WORD_CHAR.match(body, value.start - 1) is not None)
    ):
        # where a break could end at the value, its match turns on a word boundary that cutting the
        # text at the value moves (a value glued to the word before it), and a break that runs into
        # the value hides what the text before it holds: read there as the rules always have, with
        # the text cut at the value
        lo = max((m.end() for m in _CLAUSE_BREAK.finditer(body, 0, value.start)), default=0)
    else:
        lo = ends[n - 1] if n else 0
    after = _CLAUSE_BREAK.search(body, value.end)
    return lo, after.start() if after else len(body)


_WORD_CHAR = re.compile(r"\w")


@functools.lru_cache(maxsize=1024)
def _breaks(body: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where each clause break of `body` starts, and ends: read once per claim, not once per value
    (a long answer states dozens, and each read ran from the start of the text)."""
    found = [m.span() for m in _CLAUSE_BREAK.finditer(body)]
    return tuple(a for a, _ in found), tuple(b for _, b in found)


def clause_of(claim: Claim, value: Value) -> str:
    """The clause that holds `value`, where a clause of the user's own also starts one."""
    body = claim.body
    lo, hi = clause_bounds(body, value)
    lo = max([lo, *(m.end() for m in _SELF_CLAUSE.finditer(body, 0, value.start))])
    return body[lo:hi].strip()


# "... and we're paying", ", I'm now": a clause of the user's own inside a longer claim
_SELF_CLAUSE = re.compile(r"(?:,|\band|\bso|\bbut)\s+(?=(?:i|we|i'm|we're|i've|we've|my|our)\b)", re.I)


def period(claim: Claim) -> str | None:
    """The period a claim opens with ("In March the truck did ...", "Q2 came in at ...", "April was
    slower"): what it says holds for that period only."""
    first = next((v for v in claim.values if v.start < claim.subject_end), None)
    if first is not None and (first.kind == "date" or _QUARTER.fullmatch(first.text)):
        return first.norm
    return None


_QUARTER = re.compile(r"(?:q[1-4]|h[12])", re.I)
