"""Two claims of one slot in a block: said in short messages, the older is marked outdated; cut from
long messages, they are only ordered, newer first, with nothing that tells the model to pass the
older one over (memory.rules.slots). In long messages look-alikes are the rule, and a run of values
in time is history, not a correction."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from memory.context.block import render_block
from memory.flags import PossiblyOutdated, SaidBefore
from memory.graph.store import FactStore
from memory.model import Hit, Kind
from memory.rules import slots
from memory.rules.corrections import (
    SHORT_MESSAGE_CHARS,
    SHORT_MESSAGE_WORDS,
    same_slot,
    short_message,
    word_count,
)
from memory.rules.slots import order_same_slot

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
# two rooms: ranking reads one slot (paint), capture's rules no correction, so both stay current
OLD = "The living room walls are painted Agreeable Gray."
NEW = "Just finished painting the bedroom Sea Salt."
QUERY = "Which colors are the living room and the bedroom painted?"
# a paragraph around each claim: the way people write when they plan with an assistant
AROUND = (
    " I spent the weekend going through the house room by room with my partner, and we agreed to "
    "keep the hallway as it is, to replace the old curtains first, and to look at the budget again "
    "at the end of the month before anything else changes."
)


def _said(store: FactStore, session: str, texts: list[str]) -> None:
    root = store.root(session)
    for day, text in enumerate(texts):
        store.capture_message(root, text, message_id=f"m{day}", valid_from=T0 + timedelta(days=day))


def _hit(store: FactStore, session: str, body: str) -> Hit:
    return next(h for h in store.search(session, QUERY).hits if h.fact.body == body)


def test_a_paragraph_is_a_long_message_and_a_chat_turn_a_short_one() -> None:
    assert short_message(OLD) and not short_message(OLD + AROUND)
    assert word_count(OLD + AROUND) > SHORT_MESSAGE_WORDS
    # few words, many characters: a pasted blob is no chat turn
    assert not short_message("x" * (SHORT_MESSAGE_CHARS + 1))


def test_claims_of_short_messages_mark_the_older_value_outdated(store: FactStore) -> None:
    _said(store, "short", [OLD, NEW])
    older = _hit(store, "short", OLD)
    assert any(isinstance(f, PossiblyOutdated) for f in older.flags)
    assert "an older line" in render_block(store.search("short", QUERY))


def test_claims_of_long_messages_are_ordered_newer_first_and_nothing_is_marked(store: FactStore) -> None:
    _said(store, "long", [OLD + AROUND, NEW + AROUND])
    result = store.search("long", QUERY)
    bodies = [h.fact.body for h in result.hits]
    assert bodies.index(NEW) < bodies.index(OLD)  # still in time order
    older = _hit(store, "long", OLD)
    assert not any(isinstance(f, PossiblyOutdated) for f in older.flags)
    assert any(isinstance(f, SaidBefore) for f in older.flags)
    block = render_block(result)
    assert "an older line" not in block and "replaces an earlier value" not in block
    assert OLD in block and NEW in block  # both values, each on its own line


def test_one_long_message_in_the_pair_is_enough_to_only_order_them(store: FactStore) -> None:
    _said(store, "mixed", [OLD + AROUND, NEW])
    older = _hit(store, "mixed", OLD)
    assert not any(isinstance(f, PossiblyOutdated) for f in older.flags)


def test_the_messages_are_read_once_and_only_when_a_pair_asks(store: FactStore) -> None:
    _said(store, "reads", [OLD + AROUND, NEW + AROUND])
    hits = list(store.search("reads", QUERY).hits)
    asked: list[Collection[uuid.UUID]] = []

    def messages(ids: Collection[uuid.UUID]) -> Mapping[uuid.UUID, str]:
        asked.append(ids)
        return store.passages(list(ids))

    order_same_slot(hits, messages)
    assert len(asked) == 1
    alone = [h for h in hits if h.fact.body == OLD]
    order_same_slot(alone, messages)  # one hit: no pair, no read
    assert len(asked) == 1


def test_code_takes_no_part_in_a_pair_and_its_values_are_never_read(
    store: FactStore, monkeypatch: Any
) -> None:
    # `same_slot` holds no code to a slot; reading the words around each value of an answer with a
    # code block (hundreds, in a long one) only to find that out cost a fresh process up to 120 ms a reply
    root = store.root("code")
    store.capture_message(root, "The cache TTL is 300 seconds.", message_id="m0", valid_from=T0)
    code = "Here is the config:\n```python\nCACHE_TTL = 600  # seconds\nMAX_ITEMS = 1000\n```"
    store.remember(root, code, kind=Kind.CONCLUSION)
    hits = list(store.search("code", "What is the cache TTL in seconds?").hits)
    assert {h.fact.body for h in hits} >= {"The cache TTL is 300 seconds.", code}
    read: list[tuple[str, str]] = []
    shared = slots.may_share_slot
    monkeypatch.setattr(slots, "may_share_slot", lambda a, b: read.append((a, b)) or shared(a, b))
    ordered = order_same_slot(hits)
    assert not any(code in pair for pair in read)
    assert not same_slot("The cache TTL is 300 seconds.", code)  # what reading it would have found
    assert [h.fact.id for h in ordered] == [h.fact.id for h in hits]
    assert all(h.flags == before.flags for h, before in zip(ordered, hits, strict=True))
