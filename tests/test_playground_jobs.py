"""Turns as jobs: one turn per submit key, one at a time per chat and in order, lanes that fail alone."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from fastapi.testclient import TestClient
from langchain_core.tools import StructuredTool
from langmem.errors import ConfigurationError as LangMemConfigurationError
from playground_helpers import (
    HTMX,
    LOOPBACK_BASE,
    ORIGIN,
    await_idle,
    play_db,
    playground_template,
    rows,
    running,
    settings_for,
)

from memory.errors import ModelUnavailableError
from memory.scripted import ScriptedChatModel, calls, tool_call
from playground import jobs
from playground.app import create_app
from playground.chats import create_chat
from playground.comparison.lanes import build_stock_agent
from playground.jobs import submit_message
from playground.runtime import Runtime

__all__ = ["play_db", "playground_template"]  # fixtures


def test_a_double_submit_makes_one_turn(play_db: str) -> None:
    with TestClient(create_app(settings_for(play_db)), base_url=LOOPBACK_BASE) as client:
        chat = client.post("/chats", headers=ORIGIN, follow_redirects=False).headers["location"]
        form = {"text": "Our budget is $100k per year.", "idempotency_key": "same-key"}
        first = client.post(f"{chat}/messages", data=form, headers=HTMX)
        second = client.post(f"{chat}/messages", data=form, headers=HTMX)
        assert first.status_code == second.status_code == 200
        assert first.headers["x-turn-id"] == second.headers["x-turn-id"]
        assert (first.headers["x-turn-created"], second.headers["x-turn-created"]) == ("true", "false")
        # the fresh composer carries a new key, so the next message is a new turn
        assert 'value="same-key"' not in first.text
    assert rows(play_db, "SELECT count(*) FROM playground.turn_worker") == [(1,)]
    assert rows(play_db, "SELECT count(*) FROM playground.messages WHERE author = 'user'") == [(1,)]


async def test_concurrent_double_submits_make_one_turn(play_db: str) -> None:
    async with running(play_db, workers=1) as rt:
        chat = await create_chat(rt.pool)
        results = await asyncio.gather(*(submit_message(rt.pool, chat.id, "Hello.", "k1") for _ in range(5)))
        assert len({r.turn_id for r in results if r}) == 1
        assert sum(bool(r and r.created) for r in results) == 1
        await await_idle(play_db)


async def test_turns_of_a_chat_run_one_at_a_time_in_order(play_db: str) -> None:
    async with running(play_db, workers=4, scripted_token_delay_ms=5) as rt:
        chats = [await create_chat(rt.pool, f"chat {i}") for i in range(2)]
        for n in range(4):
            for chat in chats:
                await submit_message(rt.pool, chat.id, f"Fact number {n} is {n * 7}.", f"key-{n}")
        await await_idle(play_db)
    for chat in chats:
        turns = rows(
            play_db,
            "SELECT turn_no, started_at, finished_at, attempts FROM playground.turn_worker WHERE chat_id = %s ORDER BY turn_no",
            (chat.id,),
        )
        assert [t[0] for t in turns] == [1, 2, 3, 4]
        assert all(t[3] == 1 for t in turns)
        for earlier, later in itertools.pairwise(turns):
            assert earlier[2] <= later[1], "a turn started before the previous one of its chat finished"
        # the chat's events are numbered densely in commit order, each turn's densely too
        numbers = rows(
            play_db,
            "SELECT event_no, turn_id, seq FROM playground.events WHERE chat_id = %s ORDER BY event_no",
            (chat.id,),
        )
        assert [n[0] for n in numbers] == list(range(1, len(numbers) + 1))
        by_turn: dict[Any, list[int]] = {}
        for _, turn_id, seq in numbers:
            by_turn.setdefault(turn_id, []).append(seq)
        assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_turn.values())
    # the two chats did run at the same time
    spans = rows(
        play_db, "SELECT min(started_at), max(finished_at) FROM playground.turn_worker GROUP BY chat_id"
    )
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    done = rows(
        play_db,
        "SELECT lane, count(*) FROM playground.events WHERE kind = 'done' GROUP BY lane ORDER BY lane",
    )
    assert done == [("beads", 8), ("stock", 8)]


async def test_a_turn_is_recorded_as_starting_after_the_one_before_it_finished(play_db: str) -> None:
    """The claim's snapshot sees the previous turn done; the start it records must be later than that
    turn's recorded finish even when the claiming transaction began first (a lone statement's
    transaction begins when the server reads its Parse, before the snapshot is taken)."""
    async with running(play_db, workers=1) as rt:
        await rt.worker.stop()  # this test claims and finishes by hand
        chat = await create_chat(rt.pool)
        for n in range(2):
            assert await submit_message(rt.pool, chat.id, f"Message {n}.", f"k{n}") is not None
        first, second = uuid.uuid4(), uuid.uuid4()
        async with rt.pool.connection() as alive:
            await jobs.hold_liveness(alive, 11)
            claimed = await jobs.claim(rt.pool, first, 11, 60.0, [])
            assert claimed is not None and claimed.turn_no == 1
            async with rt.pool.connection() as early, early.transaction():
                await early.execute("SELECT now()")  # the claiming transaction begins here
                await asyncio.sleep(0.05)
                async with rt.pool.connection() as conn, conn.transaction():
                    assert await jobs.take_seq(conn, claimed.id, first, 0) is not None
                    await jobs.finish(conn, claimed.id)
                cur = await early.execute(
                    jobs._CLAIM,
                    {
                        "owner": second,
                        "key": 12,
                        "lease": 60.0,
                        "lock_class": jobs.LIVENESS_LOCK_CLASS,
                        "mine": [],
                    },
                )
                assert (await cur.fetchone())["turn_no"] == 2  # type: ignore[index]
    (finished,), (started,) = (
        rows(play_db, f"SELECT {column} FROM playground.turn_worker WHERE turn_no = {n}")[0]
        for column, n in (("finished_at", 1), ("started_at", 2))
    )
    assert finished <= started


def _use_stock_model(rt: Runtime, model: Any, tools: list[Any] | None = None) -> None:
    rt.stock_agent = build_stock_agent(
        model, rt.stock_store, tools=tools or [], checkpointer=rt.saver, research=False
    )


async def _one_turn(rt: Runtime, text: str) -> uuid.UUID:
    chat = await create_chat(rt.pool)
    submitted = await submit_message(rt.pool, chat.id, text, "k")
    assert submitted is not None
    return submitted.turn_id


async def test_a_model_that_is_down_fails_its_lane_only(play_db: str) -> None:
    class DownModel(ScriptedChatModel):
        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            raise ModelUnavailableError("Ollama is not reachable at http://127.0.0.1:11434")

    async with running(play_db, workers=1) as rt:
        _use_stock_model(rt, DownModel())
        turn = await _one_turn(rt, "Our budget is $100k per year.")
        await await_idle(play_db)
    statuses = rows(
        play_db,
        "SELECT stock_status, beads_status, status FROM playground.turn_worker WHERE id = %s",
        (turn,),
    )
    assert statuses == [("error", "done", "done")]
    [(message,)] = rows(
        play_db,
        "SELECT payload->>'message' FROM playground.events WHERE turn_id = %s AND kind = 'error'",
        (turn,),
    )
    assert "Ollama is not reachable" in message
    assert rows(
        play_db, "SELECT author FROM playground.messages WHERE turn_id = %s ORDER BY author", (turn,)
    ) == [
        ("beads",),
        ("user",),
    ]


async def test_langmem_configuration_error_is_a_lane_error_not_a_crash(play_db: str) -> None:
    def misconfigured(query: str) -> str:
        """A tool that fails the way LangMem does when its namespace template cannot be filled."""
        raise LangMemConfigurationError("Missing key in 'configurable' field: user_id")

    model = ScriptedChatModel(replies=[calls(tool_call("misconfigured", query="budget"))])
    async with running(play_db, workers=1) as rt:
        _use_stock_model(rt, model, [StructuredTool.from_function(misconfigured)])
        turn = await _one_turn(rt, "What is our budget?")
        await await_idle(play_db)
        for _ in range(100):  # the turn is committed done a moment before its task lets go of its slot
            if not rt.worker.busy:
                break
            await asyncio.sleep(0.02)
        assert not rt.worker.busy  # the worker is fine and free
    [(message,)] = rows(
        play_db,
        "SELECT payload->>'message' FROM playground.events WHERE turn_id = %s AND kind = 'error'",
        (turn,),
    )
    assert message.startswith("LangMem is misconfigured") and "user_id" in message
    with TestClient(create_app(settings_for(play_db)), base_url=LOOPBACK_BASE) as client:
        chat_id = rows(play_db, "SELECT chat_id FROM playground.turn_worker WHERE id = %s", (turn,))[0][0]
        page = client.get(f"/chats/{chat_id}")
    assert page.status_code == 200 and "LangMem is misconfigured" in page.text and "failed" in page.text


async def test_a_turn_interrupted_too_often_is_given_up(play_db: str) -> None:
    async with running(play_db, workers=1, max_attempts=1) as rt:
        chat = await create_chat(rt.pool)
        await rt.worker.stop()  # nothing claims while we stage a turn that has been tried before
        submitted = await submit_message(rt.pool, chat.id, "Hello.", "k")
        assert submitted is not None
        async with rt.pool.connection() as conn:
            await conn.execute(
                "UPDATE playground.turn_worker SET attempts = 1 WHERE id = %s", (submitted.turn_id,)
            )
        await rt.worker.start()
        await await_idle(play_db)
    errors = rows(
        play_db, "SELECT lane, payload->>'message' FROM playground.events WHERE kind = 'error' ORDER BY lane"
    )
    assert [lane for lane, _ in errors] == ["beads", "stock"]
    assert all("giving up" in message for _, message in errors)


async def test_each_lane_is_compiled_once_for_every_chat(play_db: str, monkeypatch: Any) -> None:
    import playground.comparison.lanes as lanes

    async with running(play_db, workers=2) as rt:
        compiled: list[str] = []
        real = lanes.create_agent

        def counting(*args: Any, **kwargs: Any) -> Any:
            compiled.append(str(kwargs.get("name")))
            return real(*args, **kwargs)

        monkeypatch.setattr(lanes, "create_agent", counting)
        agents = (rt.stock_agent, rt.beads_agent)
        for text in ("Our budget is $100k per year.", "What is our budget?"):
            chat = await create_chat(rt.pool)
            assert await submit_message(rt.pool, chat.id, text, "k") is not None
        await await_idle(play_db)
        # two chats, two sessions, both lanes done: through the agents built at startup
        assert rows(play_db, "SELECT count(*) FROM playground.events WHERE kind = 'done'") == [(4,)]
        assert compiled == [] and (rt.stock_agent, rt.beads_agent) == agents
