"""Consolidation where it meets the rest: the middleware records what it injects, and the playground's
background pass and inspector."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from langchain_core.messages import HumanMessage
from playground_helpers import LOOPBACK_BASE, ORIGIN, play_db, playground_template, settings_for
from psycopg_pool import AsyncConnectionPool

from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore
from memory.model import Kind, Status
from memory.postgres.connection import open_async_pool, open_pool
from memory.scripted import ScriptedChatModel
from playground.app import create_app
from playground.chats import create_chat
from playground.comparison.lanes import build_beads_agent
from playground.runtime import consolidate_idle_chats

__all__ = ["play_db", "playground_template"]  # fixtures


# -- the middleware records what it injected -------------------------------------------------------


def test_the_middleware_records_the_facts_it_injects_and_only_those(store: FactStore, db_url: str) -> None:
    root = store.root("s")
    budget = store.remember(root, "Our budget is $100k per year.", kind=Kind.USER_INPUT, message_id="m0")
    store.remember(root, "The office cat is called Mochi.", kind=Kind.USER_INPUT, message_id="m1")
    agent, _ = build_beads_agent(
        ScriptedChatModel(replies=["Happy to help with that today.", "Glad to look into it again."]),
        store,
        "s",
        research=False,
    )
    config: Any = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": "s"}}
    agent.invoke({"messages": [HumanMessage("What is our budget?")]}, config)
    with psycopg.connect(db_url) as conn:
        recorded = dict(conn.execute("SELECT fact_id, times FROM beads.retrievals").fetchall())
    assert budget.id in recorded
    injected = {f.id for f in store.audit.session_facts("s") if f.id in recorded}
    assert injected == set(recorded)  # nothing is recorded that is not a stored fact
    # a second turn asking the same thing bumps the count instead of adding rows
    config = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": "s"}}
    agent.invoke({"messages": [HumanMessage("Remind me of our budget?")]}, config)
    with psycopg.connect(db_url) as conn:
        times = conn.execute(
            "SELECT times FROM beads.retrievals WHERE fact_id = %s", (budget.id,)
        ).fetchone()[0]
    assert times == recorded[budget.id] + 1
    # expiry: with every fact recorded two months ago, what the middleware injected is kept
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE beads.facts SET recorded_at = recorded_at - interval '60 days'")
    report = store.consolidate("s", merge=False, horizon=timedelta(days=30))
    expired = {e.fact for e in report.expired}
    assert budget.id not in expired and not expired & set(recorded)
    assert expired == {f.id for f in store.audit.session_facts("s") if f.status is Status.ARCHIVED}
    assert expired  # the turns' unused facts (at least the captured questions' answers) did expire


# -- the playground --------------------------------------------------------------------------------


async def test_the_background_pass_skips_chats_with_a_turn_in_flight(play_db: str) -> None:
    apool: AsyncConnectionPool = await open_async_pool(play_db, min_size=1, max_size=2)
    try:
        with open_pool(play_db, max_size=2) as pool:
            facts = FactStore(pool, FakeEmbedder(64))
            facts.setup()
            rt = SimpleNamespace(pool=apool, facts=facts, settings=settings_for(play_db))
            idle, busy = await create_chat(apool), await create_chat(apool)
            for chat in (idle, busy):
                root = facts.root(chat.session_id)
                facts.remember(root, "Use Postgres.", kind=Kind.USER_INPUT, message_id="m1")
                facts.remember(root, "use postgres", kind=Kind.USER_INPUT, message_id="m2")
            async with apool.connection() as conn:
                await conn.execute(
                    "INSERT INTO playground.turn_worker (id, chat_id, turn_no, idempotency_key, status, "
                    "stock_thread_id, beads_thread_id) VALUES (%s, %s, 1, 'k', 'running', 'a', 'b')",
                    (uuid.uuid4(), busy.id),
                )
            reports = await consolidate_idle_chats(rt)  # type: ignore[arg-type]
            assert [r.session_id for r in reports] == [idle.session_id]
            assert len(reports[0].merges) == 1
            busy_statuses = {f.status for f in facts.audit.session_facts(busy.session_id)}
            assert busy_statuses == {Status.ACTIVE}  # the chat in a turn was not touched
            async with apool.connection() as conn:
                await conn.execute(
                    "UPDATE playground.turn_worker SET status = 'done' WHERE chat_id = %s", (busy.id,)
                )
            reports = await consolidate_idle_chats(rt)  # type: ignore[arg-type]
            merged = {r.session_id: len(r.merges) for r in reports}
            assert merged == {idle.session_id: 0, busy.session_id: 1}  # idempotent for the first
    finally:
        await apool.close()


def test_the_inspector_shows_what_consolidation_did(play_db: str) -> None:
    with TestClient(create_app(settings_for(play_db, consolidate_every=0)), base_url=LOOPBACK_BASE) as client:
        response = client.post("/chats", headers=ORIGIN, follow_redirects=False)
        chat = response.headers["location"]
        with psycopg.connect(play_db) as conn:
            session = conn.execute(
                "SELECT session_id FROM playground.chats WHERE id = %s", (chat.rsplit("/", 1)[1],)
            ).fetchone()[0]
        with open_pool(play_db, max_size=2) as pool:
            facts = FactStore(pool, FakeEmbedder(64))
            facts.setup()
            root = facts.root(session)
            first = facts.remember(root, "We ship on Fridays.", kind=Kind.USER_INPUT, message_id="m1")
            dup = facts.remember(root, "we ship on fridays!", kind=Kind.USER_INPUT, message_id="m2")
            stale = facts.remember(
                root, "The old wiki is at wiki.example.", kind=Kind.USER_INPUT, message_id="m3"
            )
            facts.consolidate(session, horizon=timedelta(days=30), now=datetime.now(UTC) + timedelta(days=90))
        empty = client.get("/chats/" + uuid.uuid4().hex)  # unrelated: a missing chat is a 404, not a page
        assert empty.status_code == 404
        page = client.get(f"{chat}/inspector")
        partial = client.get(f"/partials{chat}/inspector")
    for body in (page.text, partial.text):
        assert 'id="consolidation"' in body
        merged = body[body.index(f'id="consolidated-{dup.short_id}"') :]
        merged = merged[: merged.index("</li>")]
        assert "merged</span> into" in merged and first.short_id in merged and "restates" in merged
        expired = body[body.index(f'id="consolidated-{stale.short_id}"') :]
        expired = expired[: expired.index("</li>")]
        assert ">expired<" in expired and "not retrieved since" in expired and "horizon 30 days" in expired
    assert "<html" not in partial.text  # a fragment
