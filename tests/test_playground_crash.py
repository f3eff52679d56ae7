"""A process killed with SIGKILL mid-turn leaves the turn to the next one, which finishes it exactly once.

The app runs in a subprocess against the test database, with the scripted model pausing on every
token so the kill lands while both lanes are replying (the stock lane after its memory tool ran).
Then the test process starts the app's workers itself, as a restarted server would: they resume the
turn at once (the dead worker's liveness lock died with it; its 30 s lease has not lapsed). Last, the
same message runs in a fresh chat without a crash: both runs stored exactly the same.
"""

from __future__ import annotations

import time

import httpx
from playground_helpers import await_idle, play_db, playground_template, rows, running, scalar

from bench.reliability import checks
from bench.reliability.servers import app_process
from playground.chats import create_chat
from playground.jobs import submit_message
from playground.scripted import ACK

__all__ = ["play_db", "playground_template"]  # fixtures

MESSAGE = "Our budget is $100k per year. It must be self-hostable."


def send(base: str, text: str) -> tuple[str, str]:
    headers = {"origin": base}
    chat = httpx.post(f"{base}/chats", headers=headers, follow_redirects=False).headers["location"]
    sent = httpx.post(
        f"{base}{chat}/messages", data={"text": text}, headers={**headers, "hx-request": "true"}
    )
    assert sent.status_code == 200
    return chat.rsplit("/", 1)[1], sent.headers["x-turn-id"]


def wait_for(db_url: str, query: str, params: tuple[object, ...], timeout: float = 30.0) -> None:
    try:
        checks.wait_for(lambda: bool(scalar(db_url, query, params)), timeout, query, interval=0.02)
    except TimeoutError as exc:
        raise AssertionError(str(exc)) from None


def stored(db_url: str, chat_id: str) -> tuple[list[tuple[object, ...]], int]:
    session = chat_id.replace("-", "")
    facts = rows(
        db_url,
        "SELECT kind, source, status, body FROM beads.facts WHERE session_id = %s ORDER BY kind, source, body",
        (session,),
    )
    items = scalar(
        db_url, "SELECT count(*) FROM lg_fake_64_s0.store WHERE prefix = %s", (f"memories.{session}",)
    )
    return facts, items


async def test_a_turn_killed_mid_reply_is_resumed_once_without_duplicates(play_db: str) -> None:
    with app_process(play_db, scripted_token_delay_ms=1500, lease_seconds=30) as app:
        chat_id, turn_id = send(app.base, MESSAGE)
        # the stock lane's memory tool has run; both lanes are now streaming their replies
        wait_for(
            play_db,
            "SELECT count(*) FROM playground.events WHERE turn_id = %s AND lane = 'stock' AND kind = 'tool_result'",
            (turn_id,),
        )
        time.sleep(0.3)
        app.kill()  # SIGKILL: no shutdown hook runs, no lease is handed back
    assert rows(
        play_db,
        "SELECT status, stock_status, beads_status FROM playground.turn_worker WHERE id = %s",
        (turn_id,),
    ) == [("running", "pending", "pending")]
    assert (
        scalar(
            play_db, "SELECT count(*) FROM playground.events WHERE turn_id = %s AND kind = 'done'", (turn_id,)
        )
        == 0
    )

    async with running(play_db, lease_seconds=30) as rt:
        await await_idle(play_db, timeout=20)  # well before the dead worker's 30 s lease would lapse
        control = await create_chat(rt.pool)
        submitted = await submit_message(rt.pool, control.id, MESSAGE, "control")
        assert submitted is not None
        await await_idle(play_db, timeout=20)
    control_chat, control_turn = str(control.id), str(submitted.turn_id)

    def kinds(turn: str) -> list[tuple[object, ...]]:
        return rows(
            play_db,
            "SELECT lane, kind, count(*) FROM playground.events WHERE turn_id = %s AND kind <> 'token'"
            " GROUP BY lane, kind ORDER BY lane, kind",
            (turn,),
        )

    crashed = {(lane, kind): n for lane, kind, n in kinds(turn_id)}
    assert crashed[("stock", "done")] == crashed[("beads", "done")] == crashed[("turn", "turn_done")] == 1
    assert crashed[("stock", "resume")] == crashed[("beads", "resume")] == 1
    assert crashed[("stock", "tool_call")] == crashed[("stock", "tool_result")] == 1  # the tool ran once
    assert scalar(play_db, "SELECT attempts FROM playground.turn_worker WHERE id = %s", (turn_id,)) == 2
    seqs = [
        r[0]
        for r in rows(
            play_db, "SELECT seq FROM playground.events WHERE turn_id = %s ORDER BY seq", (turn_id,)
        )
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    replies = rows(
        play_db, "SELECT author, body FROM playground.messages WHERE turn_id = %s ORDER BY author", (turn_id,)
    )
    assert replies == [("beads", ACK), ("stock", ACK), ("user", MESSAGE)]

    # the same message without a crash stored exactly the same in both lanes
    assert stored(play_db, chat_id) == stored(play_db, control_chat)
    facts, items = stored(play_db, chat_id)
    assert items == 1 and len(facts) >= 3
    control = {(lane, kind): n for lane, kind, n in kinds(control_turn)}
    # a second attempt starts each lane again and re-runs the model call that was cut off (so the
    # facts are injected again): everything else happened exactly as often as without the crash
    again = {"start", "resume", "injection"}
    assert {k: n for k, n in crashed.items() if k[1] not in again} == {
        k: n for k, n in control.items() if k[1] not in again
    }
