"""Cues and intent: does the speaker mean to replace the old value?

A changed value in the same slot is not yet a correction. Long chats about one project are full of
dated plans, amounts and versions of different things that share a word; read as corrections, each
would retire something the user still means. So a change counts only with a sign that the speaker
means one (`intent_of`): a strong cue just before the new value ("moved it to Friday",
"correction: ..."), the old value named as the old one ("from Friday to Monday", "Monday, not
Friday"), a weak cue ("now") with two slot words, or a restatement (the same words around another
value). A short message is about the one thing it mentions, so a cue anywhere in it counts. A date
needs a strong cue, and a plan ("I'll ...") is changed only by one: two dates or two plans are two
events unless one was moved.
"""

from __future__ import annotations

import functools
import re

from memory.rules.corrections.claims import Claim, is_short
from memory.rules.corrections.stated_values import Value, same_value, values
from memory.rules.corrections.vocabulary import CUES, STOP, WORD, outside, stem, word_set

# Cues that say the speaker means to replace something. A strong one is enough with an aligned slot; a
# weak one ("now", "new", "since") also starts stories, so it needs two slot words; with none, only a
# restatement (the same words around another value) is a correction. Without this gate, long chats
# about one project (many dated plans, amounts and versions of different things that share a word)
# retired most of what the user had said, nearly all of it wrongly (results/supersession/README.md:
# the run with the intent gate, against the one before it).
STRONG_CUES = word_set(
    "actually correction corrected update updated changed change moved moving switched swapped replaced "
    "raised increased decreased lowered reduced bumped upgraded downgraded migrated revised amended "
    "rescheduled rebooked postponed extended relocated scaled shuffled slipped delayed meant typo instead "
    "rather anymore longer cut renamed slashed hiked trimmed pushed fired misremembered misspoke mistaken wrong"
)
WEAK_CUES = CUES - STRONG_CUES - word_set("since new")


# A claim's value changing, below the guard (memory.graph.supersession): everything but the cues that only
# place a claim in time ("currently", "recently", "my new role"), which any story has
ONLY_TIME = word_set("currently recently new latest since")
SHORT_WEAK_CUES = WEAK_CUES | word_set("new")  # in a short message "my new manager is Priya" is one


# what people say when a value changes, in more than one word
CHANGE_PHRASE = re.compile(
    r"\b(?:as of (?:today|now|this|last|yesterday|monday|tuesday|wednesday|thursday|friday|this)|"
    r"from now on|scratch that|change of plans?|turns out|down to|went from|"
    r"(?:is|are|'s) now)\b",
    re.I,
)


def is_strong_cue(cue: str) -> bool:
    """Whether a cue `judge` named ("cue: moved", "cue: as of today") says the speaker means to
    replace a value, rather than only placing a claim in time ("now", "currently")."""
    if " " in cue:  # a phrase ("as of today", "turns out"), but "is now" only places a claim in time
        return not cue.endswith(" now")
    return cue in STRONG_CUES


# "from X to Y", "X, not Y", "instead of X": the old value named as the old one
_OLD_MARKER = re.compile(
    r"(?:\bfrom|\bnot|\binstead of|\brather than|\bno longer|\bwas|\bwere|\bformerly)\s+$", re.I
)


def marked_as_old(body: str, value: Value) -> bool:
    """The words just before `value` name it as the old value: "from Friday (to Monday)", "not
    Friday", "instead of Jira", "was $1,450"."""
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


def intent_of(old: Claim, new: Claim, was: Value, value: Value, slot: frozenset[str]) -> str | None:
    """Why `new` means to replace `old`'s value `was` with `value`, or None. A short message is about
    the one thing it mentions, so any cue in it counts ("Sold the Civic; I drive a Tesla now"); in a
    long one a cue must stand just before the new value, a weak one with two slot words, since a cue
    elsewhere in a run-on sentence ("..., especially since I reduced filler words") is about something
    else. A date needs a strong cue: two dates are two events ("my new job starts May 1" / "anxiety
    spikes on May 29 with the new job") unless one was moved. The old value named as the old one ("from
    Friday to Monday") or a restatement (the same words around another value) needs no cue."""
    # "from Friday to Monday", "Monday, not Friday": this slot's old value named as the old one
    if any(marked_as_old(new.body, v) and same_value(v, was) for v in new.values):
        return "old value named"
    short = is_short(new)
    words = _text_words(new) if short else _words_before(new, value)
    if cue := words & STRONG_CUES:
        return f"cue: {sorted(cue)[0]}"
    near = new.text.strip() if short else _text_before(new, value)[-60:]
    if phrase := CHANGE_PHRASE.search(near):
        return f"cue: {phrase.group(0).lower()}"
    # "I'll talk to Matthew" / "I'll talk to Stephen": two plans; a changed plan says so ("moved")
    if _PLAN.match(old.body) or _PLAN.match(new.body):
        return None
    if _restatement(old, new):
        return "restated"
    if value.kind == "date":
        return None
    if (cue := words & (SHORT_WEAK_CUES if short else WEAK_CUES)) and (short or len(slot) >= 2):
        return f"cue: {sorted(cue)[0]}"
    return None


