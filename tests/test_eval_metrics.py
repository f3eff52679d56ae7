"""Token counting, packing and the model-free metrics, on windows built by hand (no database)."""

from __future__ import annotations

import pytest

from bench.eval.conversation import Question
from bench.eval.metrics import aggregate, auroc, window_metrics
from bench.eval.runner import sample_questions
from bench.eval.tokens import CLIP_MARK, Packer, clip_to_last, count_many, count_tokens
from bench.eval.window import Window, WindowItem

pytestmark = pytest.mark.bench


def test_one_count_for_every_text() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    text = "Unbelievably, the tokenizer splits rare words into pieces."
    assert count_many([text, "hello world"]) == [count_tokens(text), 2]
    # whitespace never merges pieces, so lines add up exactly
    assert count_tokens(text + "\n" + text) == 2 * count_tokens(text)


def test_packer_never_exceeds_its_budget_and_charges_headers_once() -> None:
    packer = Packer(12)
    section = packer.section("Header here:")  # 3 tokens
    assert packer.add(section, "one two three", 3)
    assert packer.used == 6
    assert not packer.add(section, "four five six seven", 7)  # would be 13
    assert packer.add(section, "four five six", 3)
    assert packer.used == 9 and count_tokens(packer.text()) == 9
    empty = packer.section("Never used:")
    assert packer.text().count("Never used") == 0 and empty.lines == []


def test_clipping_keeps_the_end_of_a_turn_within_the_budget() -> None:
    text = "The first part is long and wordy, but the answer sits at the end: Lisbon."
    clipped = clip_to_last(text, 8)
    assert clipped is not None and clipped.startswith(CLIP_MARK) and clipped.endswith("Lisbon.")
    assert count_tokens(clipped) <= 8
    assert clip_to_last(text, 1) is None


def _window(
    items: list[WindowItem], nothing: bool | None = None, best: float | None = None, text: str = ""
) -> Window:
    return Window("x", 100, text, 50, tuple(items), nothing, best)


def test_evidence_any_and_all_count_turns_and_the_facts_carved_from_them() -> None:
    q = Question("q1", "c", "single-hop", "?", "!", evidence_ids=("D1:1", "D1:3"))
    window = _window([WindowItem("D1:1", 0, fact_id="abcd1234", score=0.7), WindowItem("D2:2", 1)])
    row = window_metrics(window, q)
    assert (row["hit_any"], row["hit_all"], row["evidence_found"]) == (True, False, ["D1:1"])
    row = window_metrics(_window([WindowItem("D1:3", 0), WindowItem("D1:1", 1, clipped=True)]), q)
    assert (row["hit_any"], row["hit_all"]) == (True, True)
    # unanswerable questions and questions without evidence are left out of recall
    assert (
        window_metrics(window, Question("q2", "c", "t", "?", "!", evidence_ids=("D1:1",), abstention=True))[
            "hit_any"
        ]
        is None
    )
    assert window_metrics(window, Question("q3", "c", "t", "?", "!"))["hit_any"] is None


def test_knowledge_update_fields() -> None:
    q = Question(
        "ku", "c", "knowledge_update", "?", "!", evidence_ids=("8",), stale_ids=("2",), current_ids=("8",)
    )
    both = window_metrics(_window([WindowItem("2", 0, fact_id="f2"), WindowItem("8", 1, fact_id="f8")]), q)
    assert both["ku_current_present"] and both["ku_stale_present"] and both["ku_stale_as_current"]
    assert (both["ku_current_rank"], both["ku_stale_rank"], both["ku_current_above_stale"]) == (1, 0, False)
    current_first = window_metrics(_window([WindowItem("8", 0), WindowItem("2", 1)]), q)
    assert current_first["ku_current_above_stale"]
    only_current = window_metrics(_window([WindowItem("8", 3)]), q)
    assert only_current["ku_current_above_stale"] and not only_current["ku_stale_as_current"]
    only_stale = window_metrics(_window([WindowItem("2", 0)]), q)
    assert not only_stale["ku_current_present"] and not only_stale["ku_current_above_stale"]
    marked = window_metrics(_window([WindowItem("2", 0, marked_outdated=True), WindowItem("8", 1)]), q)
    assert marked["ku_stale_present"] and not marked["ku_stale_as_current"]
    assert not marked["ku_stale_turn_unmarked"] and both["ku_stale_turn_unmarked"]
    # the stale value's fact marked, a sibling fact of its turn not: shown as current, but not unmarked
    sibling = window_metrics(
        _window([WindowItem("2", 0, marked_outdated=True), WindowItem("2", 1), WindowItem("8", 2)]), q
    )
    assert sibling["ku_stale_as_current"] and not sibling["ku_stale_turn_unmarked"]
    # the value true now shown only as outdated (a look-alike flagged it): counted, once every fact is
    flagged = window_metrics(_window([WindowItem("2", 0), WindowItem("8", 1, marked_outdated=True)]), q)
    assert flagged["ku_current_marked"] and not both["ku_current_marked"]
    half = window_metrics(
        _window([WindowItem("8", 0, marked_outdated=True), WindowItem("8", 1), WindowItem("2", 2)]), q
    )
    assert not half["ku_current_marked"] and not only_stale["ku_current_marked"]
    # questions that are not knowledge updates carry no KU fields
    assert "ku_current_present" not in window_metrics(_window([]), Question("q", "c", "t", "?", "!"))


