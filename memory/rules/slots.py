"""Two claims about one slot in one block: which goes first, and what the other is flagged with.

Supersession links a correction to what it corrects when the rules can decide (memory.graph.supersession)
or an agent says so (`remember_fact(supersedes=...)`). When they could not, the block may still hold
two current claims that give one slot different values (memory.rules.corrections.same_slot). Ranking by
similarity alone puts whichever is worded closer to the question first, which is the stale one as
often as not. So, between two such claims:

  trust    a tool result or web page never ranks above the user's own claim about the same slot,
           and is flagged as untrusted (the poisoning case: a page saying "the user's budget is $1");
           nor does its instruction or question ("What is the user's budget?"), which states nothing
           and resembles the query precisely because it is one.
  words    the agent's own claim (a conclusion, a sub-agent's summary, a fact it remembered) restates
           what it read; it never ranks above the user's own claim about the same slot, whichever is
           newer, and is flagged as not the user's words (a stale echo must not outvote a correction).
  time     otherwise the newer claim goes first and the older is flagged "possibly outdated" when
           both say one thing and both were said in short messages (`short_message`, the line capture
           draws between an edge and a proposal). Two long claims, or claims cut from a long
           message, are only ordered: there, look-alikes are the rule. Read by hand in the blocks
           of 500K-token and LoCoMo chats, 4 such pairs in 54 were one slot changing value
           (results/supersession/edge-audit/); the rest were two things of one project ("PostgreSQL
           14" / "10,000+ restaurant entries") or a run of values in time, and an "older" tag told the
           model to pass over a line that still held. Nothing is dropped: the model sees both, and
           the flags say how they relate.

Hits that state no value take no part, and the rest keep their order.

Once the block's lines are chosen, `later_first` sets the order they are read in: a line said later
the same day that may give a slot of a line above it another value (the looser reading, which only
orders) goes above it, trust and the flags above still holding. Which lines, rank decides.

This module is the one place that decides whether two hits are the same slot and how one stands to
the other, and it records the decision on the hits (memory.flags): the block folds, marks and leaves
out lines by reading those records (memory.context.block.fold), never by judging the words again. Where the
block needs more than the order, the record says it: `PossiblyOutdated.foldable` is whether the rules
read the newer claim as a plain correction of the older (capture's `judge`, less its demand that a
correction be said outright), which is when a block may show the older value only as folded into the
newer line (`outdated_by`); `Restates.foldable` whether a restatement says nothing else
(`restatement`, which memory.retrieval.hits calls for the restates edges it reads). Capture's
supersession at write time (memory.graph.supersession) is another thing: it writes edges.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date

from memory.flags import Flag, NotTheUsers, PossiblyOutdated, Restates, SaidBefore, Untrusted
from memory.model import UNTRUSTED_SOURCES, Fact, Hit, Kind, Source
from memory.rules.corrections import (
    asks,
    asks_about_earlier,
    judge,
    looks_like_code,
    may_order,
    may_share_slot,
    same_slot,
    says_one_thing,
    short_message,
    states_something,
)
from memory.rules.splitting import classify

__all__ = [
    "ORDERED",
    "MessageStarts",
    "later_first",
    "may_outdate",
    "order_same_slot",
    "outdated_by",
    "restatement",
    "said_in_short_message",
]

ORDERED = 64


def _untrusted(hit: Hit) -> bool:
    return hit.fact.source in UNTRUSTED_SOURCES


# where a claim's words came from, most trusted first: the user, the agent, a tool or web page
_USER, _AGENT, _TOOL = 2, 1, 0
_USERS_KINDS = frozenset({Kind.USER_INPUT, Kind.DIRECTIVE})


def _trust(hit: Hit) -> int:
    if _untrusted(hit):
        return _TOOL
    # what capture carved from the user's own message (a claim, or a question or goal); a passively
    # captured answer is the agent's conclusion
    said_by_user = hit.fact.kind in _USERS_KINDS and hit.fact.source == Source.PASSIVE_CAPTURE
    return _USER if said_by_user else _AGENT


# the start of each message a claim was cut from, by passage id, for the passage ids asked for (at most
# SHORT_MESSAGE_CHARS + 1 characters of each: all `short_message` reads)
MessageStarts = Callable[[Collection[uuid.UUID]], Mapping[uuid.UUID, str]]


def order_same_slot(hits: Sequence[Hit], messages: MessageStarts | None = None) -> list[Hit]:
    """`hits` (best first) with each same-slot pair put in trust, then time, order; flags added.
    `messages` reads the messages the hits were cut from, once, when a pair needs to know whether
    they were short; without it a claim cut from a message counts as said in a short one."""
    ordered = list(hits)
    if len(ordered) < 2:
        return ordered
    said_in_short = said_in_short_message(ordered[:ORDERED], messages)
    flags: dict[int, list[Flag]] = {id(h): list(h.flags) for h in ordered}
    # an instruction or a question from a tool result states nothing: below every trusted hit
    asks = {id(h) for h in ordered if _untrusted(h) and classify(h.fact.body) == "directive"}
    if asks and len(asks) < len(ordered):
        for h in ordered:
            if id(h) in asks:
                flags[id(h)].append(Untrusted())
        ordered = [h for h in ordered if id(h) not in asks] + [h for h in ordered if id(h) in asks]
    # the first ORDERED hits are what a block holds; past them the order matters to no one
    # code takes no part in a pair (`_one_slot`): left out before its values are read
    valued = [
        h for h in ordered[:ORDERED] if not looks_like_code(h.fact.body) and states_something(h.fact.body)
    ]
    for i, upper in enumerate(valued):
        for lower in valued[i + 1 :]:
            # read in time order, as the rules read a correction: the older claim, then the newer
            older, newer = (
                (upper, lower) if lower.fact.valid_from >= upper.fact.valid_from else (lower, upper)
            )
            if not _one_slot(older.fact.body, newer.fact.body):
                continue
            first, second = _precedence(upper, lower)
            if _asks_only(first.fact.body, second.fact.body):
                continue
            note: Flag
            if _untrusted(second) and not _untrusted(first):
                note = Untrusted(conflicts_with=first.fact.short_id)
            elif _trust(second) < _trust(first):
                note = NotTheUsers(first.fact.short_id)
            elif (
                says_one_thing(second.fact.body)
                and says_one_thing(first.fact.body)
                and said_in_short(first)
                and said_in_short(second)
            ):
                note = outdated_by(second.fact.body, first.fact)
            else:
                # two long claims, or claims of long messages, read as one slot are often two things
                # ("Sprint 2 is due April 20" / "the first sprint is due April 5"): ordered by time,
                # but nothing says one is outdated
                note = SaidBefore(first.fact.short_id)
            if note not in flags[id(second)]:
                flags[id(second)].append(note)
            a, b = ordered.index(first), ordered.index(second)
            if a > b:  # move the one that goes first just above the other
                ordered.insert(b, ordered.pop(a))
    return [replace(h, flags=tuple(flags[id(h)])) if flags[id(h)] != list(h.flags) else h for h in ordered]


def later_first(
    hits: Sequence[Hit], query: str = "", shown: Mapping[uuid.UUID, str] | None = None
) -> list[Hit]:
    """The lines a block holds (`hits`, best first) in the order a reader should meet them: a line
    said later the same day than a line above it, that may give one of that line's slots another
    value, goes just above it. `shown`: fact id -> the words a line shows in place of its claim (an
    excerpt of its message, or the whole message), which is what two lines are compared on; `query`:
    what was asked.

    The header tells the reader that of two lines that disagree the later holds, and `order_same_slot`
    puts the newer of two claims it reads as one slot first. But most updates it cannot read that
    way: the old value sits in a code block or in the excerpt around another claim, or the two are
    worded apart ("scored 6/7" / "7 problems with 6 correct"). Ranked by similarity, whichever is
    worded more like the question comes first, and the question is usually worded like the value first
    said: on the harness's tune chats the current value came first in 12 of 18 BEAM 500K updates.
    Here the pairing is the looser one (`may_order`: a value kind and an anchor in common, and nothing
    that tells them as two things: other subjects or periods, history, an addition), so it
    only orders, never marks, and only within a day, where a value and its change are often said (each
    of 34 updates in BEAM's tune chats) and where `clocked` makes the lines say which came later.
    Between days such loose pairs are mostly different things of one topic; rank decides those.

    Nothing changes which lines are in the block, and nothing goes above a line it is less trusted
    than (a tool's page, the agent's words above the user's claim) or that ranking put it below
    (its flags name that line). A question about how things were (`asks_about_earlier`) keeps the
    rank order: there the earlier value is the answer."""
    if len(hits) < 2 or asks_about_earlier(query):
        return list(hits)
    # each line's day and words once, each pair judged once (a move makes the lines below an old
    # line's neighbours again)
    day = {h.fact.id: h.fact.valid_from.astimezone(UTC).date() for h in hits}
    words = {h.fact.id: (shown or {}).get(h.fact.id, h.fact.body) for h in hits}
    judged: dict[tuple[uuid.UUID, uuid.UUID], bool] = {}

    def goes_above(lower: Hit, upper: Hit) -> bool:
        pair = (lower.fact.id, upper.fact.id)
        if pair not in judged:
            judged[pair] = _said_later_on_its_slot(lower, upper, day, words)
        return judged[pair]

    ordered = list(hits)
    i = 0
    while i < len(ordered):
        upper = ordered[i]
        below = next((j for j in range(i + 1, len(ordered)) if goes_above(ordered[j], upper)), None)
        if below is None:
            i += 1
        else:  # each move puts a later line at i, so this ends
            ordered.insert(i, ordered.pop(below))
    return ordered


def _said_later_on_its_slot(
    lower: Hit, upper: Hit, day: Mapping[uuid.UUID, date], words: Mapping[uuid.UUID, str]
) -> bool:
    said, before = lower.fact, upper.fact
    if not (said.valid_from > before.valid_from and day[said.id] == day[before.id]):
        return False
    if _trust(lower) < _trust(upper) or _placed_below(lower, before.short_id):
        return False
    return may_order(words[before.id], words[said.id])


def _placed_below(hit: Hit, other: str) -> bool:
    """Whether ranking put `hit` below the line `other` (short id) and said so in its flags."""
    for flag in hit.flags:
        if isinstance(flag, SaidBefore) and flag.later == other:
            return True
        if isinstance(flag, PossiblyOutdated) and flag.newer == other:
            return True
        if isinstance(flag, NotTheUsers) and flag.of == other:
            return True
        if isinstance(flag, Untrusted) and flag.conflicts_with == other:
            return True
    return False


def said_in_short_message(hits: Sequence[Hit], messages: MessageStarts | None) -> Callable[[Hit], bool]:
    """Whether a hit of `hits` was said in a short message (`short_message`): a claim that is its
    whole message is its own message; the messages of the others are read (once, for all of `hits`)
    the first time one is asked about, and each hit's answer is worked out once. Without `messages`,
    or for a message no longer there, a claim cut from a message counts as said in a short one."""
    starts: Mapping[uuid.UUID, str] | None = None
    known: dict[uuid.UUID, bool] = {}

    def short(hit: Hit) -> bool:
        passage = hit.fact.passage_id
        if passage is None:
            return short_message(hit.fact.body)
        if messages is None:
            return True
        nonlocal starts
        if starts is None:
            starts = messages({h.fact.passage_id for h in hits if h.fact.passage_id is not None})
        start = starts.get(passage)
        return start is None or short_message(start)

    def said_in_short(hit: Hit) -> bool:
        if hit.fact.id not in known:
            known[hit.fact.id] = short(hit)
        return known[hit.fact.id]

    return said_in_short


def outdated_by(older: str, newer: Fact) -> PossiblyOutdated:
    """The flag on the claim `older` where ranking found `newer` on its slot and newer, both saying
    one thing (the caller has read that much). Foldable where the rules read the newer as a
    correction of the older (capture's judge, less its demand that a correction be said outright:
    nothing is stored). A folded claim's
    words leave the block, so the looser one-slot reading that orders them is not enough: "Just for
    this month we meet the second Tuesday" beside "the book club meets the first Thursday" is one slot
    to it, and folding it would hide the fact that still holds."""
    return PossiblyOutdated(newer.short_id, foldable=judge(older, newer.body).supersedes)


def restatement(body: str, of: str) -> Restates:
    """The flag on the claim `body` that restates the hit `of` (a restates edge, memory.graph.restatements).
    Foldable where that is all it says: a long message that also restates a value says more."""
    return Restates(of, foldable=says_one_thing(body))


def _asks_only(newer: str, older: str) -> bool:
    """A question names a value, it does not state one: it never outdates a statement."""
    return asks(newer) and not asks(older)


def _one_slot(older: str, newer: str) -> bool:
    # `same_slot` holds no code to a slot, so code is asked about first: `may_share_slot`, cheap for a
    # claim, reads the words around every value of its text, and an answer with a code block has
    # hundreds (on a 1M chat's session, 143 of 146 of the agent's replies sampled were code, and took
    # 95% of a fresh process's slot reading, up to 120 ms for one reply)
    if looks_like_code(older) or looks_like_code(newer):
        return False
    return may_share_slot(older, newer) and same_slot(older, newer)


def may_outdate(newer: str, older: str) -> bool:
    """Whether ranking would put `newer` first and flag `older` possibly outdated (trust aside)."""
    return _one_slot(older, newer) and not _asks_only(newer, older)


def _precedence(a: Hit, b: Hit) -> tuple[Hit, Hit]:
    """(the one that goes first, the other): the user's claim before the agent's before a tool's,
    else the newer."""
    if _trust(a) != _trust(b):
        return (b, a) if _trust(a) < _trust(b) else (a, b)
    return (b, a) if b.fact.valid_from > a.fact.valid_from else (a, b)