_PLAN = re.compile(
    r"(?:i|we)(?:'ll|’ll| will| shall|'m going to| am going to|'re going to| are going to)\s", re.I
)


CUE_WINDOW = 6  # words before a changed value where its cue may stand


def _words_before(claim: Claim, value: Value, window: int = CUE_WINDOW) -> frozenset[str]:
    """The `window` words just before `value`, and its claim's label ("Correction: ..."): where a
    speaker puts the word that marks a changed value ("moved it to Friday", "now $120k")."""
    offset = len(claim.text.strip()) - len(claim.body)  # the label's length
    words = [w.group(0).lower() for w in WORD.finditer(_text_before(claim, value))]
    label = [w.group(0).lower() for w in WORD.finditer(claim.text.strip()[:offset])]
    return frozenset(words[-window:] + label)


def _text_before(claim: Claim, value: Value) -> str:
    """The claim's text, its label included, up to `value`."""
    return claim.text.strip()[: len(claim.text.strip()) - len(claim.body) + value.start]


# a claim's own facts, computed once per claim rather than once per value pair `judge` weighs
@functools.lru_cache(maxsize=8192)
def _text_words(claim: Claim) -> frozenset[str]:
    # "now that I've finished" opens a reason, it marks no change
    return frozenset(w.group(0).lower() for w in WORD.finditer(_NOW_THAT.sub(" ", claim.text)))


_NOW_THAT = re.compile(r"\bnow that\b", re.I)


def _restatement(old: Claim, new: Claim) -> bool:
    """The two claims' words, outside their values, are mostly the same: one sentence said with
    another value ("our budget is $100k per year" / "... $120k per year"), not two sentences that
    share a topic word. One shared word is enough only when a single value changed: "I met Kimberly
    at the café on May 7" / "I met Matthew at the hub on June 5" changes everything but the verb."""
    a, b = _plain_words(old), _plain_words(new)
    shared = a & b
    if not shared or len(shared) / len(a | b) < RESTATEMENT_OVERLAP:
        return False
    old_norms = {v.norm for v in old.values}
    changed = sum(v.norm not in old_norms and not marked_as_old(new.body, v) for v in new.values)
    return len(shared) >= 2 or changed == 1


RESTATEMENT_OVERLAP = 0.5  # of the words either claim has


@functools.lru_cache(maxsize=8192)
def _plain_words(claim: Claim) -> frozenset[str]:
    # the whole text: a label says what the slot is ("New personal best: I got my 5K down to 25:50")
    spans = [(v.start, v.end) for v in values(claim.text)]
    return frozenset(
        stem(w.group(0))
        for w in outside(WORD.finditer(claim.text), spans)
        if w.group(0).lower() not in STOP and w.group(0).lower() not in CUES and len(w.group(0)) > 1
    )


# A question about how things were, not how they are: "What was my A1C in March?", "What was my
# original target?", "How has my rent changed?". Its answer is an older value, or the run of them.
_ABOUT_EARLIER = re.compile(
    r"\b(?:initial(?:ly)?|original(?:ly)?|at first|first (?:time|set|planned|started|agreed)|previous(?:ly)?|"
    r"prior|before (?:i|we|the|my|our|that|it|then|switching|changing|moving)|earlier|used to|back (?:in|when|then)|"
    r"at the (?:start|beginning)|when (?:i|we) (?:first|started|began)|over time|history|progress(?:ed|ion)?|"
    r"trend|how (?:has|have|did) .{1,60}\bchange|in (?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)"
    r"[a-z]*\b|in (?:19|20)\d\d\b|last (?:week|month|year|time)|(?:a|one|two|three|few) (?:weeks?|months?|years?) ago)",
    re.IGNORECASE,
)


def asks_about_earlier(question: str) -> bool:
    """Whether `question` asks how something was, or how it changed, rather than how it is: the
    block then shows the older values on a slot as lines of their own, with their dates, instead of
    folding them into the newest (memory.context.block.fold)."""
    return bool(_ABOUT_EARLIER.search(question))
