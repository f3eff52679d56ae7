"""Several app processes on one database are one deployment: the quick variant of the multiprocess
scenario (`bench.reliability.multiprocess`), with real uvicorn processes and a SIGKILL; one leader
for the periodic jobs; a chat deleted through one process stops its turn in another (two runtimes
in this process stand for two processes: they share nothing but the database)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from playground_helpers import play_db, playground_template, rows, running

from bench.reliability.multiprocess import processes, run_multiprocess
from bench.reliability.servers import create_database, drop_database
from playground.chats import create_chat, delete_chat
from playground.jobs import submit_message
from playground.leader import Leadership

__all__ = ["play_db", "playground_template"]  # fixtures


def test_two_processes_run_every_turn_once_in_order_through_a_kill(play_db: str) -> None:
    result = run_multiprocess(play_db, n_processes=2, chats=6, turns=3, kills=1, token_delay_ms=20)
    assert result["violations"] == []
    assert result["kills"] == 1 and result["processes_that_ran_turns"] >= 2  # (a restart is a new pid)
    assert result["facts_total"] == result["control_facts_total"] and result["facts_total"]["stock items"] > 0


async def test_one_leader_at_a_time_and_the_next_takes_over(play_db: str) -> None:
    first, second = Leadership(play_db), Leadership(play_db)
    try:
        assert await first.lead() and await first.lead()  # it keeps leading
        assert not await second.lead()  # never waits, never leads while the first does
        await first.close()  # a process stopping (or dying: its session ends the same way)
        assert await second.lead()
        assert not await first.lead()
    finally:
        await first.close()
        await second.close()


async def test_a_chat_deleted_through_one_process_stops_its_turn_in_another(play_db: str) -> None:
    async with running(play_db, scripted_token_delay_ms=300) as one, running(play_db) as other:
        chat = await create_chat(one.pool)
        submitted = await submit_message(one.pool, chat.id, "What is our budget?", "k")
        assert submitted is not None
        for _ in range(600):  # until one of them runs it
            if one.worker.busy or other.worker.busy:
                break
            await asyncio.sleep(0.05)
        holder, deleter = (one, other) if one.worker.busy else (other, one)
        assert holder.worker.busy == 1
        deleted = await delete_chat(
            deleter.pool,
            chat.id,
            facts=deleter.facts.aio,
            stock=deleter.stock_store,
            checkpointer=deleter.saver,
            stop_turns=deleter.worker.stop_chat_everywhere,
        )
        assert deleted
        assert holder.worker.busy == 0  # stopped before the deleter went on to forget the chat
    assert rows(play_db, "SELECT count(*) FROM playground.turn_worker") == [(0,)]
    session = chat.session_id
    assert rows(play_db, "SELECT count(*) FROM beads.facts WHERE session_id = %s", (session,)) == [(0,)]


@pytest.mark.app
def test_processes_started_together_on_an_empty_database_all_start(pg_server_url: str) -> None:
    """LangGraph's schema setup takes no lock: without the app's own, one of three processes started
    side by side on a fresh database failed on its migrations table's primary key."""
    db = create_database(pg_server_url, prefix="fresh")
    try:
        with processes(db, 3) as apps:
            assert all(httpx.get(f"{app.base}/healthz").status_code == 200 for app in apps)
    finally:
        drop_database(pg_server_url, db)
