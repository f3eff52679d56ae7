"""bench.block_reader's scoring and its oracle, which rewrite a block without a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.block_reader import holds, oracle_block, reading

pytestmark = pytest.mark.bench


UPDATE = {"kind": "update", "current": "$2,010", "stale": "$1,850"}
LOOK_ALIKE = {"kind": "lookalike", "current": "Agreeable Gray", "other": "Sea Salt"}
BLOCK = "\n".join(
    [
        "## Memory",
        "header",
        "- (today 10:00) My rent is $1,850 a month.",
        "- (today 11:00) Can you explain a Roth IRA?",
        "- (today 12:00) The landlord raised it to $2,010.",
    ]
)


def test_a_value_is_found_whatever_its_case_dollar_sign_or_separators() -> None:
    assert holds("It is 2010 now.", "$2,010") and holds("agreeable gray", "Agreeable Gray")
    assert not holds("It is 1850.", "$2,010")


def test_a_reply_reads_current_stale_both_or_neither() -> None:
    assert reading("Your rent is $2,010.", UPDATE) == "current"
    assert reading("It is $1,850.", UPDATE) == "stale"
    assert reading("It went from $1,850 to $2,010.", UPDATE) == "both"
    assert reading("I don't know.", UPDATE) == "neither"
    assert reading("Sea Salt", LOOK_ALIKE) == "stale"  # the look-alike's value


def test_the_oracle_pairs_the_stale_line_in_each_form() -> None:
    hidden = oracle_block(BLOCK, UPDATE, "hidden")
    assert "$1,850" not in hidden and hidden.endswith("$2,010. (updated: replaces an earlier value)")
    words = oracle_block(BLOCK, UPDATE, "words")
    assert words.endswith("$2,010. | earlier (today 10:00): My rent is $1,850 a month.")
    assert words.count("\n- ") == 2  # the stale line went into the current one
    tagged = oracle_block(BLOCK, UPDATE, "tagged")
    assert "- (today 10:00) My rent is $1,850 a month. (out of date: a later line replaces it)" in tagged
    assert "Roth IRA" in hidden and "Roth IRA" in words and "Roth IRA" in tagged
    # a look-alike is left alone, and so is a block that lacks either value
    assert oracle_block(BLOCK, LOOK_ALIKE, "hidden") == BLOCK
    assert oracle_block("## Memory\n- (today 10:00) My rent is $1,850.", UPDATE, "hidden").endswith("$1,850.")


def test_every_sequence_set_states_the_values_it_scores() -> None:
    for name in ("sequences_blind.jsonl", "sequences_blind2.jsonl", "sequences_blind3.jsonl"):
        rows = [
            json.loads(line) for line in (Path("bench/eval/data") / name).read_text().splitlines() if line
        ]
        assert len({r["id"] for r in rows}) == len(rows)
        for row in rows:
            said = " ".join(row["messages"])
            other = row["stale"] if row["kind"] == "update" else row["other"]
            assert holds(said, row["current"]) and holds(said, other), row["id"]
