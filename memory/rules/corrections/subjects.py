"""Are two claims about the same thing of the same owner?

A claim can replace only a claim about the same thing. Look-alikes share words and kinds of value but
not their subject: another person ("my brother" against "I"), another pet or owner ("my cat Luna"
against "my dog Rex"), another numbered item ("service 3" / "service 4"), another qualifier of the
same thing ("the marketing budget" against "the engineering budget", "free users" / "paid users"),
another period ("In March ..." / "In April ..."). Each test here says why two claims are about
different things, or that they are not; none of them looks at values.
"""

from __future__ import annotations

import functools
import re

from memory.rules.corrections.claims import Claim, claim_content, clause_of, parse, period
from memory.rules.corrections.stated_values import Value
from memory.rules.corrections.vocabulary import (
    CUES,
    DETERMINERS,
    RELATIONS,
    SELF,
    STOP,
    VERBISH,
    WORD,
    outside,
    stem,
    word_set,
)


def subjects_differ(old: Claim, new: Claim) -> str | None:
    """Why the two claims' subjects are different things, or None: another numbered item, another
    person or owner, other things, or another qualifier of one owner's thing."""
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
        and not _named_relation(old, new)
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


def _named_relation(old: Claim, new: Claim) -> bool:
    """One claim names a person the other introduced with who they are to the user: "My daughter Mia
    goes to Lincoln Elementary" / "Mia switched to Oak Ridge Elementary" are both about Mia."""
    return any(
        named.person is not None
        and named.person.startswith("name:")
        and related.person not in (None, "self")
        and not related.person.startswith("name:")
        and stem(named.person.removeprefix("name:")) in related.subject
        for named, related in ((old, new), (new, old))
    )


_POSSESSION = re.compile(r"\b(?:my|our)\s+([a-z][a-z'-]+)", re.I)


def _same_possession(old: Claim, new: Claim) -> bool:
    """Both claims name the same thing of the user's ("my rent"): whoever acts on it, it is theirs. Or
    one is the user's own, naming a thing the other has someone act on as the user's: "I'm on 50mg of
    sertraline" / "My doctor raised my sertraline to 100mg"."""
    old_mine, new_mine = _mine(old), _mine(new)
    if old_mine & new_mine:
        return True
    return any(
        own.person == "self" and bool(theirs & claim_content(own))
        for own, theirs in ((old, new_mine), (new, old_mine))
    )


def _mine(claim: Claim) -> set[str]:
    """The things a claim names as the user's ("my rent", "our office"), people and pets aside."""
    return {stem(m) for m in _POSSESSION.findall(claim.body)} - RELATIONS


_FRAMES = DETERMINERS | word_set("for of on in at with to")


def qualifier_conflict(old: Claim, new: Claim) -> str | None:
    """One thing named with two qualifiers: "the staging server" / "the build server", "free users" /
    "paid users". Two claims share a content word, and each puts another content word before it."""
    return next(iter(qualified_apart(old, new).values()), None)


def qualified_apart(old: Claim, new: Claim) -> dict[str, str]:
    """Each content word (stem) both claims name with qualifiers of their own, in order, with why
    (`qualifier_conflict`'s reason): a caller that knows which words name the thing keeps those."""
    before_old, before_new = _modifiers(old), _modifiers(new)
    apart = {}
    for head in sorted(before_old.keys() & before_new.keys()):
        a, b = before_old[head], before_new[head]
        if a and b and not a & b:
            apart[head] = f"another qualifier: {sorted(a)[0]} {head} / {sorted(b)[0]} {head}"
    return apart


@functools.lru_cache(maxsize=8192)
def _modifiers(claim: Claim) -> dict[str, frozenset[str]]:  # cached: never mutate the result
    spans = [(v.start, v.end) for v in claim.values]
    words = outside(WORD.finditer(claim.body), spans)
    found: dict[str, set[str]] = {}
    for index in range(1, len(words)):
        prev, word = words[index - 1], words[index]
        head, mod = word.group(0).lower(), prev.group(0).lower()
        if head in STOP or head in CUES or len(head) < 3:
            continue
        found.setdefault(stem(head), set())
        # after "the" or "for", even a verb's form is an adjective: "the paid plan", "for paid users"
        framed = index > 1 and words[index - 2].group(0).lower() in _FRAMES
        if claim.body[prev.end() : word.start()].strip() == "" and (
            _is_modifier(mod) or (framed and mod in VERBISH and mod.endswith(("ed", "id", "ing")))
        ):
            found[stem(head)].add(stem(mod))
    return {h: frozenset(m) for h, m in found.items()}


# Words that point back at a thing already named ("same week"): they tell it from nothing.
_REFERRING = word_set("same")


def _is_modifier(word: str) -> bool:
    return not (
        word in STOP
        or word in _REFERRING
        or word in CUES
        or word in DETERMINERS
        or word in VERBISH
        or word in SELF
        or word.endswith("ly")
        or len(word) < 3
    )


def periods_differ(a: Claim, b: Claim) -> str | None:
    """Why the two claims hold for different periods ("In March ..." / "In April ..."), or None."""
    pa, pb = period(a), period(b)
    return f"another period: {pa} / {pb}" if pa and pb and pa != pb else None


_OTHERS = word_set("he she they it his her their its he's she's they're it's")


def clauses_agree(o: Claim, n: Claim, ov: Value, nv: Value) -> bool:
    """The two values' own clauses are about the same subject, and both name theirs: a clause opening
    with "he" or "they" names no one this rule can check, so it never counts."""
    a, b = clause_of(o, ov), clause_of(n, nv)
    if (a == o.body and b == n.body) or not a or not b:
        return False
    pa, pb = parse(a), parse(b)
    for clause in (pa, pb):
        first = next(iter(WORD.finditer(clause.body)), None)
        if first is None or first.group(0).lower() in _OTHERS or not (clause.person or clause.subject):
            return False
    return not (subjects_differ(pa, pb) or qualifier_conflict(pa, pb))


def other_person(o: Claim, ov: Value, n: Claim, nv: Value) -> bool:
    """The two values' own clauses name two different people ("my brother's sync" / "our sync")."""
    a, b = parse(clause_of(o, ov)), parse(clause_of(n, nv))
    return a.person is not None and b.person is not None and a.person != b.person