def test_a_knowledge_update_is_told_apart_when_the_window_says_which_value_is_later() -> None:
    from bench.eval.window import said_in

    q = Question("ku", "c", "knowledge_update", "?", "!", stale_ids=("2",), current_ids=("8",))

    def told(*items: WindowItem) -> bool | None:
        return window_metrics(_window(list(items)), q)["ku_told_apart"]

    # both dated to the day: nothing says which came later
    assert told(WindowItem("2", 0, said="7 Feb 2024"), WindowItem("8", 1, said="7 Feb 2024")) is False
    # the time of day says it, or a mark on the stale line does
    assert told(WindowItem("2", 0, said="7 Feb 2024 00:03"), WindowItem("8", 1, said="7 Feb 2024 00:05"))
    assert told(
        WindowItem("2", 0, said="7 Feb 2024 00:05:02"), WindowItem("8", 1, said="7 Feb 2024 00:05:40")
    )
    # a line that says only the day (the minute) the other was said in orders nothing
    assert told(WindowItem("2", 0, said="7 Feb 2024"), WindowItem("8", 1, said="7 Feb 2024 00:05")) is False
    assert (
        told(WindowItem("2", 0, said="7 Feb 2024 00:05:40"), WindowItem("8", 1, said="7 Feb 2024 00:05"))
        is False
    )
    assert told(
        WindowItem("2", 0, said="7 Feb 2024", marked_outdated=True), WindowItem("8", 1, said="7 Feb 2024")
    )
    # a line that says no time at all tells nothing; one value missing: not counted
    assert told(WindowItem("2", 0), WindowItem("8", 1, said="7 Feb 2024")) is False
    assert told(WindowItem("8", 0, said="7 Feb 2024")) is None
    figures = aggregate(
        [
            window_metrics(_window([WindowItem("2", 0, said="a"), WindowItem("8", 1, said="b")]), q),
            {"ku_current_present": False, "ku_stale_as_current": False, "ku_current_above_stale": False},
        ]
    )
    assert figures["ku_told_apart"] == 1.0 and figures["ku_both_n"] == 1
    # what the windows' lines say of when they were said
    assert said_in("[07 Feb 2024 00:03] user: hi") == "07 Feb 2024 00:03"
    assert said_in("- [3f2a9c1e] (7 Feb 2024 00:05) user: hi") == "7 Feb 2024 00:05"
    assert said_in("- (yesterday) hi") == "yesterday" and said_in("…the end of a turn") is None


def test_aggregate_abstention_precision_recall_and_auroc() -> None:
    def row(abstention: bool, nothing: bool | None, best: float | None, hit: bool | None = None) -> dict:
        return {"abstention": abstention, "nothing_relevant": nothing, "best_score": best, "hit_any": hit}

    rows = [
        row(True, True, 0.1),  # caught
        row(True, False, 0.3),  # missed
        row(False, True, 0.15, hit=False),  # false alarm
        row(False, False, 0.6, hit=True),
        row(False, False, 0.5, hit=True),
    ]
    f = aggregate(rows)
    assert f["abstain_precision"] == 0.5 and f["abstain_recall"] == 0.5 and f["abstain_n"] == 2
    # doubt = -best: positives (-0.1, -0.3) against negatives (-0.15, -0.6, -0.5): 5 of 6 pairs ordered right
    assert f["abstain_auroc"] == 5 / 6
    assert f["recall_any"] == 2 / 3 and f["evidence_n"] == 3
    no_signal = aggregate([row(True, None, None), row(False, None, None)])
    assert no_signal["abstain_precision"] is None and no_signal["abstain_recall"] is None
    assert auroc([1.0], []) is None and auroc([1.0], [1.0]) == 0.5


