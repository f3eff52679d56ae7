"""The judge: does a new claim replace an earlier one?

`judge(old, new)` puts the other parts together in order. What states nothing about the user never
replaces anything: code, a question, a goal, history, a hypothetical; nor do a standing instruction
and a statement replace each other. Claims about different things (memory.rules.corrections.subjects)
stay apart, unless the changed value's own clause is about the same thing. Then the ways a claim
replaces another, each with its sign: a state ended ("no longer"), what it replaced named ("instead of
the bus"), the same statement with another ending ("the default branch is main"), or a value changed
in an aligned slot (memory.rules.corrections.alignment) with a sign that the speaker means it
(memory.rules.corrections.cues). An addition ("also") replaces nothing. Where the rules cannot decide,
the answer is no and both claims stay current, for ranking to order.

A verdict says whether the correction was said outright: capture trusts only those below its
similarity guard (memory.graph.supersession).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memory.rules.corrections.alignment import slot_changes
from memory.rules.corrections.claims import (
    HYPOTHETICAL,
    Claim,
    asks,
    content,
    ended_for_another,
    ends_a_state,
    is_short,
    looks_like_code,
    named_after_ending,
    parse,
)
from memory.rules.corrections.cues import ONLY_TIME, intent_of
from memory.rules.corrections.stated_values import Value, values
from memory.rules.corrections.subjects import (
    clauses_agree,
    periods_differ,
    qualifier_conflict,
    subjects_differ,
)
from memory.rules.corrections.vocabulary import CUES, DETERMINERS, STOP, WORD, stem
from memory.rules.splitting import states_a_goal


@dataclass(frozen=True, slots=True)
class Verdict:
    """What `judge` decided about two claims, and why."""

    supersedes: bool
    reason: str
    # said outright: a changed value with a cue that marks a change (not one that only places the
    # claim in time, "currently"), a state named right after its ending, what it replaced named.
    # Below the similarity guard only these count (memory.graph.supersession).
    outright: bool = False


def judge(old: str, new: str) -> Verdict:
    """Whether `new`, said after `old`, replaces it; the reason either way."""
    if looks_like_code(old) or looks_like_code(new):
        return Verdict(False, "code")
    if asks(old) or asks(new):
        return Verdict(False, "a question, not a state")
    # a goal names a target, not a state: "I'm aiming for 90% on the final draft" is no version of "I
    # got 82% on the outline", and two attempts ("I'm trying to verify a triangle with sides 8, 15,
    # 17" / "... with sides 5, 12, 13") are two exercises. When goals with a value first became
    # claims, capture compared them too, and nearly every edge that added was wrong (the hand check
    # in results/supersession/beam-verdicts-goals.jsonl, read in results/supersession/README.md).
    if states_a_goal(old) or states_a_goal(new):
        return Verdict(False, "a goal, not a state")
    o, n = parse(old), parse(new)
    if n.history or o.history:
        return Verdict(False, "told as history")
    # a rule for later turns and a statement of what is: "I corrected 15 APA citation errors" says
    # nothing against "Always use APA 7th edition when I format references" (one rule may replace
    # another: "From now on, use MLA ...")
    if n.instructs != o.instructs:
        return Verdict(False, "an instruction and a statement")
    if HYPOTHETICAL.search(n.body) or HYPOTHETICAL.search(o.body):
        return Verdict(False, "a hypothetical, not a state")
    if period := periods_differ(o, n):
        return Verdict(False, period)
    if different := subjects_differ(o, n) or qualifier_conflict(o, n):
        # "Landlord sent the renewal and we're paying $1.95k now": the value's own clause has its own
        # subject, the user, though the claim opens with someone else
        in_clause = [c for c in slot_changes(o, n) if clauses_agree(o, n, c[0], c[1])]
        if not in_clause or n.addition:
            return Verdict(False, different)
        return _verdict_for(o, n, in_clause)
    if n.ended and not o.ended:
        shared = content(o.body) & content(n.body)
        # what ended, named: one word in a short message ("I'm no longer vegetarian"), two in a long
        # one, where one ("... 51 cards left ...") is a coincidence
        if len(shared) >= (1 if is_short(n) else 2) and not ended_for_another(n.body):
            # named right after its verb ("quit smoking", "stopped training"), or in two words
            named = len(shared) >= 2 or bool(named_after_ending(n.body) & shared)
            return Verdict(True, f"state ended: no longer {' '.join(sorted(shared))}", outright=named)
    if n.addition:
        return Verdict(False, "adds a value")
    if replaced := _replaced_state(o, n):
        # what it replaced, named by a value or in two words ("instead of Jira"), not one common word
        instead = _INSTEAD.search(n.body)
        what = instead.group(1) if instead else ""
        specific = len(content(what)) >= 2 or any(v.kind == "name" for v in values(what))
        return Verdict(True, replaced, outright=specific)
    if replaced := _restated(o, n):
        return Verdict(True, replaced)
    changes = slot_changes(o, n)
    if not changes:
        return Verdict(False, "no aligned value changed")
    return _verdict_for(o, n, changes)


def _verdict_for(o: Claim, n: Claim, changes: list[tuple[Value, Value, frozenset[str]]]) -> Verdict:
    for ov, nv, slot in changes:
        if intent := intent_of(o, n, ov, nv, slot):
            return Verdict(
                True,
                f"same slot ({' '.join(sorted(slot)[:3])}), value changed: {ov.text} -> {nv.text} ({intent})",
                # said outright: a strong cue or the old value named, not "now" or a restatement
                outright=intent.removeprefix("cue: ") not in ONLY_TIME,
            )
    ov, nv, slot = changes[0]
    return Verdict(
        False, f"same slot ({' '.join(sorted(slot)[:3])}) but no sign of a correction: {ov.text} / {nv.text}"
    )


_INSTEAD = re.compile(r"\b(?:instead of|rather than|in place of)\s+((?:\w+\s*){1,3})", re.I)
_COPULA = re.compile(r"(?:\b(?:is|are|was|were)|'s)$", re.I)


def _replaced_state(old: Claim, new: Claim) -> str | None:
    """'I've started cycling to work instead of taking the bus': the new claim names what it replaces."""
    # what the old claim itself set aside ("a Canadian visa instead of a Jamaican one") is not its state
    set_aside = frozenset().union(*(content(m.group(1)) for m in _INSTEAD.finditer(old.body)))
    for match in _INSTEAD.finditer(new.body):
        named = content(match.group(1))
        if named & (content(old.body) - set_aside):
            return f"replaced: {match.group(1).strip()}"
    return None


def _restated(old: Claim, new: Claim) -> str | None:
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
    named = {stem(w.group(0)) for w in WORD.finditer(prefix) if not w.group(0)[0].isupper()}
    if len(named - STOP - CUES - DETERMINERS) < 2 or old.body.rstrip().endswith("!"):
        return None
    return f"same statement, value changed: {' '.join(changed_a)} -> {' '.join(changed_b)}"


@functools.lru_cache(maxsize=8192)  # every search asks it of each hit, every capture of each claim
def states_something(text: str) -> bool:
    """Whether `text` states a value or ends a state: the only claims that can correct another."""
    return (
        ends_a_state(text)
        or bool(_INSTEAD.search(text))
        or bool(_STATES.search(text))
        or bool(parse(text).values)  # the values of the text after its label, parsed once per text
    )


_STATES = re.compile(r"(?:\b(?:is|are)|'s)\s+\S+")
