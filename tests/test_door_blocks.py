"""Every door's block is what the model reads: the HTTP API's search, MCP's search and the middleware's
injection render one block through one path (memory.context.recall.plan_query), byte for byte; and a search
as of a past moment is the library's (FactStore.search(as_of=...)), its flag a record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from agent_helpers import system_text
from fastapi import FastAPI
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from mcp import Client
from playground_helpers import play_db, playground_template
from test_api import client, serving

from memory.context.block import HEADER, PINNED_HEADER
from memory.context.recall import plan_query
from memory.doors.mcp_server import build_server
from memory.doors.middleware import BeadsMemoryMiddleware
from memory.flags import CurrentAsOf, ReplacedAutomatically, ResolvedFrom
from memory.graph.store import FactStore
from memory.scripted import ScriptedChatModel

__all__ = ["play_db", "playground_template"]  # fixtures

SESSION = "doors"
# said weeks ago: every line shows its date, whatever the clock says when the test runs
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SAID = [
    "Our budget is $100k.",
    "The launch is planned for the second week of June, once the vendor contract is signed.",
    "Correction: our budget is now $120k.",
    "Maria leads the design review on Thursdays.",
    "We keep the budget spreadsheet in the finance drive.",
]
ASK = "What is our budget?"
# the agent's long answer: a door once cut it at its first lines, the model reads its budget sentence
REPORT = (
    "I went through the vendor comparison you shared. Vendor A is cheaper on licences but charges "
    "for onboarding, Vendor B bundles support, and Vendor C has the best uptime record of the three. "
    "Their contract terms are similar, all three offer a yearly plan, and each can start in June. "
    "Given the numbers, the budget of $120k covers Vendor B with room for training."
)


@pytest.fixture
async def app(play_db: str) -> AsyncIterator[FastAPI]:
    async with serving(play_db) as application:
        yield application


async def test_the_api_mcp_and_the_middleware_give_one_block_for_a_query(app: FastAPI) -> None:
    store: FactStore = app.state.runtime.facts
    # every claim a candidate (the fake embedder's similarities are noise): the block is then full
    store.search_options = replace(store.search_options, relevance_floor=-1.0)
    root = store.root(SESSION)
    for i, text in enumerate(SAID):
        store.capture_message(root, text, message_id=f"m{i}", valid_from=T0 + timedelta(days=i))
    store.remember(root, REPORT, source_key="report", valid_from=T0 + timedelta(days=len(SAID)))
    [pinned] = [f for f in store.audit.session_facts(SESSION) if f.body.startswith("Maria")]
    store.pin(pinned.id)

    model = ScriptedChatModel(replies=["ok"])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store, root)])
    agent.invoke({"messages": [HumanMessage(ASK, id="q1")]}, {"configurable": {"thread_id": "t"}})
    injected = system_text(model.prompts[0])
    # the correction's line, with the earlier value folded away, and the pinned tier
    assert injected.startswith(HEADER) and PINNED_HEADER in injected
    assert "$120k" in injected and "$100k" not in injected
    # the long answer as the model reads it: around its sentence on the budget, not cut before it;
    # and the pinned fact in its own tier only (a door once showed both the other way)
    assert "the budget of $120k covers Vendor B with room for training." in injected
    assert injected.count(pinned.body) == 1

    async with client(app) as api:
        found = await api.post(f"/api/sessions/{SESSION}/search", json={"query": ASK})
    assert found.status_code == 200, found.text
    async with Client(build_server(store)) as mcp:
        answered = await mcp.call_tool("search", {"query": ASK, "session_id": SESSION})
    assert not answered.is_error and answered.structured_content is not None

    assert found.json()["block"] == injected
    assert answered.structured_content["block"] == injected
    assert plan_query(store, root, ASK).block == injected


def test_a_search_as_of_a_past_moment_is_the_librarys(store: FactStore) -> None:
    root = store.root("then")
    [first] = store.capture_message(root, SAID[0], message_id="m1").facts
    between = store.get(first.id).recorded_at
    store.capture_message(root, SAID[2], message_id="m2")

    now = store.search(root, ASK)
    assert now.hits[0].fact.body == SAID[2]
    assert any(isinstance(f, ResolvedFrom) for f in now.hits[0].flags)
    current = now.hits[0].fact.short_id

    then = store.search(root, ASK, as_of=between)
    assert [h.fact.body for h in then.hits] == [SAID[0]]
    # the version current then, flagged as such; how today's search resolved it is not its story
    assert CurrentAsOf(current) in then.hits[0].flags
    assert not any(isinstance(f, ResolvedFrom | ReplacedAutomatically) for f in then.hits[0].flags)
    assert then.hits[0].flags[-1].text == f"current at as_of; superseded since by {current}"

    before = store.search(root, ASK, as_of=between - timedelta(days=1))
    assert before.not_in_memory and before.hits == ()
    assert (current, "not in memory yet, or no longer valid, at as_of") in before.dropped

    # k holds for what was there then: at most k of the hits of a search asked for more
    capped = store.search(root, ASK, k=1, as_of=datetime.now(UTC))
    assert len(capped.hits) <= 1