def test_sampling_takes_an_even_stride_per_question_type() -> None:
    questions = [Question(f"a{i}", "c", "A", "?", "!") for i in range(10)]
    questions += [Question(f"b{i}", "c", "B", "?", "!") for i in range(3)]
    chosen = [q.id for q in sample_questions(questions, 4)]
    assert chosen == ["a0", "a2", "a5", "a7", "b0", "b1", "b2"]
    assert len(sample_questions(questions, None)) == 13


def test_word_coverage_is_a_second_abstention_signal_and_both_are_combined_by_rank() -> None:
    q = Question("q", "c", "t", "Where did Ana adopt her cat?", "a shelter")
    seen = window_metrics(_window([], text="Ana adopted a cat from the shelter; her cat is called Mio."), q)
    unseen = window_metrics(_window([], text="We talked about the weather."), q)
    assert seen["word_coverage"] == round(2 / 3, 4)  # "ana", "cat" of "ana", "adopt", "cat"
    assert unseen["word_coverage"] == 0.0

    def row(abstention: bool, best: float, coverage: float) -> dict:
        return {"abstention": abstention, "nothing_relevant": False, "best_score": best,
                "word_coverage": coverage, "hit_any": None}  # fmt: skip

    rows = [row(True, 0.5, 0.0), row(True, 0.2, 0.5), row(False, 0.4, 1.0), row(False, 0.3, 1.0)]
    f = aggregate(rows)
    assert f["abstain_auroc"] == 0.5  # scores alone: one positive above both negatives, one below
    assert f["abstain_auroc_coverage"] == 1.0  # every unanswerable one mentions less of its question
    assert f["abstain_auroc_both"] == 1.0


def test_an_evidence_turn_is_readable_when_enough_of_it_is_shown() -> None:
    from bench.eval.metrics import evidence_in_reach

    turn = (
        "I'm kinda worried about the review with my advisor, so can you remind me that it's been moved "
        "to March 22 at 4:30 PM? She wants the second chapter by then and I still have the figures to redo."
    )
    whole = evidence_in_reach(f"[22 Mar 2024 10:00] user: {turn}", [turn])
    assert whole == {"evidence_share": 1.0, "evidence_whole": True, "evidence_readable": True}
    # the claim and the sentence around it: more than half the turn
    part = evidence_in_reach(
        "user: so can you remind me that it's been moved to March 22 at 4:30 PM? She "
        "wants the second chapter by then",
        [turn],
    )
    assert part["evidence_readable"] and not part["evidence_whole"]
    # a short fact carved from it: recalled, not readable
    fact = evidence_in_reach("user: moved to March 22 at 4:30 PM", ["something else entirely", turn])
    assert not fact["evidence_readable"] and 0 < fact["evidence_share"] < 0.5
    # the turn's words in another order are no run of it
    assert evidence_in_reach(" ".join(reversed(turn.split())), [turn])["evidence_share"] == 0.0
    long_turn = " ".join(f"word{i}" for i in range(400))
    shown = " ".join(f"word{i}" for i in range(100, 160))  # 60 of 400 words, in order
    assert evidence_in_reach(shown, [long_turn])["evidence_readable"]
    assert evidence_in_reach("", []) == {
        "evidence_share": None,
        "evidence_whole": None,
        "evidence_readable": None,
    }


def test_answer_words_are_looked_for_in_what_lines_say_not_in_the_time_their_stamps_give() -> None:
    from bench.eval.metrics import answer_words

    q = Question("q", "c", "multi_session_reasoning", "How many terms in all?", "42")
    # a stamp's seconds (made up by the loaders) are no answer; the line's own words are
    stamped = "- (15 May 2024 00:15:42) user: I summed the first 20 terms.\n[07 Feb 2024 00:42] user: hi"
    assert answer_words(_window([], text=stamped), q) == 0.0
    assert answer_words(_window([], text="- (15 May 2024 00:15:07) user: that is 42 terms"), q) == 1.0
    # a stamp's date stays: it is when something was said, which a question may ask
    when = Question("w", "c", "temporal_reasoning", "When did I start?", "15 May 2024")
    assert answer_words(_window([], text="- (15 May 2024 00:15:07) user: I started."), when) == 1.0
