"""The event stream: a replay after a client's last event yields exactly the events it missed, then
follows new ones live; over HTTP the same through Last-Event-ID or `after`."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx
from playground_helpers import await_idle, play_db, playground_template, rows, running, serve, settings_for

from playground.app import create_app
from playground.chats import create_chat
from playground.events import EventRow, StreamScope, event_stream
from playground.jobs import submit_message

__all__ = ["play_db", "playground_template"]  # fixtures


async def plain(event: EventRow) -> str:
    return f"{event.lane}:{event.kind}"


async def test_replay_after_an_id_yields_exactly_the_missing_events_then_follows(play_db: str) -> None:
    async with running(play_db, workers=1) as rt:
        chat = await create_chat(rt.pool)
        await submit_message(rt.pool, chat.id, "Our budget is $100k per year.", "k1")
        await await_idle(play_db)
        total = rows(play_db, "SELECT last_event_no FROM playground.chats WHERE id = %s", (chat.id,))[0][0]
        assert total > 5

        stream = event_stream(
            rt.pool, rt.hub, StreamScope(chat.id), 3, plain, retry_ms=1500, poll_seconds=0.2
        )
        opening = await anext(stream)
        assert opening.retry == 1500 and opening.data is None  # the reconnect hint comes first
        replayed = [await anext(stream) for _ in range(total - 3)]
        assert [int(e.id) for e in replayed] == list(range(4, total + 1))
        assert replayed[-1].data == "turn:turn_done"

        # nothing more until something happens: the next read waits...
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.3)
        assert not pending.done()
        # ...and a new message arrives live, numbered right after
        await submit_message(rt.pool, chat.id, "What is our budget?", "k2")
        live = await asyncio.wait_for(pending, timeout=10)
        assert (int(live.id), live.data) == (total + 1, "turn:turn")
        await await_idle(play_db)
        await stream.aclose()


async def test_a_turn_stream_replays_and_ends_with_the_turn(play_db: str) -> None:
    async with running(play_db, workers=1) as rt:
        chat = await create_chat(rt.pool)
        submitted = await submit_message(rt.pool, chat.id, "What is our budget?", "k")
        assert submitted is not None
        # subscribe before the turn has run: the stream follows it to its end
        stream = event_stream(
            rt.pool, rt.hub, StreamScope(chat.id, submitted.turn_id), 0, plain, poll_seconds=0.2
        )
        events = [e async for e in stream if e.id is not None]
        seqs = [int(e.id) for e in events]
        assert seqs == list(range(1, len(seqs) + 1))
        kinds = [e.data for e in events]
        assert kinds[0] == "turn:turn" and kinds[-1] == "turn:turn_done"
        assert kinds.count("stock:done") == kinds.count("beads:done") == 1
        assert "stock:tool_call" in kinds and "beads:injection" in kinds

        replay = event_stream(rt.pool, rt.hub, StreamScope(chat.id, submitted.turn_id), 5, plain)
        again = [e async for e in replay if e.id is not None]
        assert [int(e.id) for e in again] == seqs[5:]


def sse_ids(body: str) -> list[int]:
    return [int(n) for n in re.findall(r"^id: (\d+)\r?$", body, re.MULTILINE)]


def test_over_http_a_reconnect_resumes_after_last_event_id(play_db: str) -> None:
    with (
        serve(create_app(settings_for(play_db, sse_ping_seconds=1))) as base,
        httpx.Client(base_url=base) as client,
    ):
        chat = client.post("/chats", headers={"origin": base}, follow_redirects=False).headers["location"]
        sent = client.post(
            f"{chat}/messages",
            data={"text": "Our budget is $100k per year.", "idempotency_key": "k"},
            headers={"origin": base, "hx-request": "true"},
        )
        turn = sent.headers["x-turn-id"]
        full = client.get(f"{chat}/turns/{turn}/events", timeout=20)
        assert full.status_code == 200 and full.headers["content-type"].startswith("text/event-stream")
        assert full.headers["content-security-policy"]
        ids = sse_ids(full.text)
        assert ids == list(range(1, len(ids) + 1)) and len(ids) > 6
        assert "retry: 2000" in full.text
        # the fragments escape what they carry and target stable ids
        assert f'id="e-{turn}-' in full.text and 'hx-swap-oob="beforeend:#text-' in full.text

        by_header = client.get(f"{chat}/turns/{turn}/events", headers={"Last-Event-ID": "4"}, timeout=20)
        by_query = client.get(f"{chat}/turns/{turn}/events", params={"after": 4}, timeout=20)
        assert sse_ids(by_header.text) == sse_ids(by_query.text) == ids[4:]

        # the chat's stream never ends: read what was missed, then hang up
        missed: list[int] = []
        with client.stream("GET", f"{chat}/events", params={"after": 2}, timeout=20) as live:
            for line in live.iter_lines():
                if line.startswith("id: "):
                    missed.append(int(line[4:]))
                    if len(missed) == len(ids) - 2:
                        break
        assert missed == list(range(3, len(ids) + 1))

        unknown = client.get(f"/chats/{uuid.uuid4()}/events")
        assert unknown.status_code == 404
        assert client.get(f"{chat}/turns/{uuid.uuid4()}/events").status_code == 404
        assert client.get(f"{chat}/events", params={"after": -1}).status_code == 422
