"""The block as a small model reads it: dates on every line, older values folded into the newer one
(which says so, without the older words),
the agent's stale echoes left out, identical lines once, tool lines marked, no failure notices."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from memory.context.block import HEADER, fold, render_block, said_when
from memory.doors.capture import capture_said
from memory.flags import PossiblyOutdated
from memory.graph.store import FactStore
from memory.model import Hit, Kind, SearchResult, Source
from memory.rules.conclusions import is_bare_name, is_failure_notice
from memory.rules.slots import order_same_slot, outdated_by, restatement

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def hits_for(store: FactStore, session: str, said: list[tuple[str, Kind, Source, int]]) -> list[Hit]:
    root = store.root(session)
    facts = []
    for i, (text, kind, source, day) in enumerate(said):
        at = T0 + timedelta(days=day)
        if kind is Kind.USER_INPUT:
            facts += store.capture_message(root, text, message_id=f"m{i}", valid_from=at).facts
        else:
            facts.append(
                store.remember(root, text, kind=kind, source=source, source_key=f"k{i}", valid_from=at)
            )
    return [Hit(f, 0.9 - i * 0.01, 0.1, 0.9, None, False, None) for i, f in enumerate(facts)]


def user_said(store: FactStore, session: str, said: list[tuple[str, timedelta]]) -> list[Hit]:
    """The user's messages, each captured at T0 plus its offset, as hits in the order given."""
    root = store.root(session)
    facts = [
        fact
        for i, (text, after) in enumerate(said)
        for fact in store.capture_message(root, text, message_id=f"m{i}", valid_from=T0 + after).facts
    ]
    return [Hit(f, 0.9 - i * 0.01, 0.1, 0.9, None, False, None) for i, f in enumerate(facts)]


def test_every_line_says_when_it_was_said() -> None:
    now = datetime(2026, 12, 2, 15, 30, tzinfo=UTC)
    assert said_when(now - timedelta(minutes=5), now) == "today 15:25"
    assert said_when(now - timedelta(days=1), now) == "yesterday"
    assert said_when(now - timedelta(days=3), now) == "3 days ago"
    assert said_when(datetime(2023, 5, 8, tzinfo=UTC), now) == "8 May 2023"
    assert said_when(datetime(2023, 5, 8, tzinfo=UTC)) == "8 May 2023"


