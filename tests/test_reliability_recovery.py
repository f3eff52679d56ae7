"""The recovery paths the reliability suite found wanting, each pinned by a small in-process test."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from playground_helpers import (
    LOOPBACK_BASE,
    await_idle,
    play_db,
    playground_template,
    rows,
    running,
    scalar,
    settings_for,
)

from playground import jobs
from playground.app import create_app
from playground.chats import create_chat
from playground.events import EventWriter, StreamScope, event_stream
from playground.jobs import LIVENESS_LOCK_CLASS, submit_message
from playground.scripted import ACK

__all__ = ["play_db", "playground_template"]  # fixtures

STATEMENT = "Our budget is $100k per year."


class LosesOneCheckpoint(AsyncPostgresSaver):
    """Fails the checkpoint that follows our lane's model step once, as a database that goes away then
    would. Only our lane's (its state has `beads_captured`): both lanes share the saver and run
    concurrently, and which of them reached step 3 first used to decide which one lost it."""

    failed = False

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        ours = "beads_captured" in checkpoint.get("channel_versions", {})
        if ours and metadata.get("step") == 3 and not LosesOneCheckpoint.failed:
            LosesOneCheckpoint.failed = True
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await super().aput(config, checkpoint, metadata, new_versions)


async def test_a_step_saved_without_its_checkpoint_resumes_the_nodes_after_it(play_db: str) -> None:
    async with running(play_db, workers=1) as rt:
        # the model's reply is saved as the step's writes, its checkpoint is not: LangGraph then shows
        # no `next` at all, yet the final-answer capture has not run
        rt.saver = LosesOneCheckpoint(rt.pool)  # type: ignore[arg-type]
        rt.compile_lanes()  # the lanes are compiled once, with the saver they were given
        chat = await create_chat(rt.pool)
        submitted = await submit_message(rt.pool, chat.id, STATEMENT, "k")
        assert submitted is not None
        await await_idle(play_db)
        rt.saver = AsyncPostgresSaver(rt.pool)  # type: ignore[arg-type]
        rt.compile_lanes()
        control = await create_chat(rt.pool)
        await submit_message(rt.pool, control.id, STATEMENT, "k")
        await await_idle(play_db)
    assert LosesOneCheckpoint.failed

    def conclusions(chat_id: Any) -> list[tuple[Any, ...]]:
        return rows(
            play_db,
            "SELECT body FROM beads.facts WHERE session_id = %s AND kind = 'conclusion'",
            (chat_id.hex,),
        )

    assert conclusions(chat.id) == conclusions(control.id) == [(ACK,)]
    kinds = rows(
        play_db,
        "SELECT lane, kind, payload->>'message' FROM playground.events WHERE turn_id = %s"
        " AND kind IN ('interrupted', 'done', 'error', 'resume') ORDER BY seq",
        (submitted.turn_id,),
    )
    # the stock lane resumes too when the interruption found it still running (a matter of timing)
    stopped = [k[:2] for k in kinds if k[1] != "done" and k[:2] != ("stock", "resume")]
    assert stopped == [("turn", "interrupted"), ("beads", "resume")]
    assert sorted(k[0] for k in kinds if k[1] == "done") == ["beads", "stock"]
    [why] = [message for _, kind, message in kinds if kind == "interrupted"]
    assert why.startswith("The database became unreachable during this turn (OperationalError")
    with TestClient(create_app(settings_for(play_db)), base_url=LOOPBACK_BASE) as client:
        page = client.get(f"/chats/{chat.id}")
    assert "The database became unreachable during this turn" in page.text


async def test_a_lane_finish_cancelled_while_another_write_waits_logs_no_done(play_db: str) -> None:
    """A lane that finishes while another write of the turn is in flight waits for it; cut off there
    (its turn lost the database, the task group cancels it), its `done` must not be left for the
    hand-back to log without the lane's status: the next attempt finishes the lane and logs it, and
    the page showed the stock lane done twice."""
    async with running(play_db, workers=1) as rt:
        await rt.worker.stop()  # this test claims the turn and writes its events by hand
        chat = await create_chat(rt.pool)
        submitted = await submit_message(rt.pool, chat.id, STATEMENT, "k")
        assert submitted is not None
        owner = uuid.uuid4()
        async with rt.pool.connection() as alive:
            await jobs.hold_liveness(alive, 21)
            turn = await jobs.claim(rt.pool, owner, 21, 60.0, [])
            assert turn is not None and turn.id == submitted.turn_id
            async with EventWriter(rt.pool, turn.id, chat.id, owner, flush_seconds=3600) as writer:
                async with rt.pool.connection() as other, other.transaction():
                    # another transaction holds the chat's row: the writer's next write waits on it
                    await other.execute("SELECT 1 FROM playground.chats WHERE id = %s FOR UPDATE", (chat.id,))
                    writer.emit("stock", "token", {"text": "Noted"})
                    flushing = asyncio.create_task(writer.flush())
                    await asyncio.sleep(0.2)
                    finishing = asyncio.create_task(
                        writer.finish_lane("stock", "done", "done", {"text": "Noted."})
                    )
                    await asyncio.sleep(0.2)
                    finishing.cancel()
                    await asyncio.gather(finishing, return_exceptions=True)
                await flushing
                await writer.hand_back("The database became unreachable during this turn.")
    logged = rows(
        play_db,
        "SELECT lane, kind FROM playground.events WHERE turn_id = %s ORDER BY seq",
        (submitted.turn_id,),
    )
    # the submission's own event, then what this attempt wrote: no `done` without the lane's status
    assert logged == [("turn", "turn"), ("stock", "token"), ("turn", "interrupted")]
    [(stock,)] = rows(
        play_db, "SELECT stock_status FROM playground.turn_worker WHERE id = %s", (submitted.turn_id,)
    )
    assert stock != "done"


async def test_the_worker_takes_its_liveness_lock_again_after_losing_its_connection(play_db: str) -> None:
    reconnected = asyncio.Event()
    async with running(play_db, workers=1, poll_seconds=0.1) as rt:
        worker = rt.worker

        async def back() -> None:
            reconnected.set()

        worker.on_reconnect = back
        held = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND classid = %s::oid AND objid = %s::oid"
        )
        assert scalar(play_db, held, (LIVENESS_LOCK_CLASS, worker.lock_key)) == 1
        assert worker._liveness is not None
        pid = worker._liveness.info.backend_pid
        # a restarted database drops every connection, and the lock with it
        assert scalar(play_db, "SELECT pg_terminate_backend(%s)", (pid,))
        await asyncio.wait_for(reconnected.wait(), timeout=10)
        assert scalar(play_db, held, (LIVENESS_LOCK_CLASS, worker.lock_key)) == 1
        # and it still runs turns, each once
        chat = await create_chat(rt.pool)
        await submit_message(rt.pool, chat.id, STATEMENT, "k")
        await await_idle(play_db)
    assert rows(play_db, "SELECT attempts FROM playground.turn_worker WHERE chat_id = %s", (chat.id,)) == [
        (1,)
    ]


async def test_a_turn_stream_resumed_past_its_end_ends(play_db: str) -> None:
    async with running(play_db, workers=1) as rt:
        chat = await create_chat(rt.pool)
        submitted = await submit_message(rt.pool, chat.id, STATEMENT, "k")
        assert submitted is not None
        await await_idle(play_db)
        last = scalar(
            play_db, "SELECT last_seq FROM playground.turn_worker WHERE id = %s", (submitted.turn_id,)
        )

        async def plain(event: Any) -> str:
            return event.kind

        for after in (last, last + 1_000):  # after its last event, or anywhere beyond: nothing will come
            stream = event_stream(rt.pool, rt.hub, StreamScope(chat.id, submitted.turn_id), after, plain)
            events = await asyncio.wait_for(_collect(stream), timeout=10)
            assert [e for e in events if e.id is not None] == []


async def _collect(stream: Any) -> list[Any]:
    return [event async for event in stream]
