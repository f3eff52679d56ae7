"""The fresh-thread bench's reading of what a question was shown."""

from __future__ import annotations

import pytest

from bench.fresh_thread import judge

pytestmark = pytest.mark.bench


UPDATE = {"kind": "update", "current": "$120k", "stale": "$100k"}
LOOKALIKE = {"kind": "lookalike", "current": "SAP", "other": "Siemens"}


def test_an_update_counts_the_first_value_shown_and_an_unflagged_stale_one() -> None:
    assert judge(UPDATE, [("Budget is now $120K.", False), ("Our budget is $100k.", True)]) == {
        "current_first": True,
        "stale_as_current": False,
    }
    # the stale value first, or the current one first but flagged: not current first
    assert judge(UPDATE, [("Our budget is $100k.", False), ("now $120k", False)])["current_first"] is False
    assert judge(UPDATE, [("now $120k", True)])["current_first"] is False
    # a hit that holds both values (from $100k to $120k) is not the stale value shown as current
    assert judge(UPDATE, [("raised from $100k to $120k", False)])["stale_as_current"] is False
    assert judge(UPDATE, []) == {"current_first": False, "stale_as_current": False}


def test_a_lookalike_loses_its_fact_when_no_unflagged_hit_holds_it() -> None:
    assert judge(LOOKALIKE, [("I work at SAP.", False), ("My sister is at Siemens.", False)]) == {
        "fact_first": True,
        "fact_lost": False,
    }
    assert judge(LOOKALIKE, [("My sister is at Siemens.", False), ("I work at SAP.", True)]) == {
        "fact_first": False,
        "fact_lost": True,
    }
