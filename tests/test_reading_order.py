"""The order a block's lines are read in (memory.rules.slots.later_first): a line said later the same day
that may give a slot of a line above it another value goes above it, so that the change is met before the
value it changes. Rank still decides which lines are in the block, trust still decides between the user
and a tool, and a question about how things were keeps the rank order."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from test_block_reader import T0, user_said

from memory.context.assembler import Budgets
from memory.context.recall import plan_query
from memory.flags import SaidBefore
from memory.graph.store import FactStore
from memory.model import Hit, Source
from memory.rules.corrections import same_slot
from memory.rules.corrections.alignment import may_order
from memory.rules.slots import later_first

# rank puts first the line worded like the question; the change, worded apart, comes later the same day
KEPT = "Our nightly backup keeps 7 copies, and I check them every Monday."
CHANGED = "The backup retention is 14 copies since the storage upgrade."


# a value set in a config block, and its change said in words: the slot rules read code as stating nothing
CONFIG = "Here is my config:\n```yaml\nbackup:\n  copies: 7  # nightly backup copies\n```"
RAISED = "The nightly backup keeps 14 copies since the storage upgrade."
ASK = "How many copies does the nightly backup config keep?"


def bodies(hits: list[Hit]) -> list[str]:
    return [h.fact.body for h in hits]


def test_a_change_said_later_the_same_day_is_read_before_the_value_it_changes(store: FactStore) -> None:
    hits = user_said(store, "later", [(KEPT, timedelta(hours=0)), (CHANGED, timedelta(hours=3))])
    assert bodies(later_first(hits, "How many copies does the backup keep?")) == [CHANGED, KEPT]


def test_lines_of_other_days_or_other_things_keep_their_rank(store: FactStore) -> None:
    days_apart = user_said(store, "days", [(KEPT, timedelta(0)), (CHANGED, timedelta(days=2))])
    assert bodies(later_first(days_apart)) == [KEPT, CHANGED]
    # said later that day, with a value, but of nothing the first line gives a value to
    other = user_said(store, "other", [(KEPT, timedelta(0)), ("My cat is 3 years old.", timedelta(hours=2))])
    assert bodies(later_first(other)) == [KEPT, "My cat is 3 years old."]
    # said earlier: already below the line it would go above
    earlier = user_said(store, "earlier", [(CHANGED, timedelta(hours=3)), (KEPT, timedelta(0))])
    assert bodies(later_first(earlier)) == [CHANGED, KEPT]


def test_a_question_about_how_things_were_keeps_the_rank_order(store: FactStore) -> None:
    hits = user_said(store, "history", [(KEPT, timedelta(hours=0)), (CHANGED, timedelta(hours=3))])
    assert bodies(later_first(hits, "How many copies did the backup keep at first?")) == [KEPT, CHANGED]


def test_nothing_goes_above_a_line_it_is_less_trusted_than_or_ranked_below(store: FactStore) -> None:
    [mine] = user_said(store, "trust", [(KEPT, timedelta(0))])
    page = "A forum post says backups keep 30 copies."
    [read] = store.capture_message(
        store.root("trust"),
        page,
        source=Source.TOOL_RESULT,
        message_id="web",
        valid_from=T0 + timedelta(hours=1),
    ).facts
    assert bodies(later_first([mine, Hit(read, 0.8, 0.2, 0.8, None, False, None)])) == [KEPT, page]
    # ranking said why this one goes below that one (a pair order_same_slot read): that holds
    mine = user_said(store, "flagged", [(KEPT, timedelta(hours=0)), (CHANGED, timedelta(hours=3))])
    placed = replace(mine[1], flags=(SaidBefore(mine[0].fact.short_id),))
    assert bodies(later_first([mine[0], placed])) == [KEPT, CHANGED]


def test_lines_are_compared_on_what_they_show(store: FactStore) -> None:
    # the line above shows its claim in an excerpt of its message, which holds the value
    hits = user_said(
        store,
        "shown",
        [("I check the backups every Monday.", timedelta(0)), (CHANGED, timedelta(hours=3))],
    )
    assert bodies(later_first(hits)) == ["I check the backups every Monday.", CHANGED]
    excerpt = {hits[0].fact.id: "Our backup retention is 7 copies. I check the backups every Monday."}
    assert bodies(later_first(hits, shown=excerpt)) == [CHANGED, "I check the backups every Monday."]


def test_the_block_every_door_returns_reads_the_change_first(store: FactStore) -> None:
    # every claim a candidate: the fake embedder's similarities are noise, keyword search is not
    store.search_options = replace(store.search_options, relevance_floor=-1.0)
    root = store.root("door")
    store.capture_message(root, CONFIG, message_id="m1", valid_from=T0)
    store.capture_message(root, RAISED, message_id="m2", valid_from=T0 + timedelta(hours=3))
    [code] = [h.fact.body for h in store.search(root, ASK).hits if "copies: 7" in h.fact.body]
    assert not same_slot(code, RAISED)  # code states no value to the slot rules: ranking orders nothing
    ranked = bodies(list(store.search(root, ASK).hits))
    assert ranked.index(code) < ranked.index(RAISED)  # rank alone reads the old value first
    call = plan_query(store, root, ASK, now=T0 + timedelta(days=1))
    lines = call.block.splitlines()
    assert lines.index(next(x for x in lines if "14 copies" in x)) < lines.index(
        next(x for x in lines if "copies: 7" in x)
    )
    assert bodies(list(call.result.hits)).index(RAISED) < bodies(list(call.result.hits)).index(code)


def test_a_line_that_shows_its_whole_message_is_compared_on_the_message(store: FactStore) -> None:
    store.search_options = replace(store.search_options, relevance_floor=-1.0)
    root = store.root("whole")
    # ranked first by the question's words, the claim that states no value; its line is the message
    store.capture_message(
        root, "I check the nightly backup every Monday. It keeps 7 copies.", message_id="m1", valid_from=T0
    )
    store.capture_message(root, CHANGED, message_id="m2", valid_from=T0 + timedelta(hours=3))
    ask = "When do I check the nightly backup every Monday?"
    call = plan_query(store, root, ask, budgets=Budgets(retrieved=3000), now=T0 + timedelta(days=1))
    assert call.tier is not None and any("7 copies" in m for m in call.tier.messages.values())
    lines = [x for x in call.block.splitlines() if "copies" in x]
    assert "14 copies" in lines[0] and "7 copies" in lines[1], lines


def test_lines_told_as_two_things_keep_their_rank(store: FactStore) -> None:
    # one value and another person's, or a value told as history: look-alikes, not a change
    for session, later in (
        ("person", "My coworker Jen keeps 14 copies of her nightly backup."),
        ("history", "We used to keep 3 backup copies."),
    ):
        hits = user_said(store, session, [(KEPT, timedelta(0)), (later, timedelta(hours=2))])
        assert bodies(later_first(hits)) == [KEPT, later]


# two long requests of one day: the pool size changes, and each names its queries in passing with its
# own word before them ("slow queries" / "busy queries"), which tells nothing about the pool
POOL = (
    "I'm trying to speed up our API by cutting slow queries, and I think raising the pool size to 20 "
    "connections could help. Can you check my settings?"
)
POOL_CHANGED = "I want to change the pool size to 40 connections, since my busy queries keep timing out. How do I set it?"


def test_a_qualifier_in_passing_does_not_tell_a_long_message_apart(store: FactStore) -> None:
    assert same_slot(POOL, POOL_CHANGED) and may_order(POOL, POOL_CHANGED)
    hits = user_said(store, "passing", [(POOL, timedelta(0)), (POOL_CHANGED, timedelta(minutes=20))])
    # each message's claim with the pool size, shown as its whole message
    said = {"m0": POOL, "m1": POOL_CHANGED}
    lines = [h for h in hits if "pool size" in h.fact.body]
    whole = {h.fact.id: said[h.fact.message_id or ""] for h in lines}
    assert [whole[h.fact.id] for h in later_first(lines, "What pool size should the API use?", whole)] == [
        POOL_CHANGED,
        POOL,
    ]
    # a qualifier of the thing whose value changes still tells two things apart
    staging, build = "The staging server has 4GB of memory.", "The build server has 8GB of memory."
    assert not may_order(staging, build) and not same_slot(staging, build)


def test_an_excerpt_that_opens_mid_sentence_names_no_subject() -> None:
    # two excerpts of config requests: the first opens on "a Redis client", read as a person when
    # taken for the subject, the second on "my current config"
    old = "…Create a Redis client client = Redis() # set the pool size to 20 connections"
    new = "…Here's my current config # set the pool size to 40 connections"
    assert may_order(old, new)
    # a sentence still names whose value it is
    assert not may_order(
        "My brother set the pool size to 20 connections.", "I set the pool size to 40 connections."
    )
