"""The reliability suite at small sizes (the long run is `python -m bench.reliability`): load, crash,
database outage, SSE reconnects and isolation, each asserting its invariants over real HTTP."""

from __future__ import annotations

import pytest
from playground_helpers import play_db, playground_template, settings_for
from psycopg_pool import ConnectionPool

from bench.reliability.crash import run_crash
from bench.reliability.isolation import run_isolation, run_poisoning
from bench.reliability.load import run_load
from bench.reliability.outage import run_outage
from bench.reliability.servers import app_in_thread
from bench.reliability.sse_reconnect import run_sse_reconnects

__all__ = ["play_db", "playground_template"]  # fixtures


async def test_load_loses_no_turn_and_reads_no_other_chat(play_db: str) -> None:
    with app_in_thread(settings_for(play_db)) as (_, base):
        result = await run_load(base, play_db, chats=5, turns=3, deadline_seconds=120)
    assert result["violations"] == []
    assert result["turns_completed"] == result["turns_sent"] == 15
    assert result["requests"] == 5 * (1 + 2 * 3) + 5  # bounded: chat, send + stream per turn, one page
    assert result["turn_ms_p95"] is not None and result["first_event_ms_p95"] is not None


def test_sigkill_at_random_moments_finishes_every_turn_exactly_once(play_db: str) -> None:
    result = run_crash(play_db, turns=4, kills=3, token_delay_ms=40)
    assert result["violations"] == []
    assert 1 <= result["kills"] <= 3  # one per turn, unless a turn ends before its chosen point
    assert result["facts"] == result["control_facts"] and result["facts"]["stock items"] > 0


@pytest.mark.app
def test_a_database_outage_mid_turn_is_reported_and_the_turn_finishes() -> None:
    result = run_outage(down_seconds=(3.0,))  # on a Postgres of its own, never the shared test server
    assert result["violations"] == []
    assert result["turns_interrupted"] == 1
    assert result["stream_notices"] >= 1
    [detail] = result["details"]
    assert detail["turn_was_running"] and detail["page_while_down"] == detail["stream_while_down"] == 503


def test_sse_reconnects_at_random_offsets_lose_and_repeat_nothing(play_db: str) -> None:
    with app_in_thread(settings_for(play_db, scripted_token_delay_ms=5)) as (_, base):
        result = run_sse_reconnects(base, reconnects=10)
    assert result["violations"] == []
    assert result["reconnects"] >= 10 and result["events_read"] > 10


@pytest.mark.slow
def test_no_cross_session_or_sibling_reads(pool: ConnectionPool) -> None:
    result = run_isolation(pool, examples=50)
    assert result["violations"] == []
    assert result["examples"] == 50 and result["reads"] >= 50 and result["cross_reads"] == 0


def test_poisoned_tool_results_and_pages_create_no_directive_and_supersede_nothing(
    pool: ConnectionPool,
) -> None:
    result = run_poisoning(pool, examples=5, seeds=(0, 1, 2))
    assert result["violations"] == []
    assert result["examples"] == 15 and result["tool_results_captured"] >= 15
    assert result["poison_outranked_user_fact"] == 0 and result["untrusted_unmarked"] == 0