def test_lines_that_share_a_day_say_their_time_so_the_later_one_can_be_told(store: FactStore) -> None:
    # a value and its change said the same day, a third line the day before: dated to the day alone,
    # the first two would not say which holds ("the later one holds")
    hits = hits_for(
        store,
        "same-day",
        [
            ("The team offsite is in Lisbon.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
            ("I booked the flights for the offsite.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 1),
            ("Our team offsite venue is a hotel near the river.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 1),
        ],
    )
    later = replace(
        hits[2], fact=replace(hits[2].fact, valid_from=hits[1].fact.valid_from + timedelta(hours=5))
    )
    block = render_block(SearchResult((hits[0], hits[1], later), "Where is the offsite?", False, 0.9))
    lines = block.splitlines()[2:]
    assert "(20 Nov 2026) The team" in lines[0]  # alone on its day: the date
    assert "(21 Nov 2026 09:00) I booked" in lines[1] and "(21 Nov 2026 14:00) Our team" in lines[2]
    now = hits[1].fact.valid_from + timedelta(days=1, hours=2)
    relative = render_block(
        SearchResult((hits[0], hits[1], later), "Where?", False, 0.9), now=now
    ).splitlines()
    assert "(2 days ago) The team" in relative[2] and "(yesterday 09:00) I booked" in relative[3]
    # one day, one time (a conversation dated by its session): the time would tell nothing
    same = replace(later, fact=replace(later.fact, valid_from=hits[1].fact.valid_from))
    plain = render_block(SearchResult((hits[1], same), "Where?", False, 0.9)).splitlines()[2:]
    assert all("(21 Nov 2026) " in line for line in plain)


def test_lines_of_one_minute_that_may_give_one_thing_two_values_say_their_second(store: FactStore) -> None:
    hits = user_said(
        store,
        "same-minute",
        [
            ("The offsite budget is $4,000.", timedelta(seconds=0)),
            ("I raised the offsite budget to $5,500.", timedelta(seconds=40)),
            ("The offsite is near the river.", timedelta(seconds=20)),
            ("My cat is 3 years old.", timedelta(seconds=30)),
        ],
    )
    at = hits[0].fact.valid_from
    block = render_block(SearchResult(tuple(hits), "What is the offsite budget?", False, 0.9))
    lines = block.splitlines()[2:]
    # a value and its change, seconds apart: to the minute they read as said at once
    assert "(20 Nov 2026 09:00:00) The offsite budget" in lines[0]
    assert "(20 Nov 2026 09:00:40) I raised" in lines[1]
    # a line of that minute with no value, or about something else, needs no order against them
    assert "(20 Nov 2026) The offsite is near" in lines[2] and "(20 Nov 2026) My cat" in lines[3]
    # said today, the same: the time of day is always there, the second only where it orders values
    today = render_block(SearchResult(tuple(hits), "Budget?", False, 0.9), now=at + timedelta(hours=1))
    assert "(today 09:00:40) I raised" in today and "(today 09:00) My cat" in today


def test_the_header_states_the_rule_and_calls_nothing_current() -> None:
    assert "later one holds" in HEADER and "current" not in HEADER.lower()


def test_a_slipped_deadline_and_its_echoes_read_as_one_current_line(store: FactStore) -> None:
    # the user's claim, two agent restatements of it, the correction (no edge written: cue-less)
    hits = hits_for(
        store,
        "deadline",
        [
            (
                "The launch deadline for the mobile app is March 14.",
                Kind.USER_INPUT,
                Source.PASSIVE_CAPTURE,
                0,
            ),
            ("The mobile app launch deadline is March 14.", Kind.SUMMARY, Source.CONCLUDE_TASK, 1),
            ("The mobile app launch deadline is March 14.", Kind.CONCLUSION, Source.REMEMBER_TOOL, 1),
            (
                "The launch deadline for the mobile app is April 2.",
                Kind.USER_INPUT,
                Source.PASSIVE_CAPTURE,
                2,
            ),
        ],
    )
    ordered = order_same_slot(hits)
    block = render_block(SearchResult(tuple(ordered), "When is the launch deadline?", False, 0.9))
    lines = block.splitlines()[2:]
    topical = [ln for ln in lines if "deadline" in ln]
    assert "April 2" in topical[0] and "(22 Nov 2026)" in topical[0]
    # the stale value is folded into the current line, which says it replaces an earlier value; its
    # words are not shown at all (a small model answers with them whatever tag they carry)
    assert "March 14" not in block, block
    assert topical[0].endswith("(updated: replaces an earlier value)"), block
    assert len(topical) == 1, block


def test_a_look_alike_that_ranking_reads_as_the_same_slot_keeps_the_fact_in_view(store: FactStore) -> None:
    # ranking orders the two as one slot (paint), but the rules read no correction (another room):
    # folding would take the words of the fact that still holds out of the block, so both keep a
    # line, the older tagged
    hits = hits_for(
        store,
        "look-alike",
        [
            ("The living room walls are painted Agreeable Gray.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
            ("Just finished painting the bedroom Sea Salt.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 1),
        ],
    )
    ordered = order_same_slot(hits)
    assert any(isinstance(f, PossiblyOutdated) for h in ordered for f in h.flags)
    kept, earlier, _ = fold(ordered)
    assert len(kept) == 2 and not earlier
    block = render_block(SearchResult(tuple(ordered), "What color is the living room?", False, 0.9))
    assert "Agreeable Gray" in block and "replaces an earlier value" not in block


def test_identical_lines_appear_once_and_tool_lines_are_marked(store: FactStore) -> None:
    hits = hits_for(
        store,
        "dupes",
        [
            ("The office is in Lisbon.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
            ("the office is in Lisbon", Kind.CONCLUSION, Source.PASSIVE_CAPTURE, 1),
            ("Tickets to Lisbon cost 90 euros.", Kind.CONCLUSION, Source.TOOL_RESULT, 1),
        ],
    )
    kept, _, gone = fold(hits)
    assert [h.fact.body for h in kept] == ["The office is in Lisbon.", "Tickets to Lisbon cost 90 euros."]
    assert any("the same words as" in reason for _, reason in gone)
    block = render_block(SearchResult(tuple(hits), "Where is the office?", False, 0.9))
    [tool_line] = [ln for ln in block.splitlines() if "Tickets" in ln]
    assert "(from a tool result or web page, not the user's words)" in tool_line


def test_failure_notices_and_bare_names_are_not_memory(store: FactStore) -> None:
    notice = "Web search is unavailable right now (ConnectError: [Errno -3] name resolution). Answer from what you know."
    assert is_failure_notice(notice)
    assert is_failure_notice("Error: the request timed out")
    assert not is_failure_notice("The sync moved to Thursdays at 10am.")
    assert not is_failure_notice("Our API runs in europe-west4.")
    root = store.root("junk")
    assert capture_said(store, root, notice, by="tool").facts == ()
    assert store.audit.session_facts("junk") == []
    assert is_bare_name("launch_deadline") and not is_bare_name("The deadline is April 2.")


def test_a_value_is_never_folded_into_a_line_the_block_leaves_out(store: FactStore) -> None:
    # the older figure reads as corrected by a line that restates the head: that line leaves the block
    # as a restatement, so folding the figure into it would leave the block with neither
    head, restated, older = hits_for(
        store,
        "fold-into-gone",
        [
            ("The team's test coverage is 85%.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 2),
            ("The team's test coverage is 85% now.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 1),
            ("The team's test coverage is 78%.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
        ],
    )
    restated = replace(restated, flags=(restatement(restated.fact.body, head.fact.short_id),))
    older = replace(older, flags=(outdated_by(older.fact.body, restated.fact),))
    kept, earlier, gone = fold([head, restated, older])
    assert [h.fact.short_id for h in kept] == [head.fact.short_id, older.fact.short_id]
    assert not earlier and gone == [(restated.fact.short_id, f"it restates {head.fact.short_id}, shown")]


def test_two_lines_that_restate_each_other_keep_the_better_ranked(store: FactStore) -> None:
    first, second = hits_for(
        store,
        "restate-cycle",
        [
            ("The standup is at 9:30 every weekday.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
            ("Our standup happens at 9:30 each weekday.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 1),
        ],
    )
    first = replace(first, flags=(restatement(first.fact.body, second.fact.short_id),))
    second = replace(second, flags=(restatement(second.fact.body, first.fact.short_id),))
    kept, _, gone = fold([first, second])
    assert [h.fact.short_id for h in kept] == [first.fact.short_id]
    assert [sid for sid, _ in gone] == [second.fact.short_id]


def test_a_restatement_of_a_folded_line_names_the_line_that_holds_it(store: FactStore) -> None:
    old, echo, new = hits_for(
        store,
        "restated-then-folded",
        [
            (
                "The launch deadline for the mobile app is March 14.",
                Kind.USER_INPUT,
                Source.PASSIVE_CAPTURE,
                0,
            ),
            ("The mobile app launch deadline is March 14.", Kind.SUMMARY, Source.CONCLUDE_TASK, 1),
            (
                "The launch deadline for the mobile app is April 2.",
                Kind.USER_INPUT,
                Source.PASSIVE_CAPTURE,
                2,
            ),
        ],
    )
    old = replace(old, flags=(outdated_by(old.fact.body, new.fact),))
    echo = replace(echo, flags=(restatement(echo.fact.body, old.fact.short_id),))
    kept, earlier, gone = fold([new, old, echo])
    assert [h.fact.short_id for h in kept] == [new.fact.short_id]
    assert [f.id for f in earlier[new.fact.id]] == [old.fact.id]
    s_old, s_new = old.fact.short_id, new.fact.short_id
    assert (echo.fact.short_id, f"it restates {s_old}, folded into {s_new}") in gone


def test_a_question_about_an_earlier_value_sees_each_value_with_its_date(store: FactStore) -> None:
    # a run of values in time is history: asked how things were, the block keeps the older lines
    # (dated, tagged as older) instead of folding them into the newest
    hits = hits_for(
        store,
        "timeline",
        [
            ("My A1C is 6.4 this month.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 0),
            ("My A1C is now 6.1 this month.", Kind.USER_INPUT, Source.PASSIVE_CAPTURE, 2),
        ],
    )
    ordered = order_same_slot(hits)
    now = render_block(SearchResult(tuple(ordered), "What is my A1C?", False, 0.9))
    assert "6.4" not in now and "6.1" in now
    earlier = render_block(SearchResult(tuple(ordered), "What was my A1C at the start?", False, 0.9))
    lines = [ln for ln in earlier.splitlines() if "A1C" in ln]
    assert len(lines) == 2 and "6.1" in lines[0] and "6.4" in lines[1], earlier
    assert "an older line" in lines[1] and "replaces an earlier value" not in earlier


def test_a_long_text_is_cut_around_what_the_question_asks_not_to_its_first_lines() -> None:
    from memory.context.block import clip

    answer = (
        "Great question! There are a few things to keep in mind when planning a trip. First, think about "
        "the season. Second, consider your budget carefully. For your knee, the physiotherapist "
        "recommended avoiding stairs and long hikes for six weeks. Finally, pack light."
    )
    focused = clip(answer, 200, "What did the physiotherapist say about my knee?")
    assert "avoiding stairs and long hikes for six weeks." in focused and len(focused) <= 200
    assert focused.startswith("… ") and "Great question" not in focused
    # nothing in common with the question, or no question: its first lines, as before
    assert clip(answer, 200, "Where do I live?") == clip(answer, 200)
    assert clip(answer, 200).startswith("Great question!")


def test_a_long_block_of_code_is_shown_around_the_line_the_question_is_about() -> None:
    # pasted code has no full stops: read as one sentence, it was cut to its first lines
    from memory.context.block import clip

    routes = "\n".join(f"    location /api{i} {{ proxy_pass http://backend{i}:80; }}" for i in range(20))
    config = f"```nginx\nserver {{\n{routes}\n    proxy_read_timeout 90s;\n    gzip on;\n}}\n```"
    shown = clip(config, 200, "What read timeout did I set in nginx?")
    assert "proxy_read_timeout 90s;" in shown and shown.startswith("… ")
    assert "\n" not in shown and len(shown) <= 200
    assert "proxy_read_timeout" not in clip(config, 200)  # without a query: the first lines, as before
