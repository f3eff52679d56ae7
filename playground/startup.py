"""Build the runtime once at startup and close it at shutdown.

One async pool serves the playground's tables and LangGraph's checkpointer; the fact graph has its
own sync pool (FactStore is synchronous, with an async face), and the stock store its own (it pins
the search path to its embedder's schema). The model and the embedder are chosen here, with a line
each saying why, which the page shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory.embedders import Embedder, embedder_from_name
from memory.errors import EmbedderUnavailableError, MissingExtraError
from memory.graph.store import FactStore
from memory.postgres.connection import open_async_pool, open_pool
from memory.postgres.embedded_postgres import release_embedded, start_embedded
from memory.settings import MemorySettings
from playground import db
from playground.comparison.stock import open_async_stock_store
from playground.comparison.websearch import web_search_tool
from playground.events import Hub
from playground.leader import Leadership
from playground.models.select import ActiveModel, select_chat_model
from playground.models.settings import ModelSettings
from playground.models.smoke import ToolGate, tool_gate
from playground.runtime import Runtime, consolidation_loop
from playground.scripted import scripted_lane_model
from playground.settings import PlaygroundSettings
from playground.turn_runner import run_turn
from playground.turn_worker import TurnWorker

_log = logging.getLogger(__name__)

FALLBACK_EMBEDDER = "minilm"
#: pg_stat_activity.application_name of an app process's connections, before its pid
APPLICATION_NAME = "playground"


def select_model(settings: PlaygroundSettings) -> ActiveModel:
    overrides: dict[str, Any] = {}
    if settings.model is not None:
        overrides["model"] = settings.model
    if settings.model_backend is not None:
        overrides["model_backend"] = settings.model_backend
    if settings.local_model is not None:
        overrides["local_model"] = settings.local_model
    active = select_chat_model(ModelSettings(**overrides))
    if active.backend == "scripted":
        # rule-based replies that use each lane's memory tools, so the comparison means something
        model = scripted_lane_model(settings.scripted_token_delay_ms)
        active = dataclasses.replace(active, chat_model=model, note="replies by rule; no model is running")
    return active


def gate_tools(settings: PlaygroundSettings, model: ActiveModel) -> ToolGate | None:
    """The smoke gate's tool-call checks on the chosen model (a few calls, once per start), or None
    where nothing depends on them: the gate is off, no lane would get web search or the research
    sub-agent, or the model is the scripted double."""
    if (
        not settings.tool_gate
        or model.backend == "scripted"
        or not (settings.web_search or settings.research)
    ):
        return None
    gate = tool_gate(model.chat_model)
    _log.info("tool gate for %s: %s", model.label, gate.reason)
    return gate


def select_embedder(name: str) -> tuple[Embedder, str]:
    """The embedder `name` stands for, tried once; the offline one, with a note, if it cannot work."""
    try:
        embedder = embedder_from_name(name)  # an unknown name is a configuration error: refuse to start
        embedder.embed(["probe"])
        return embedder, "ready"
    except (EmbedderUnavailableError, MissingExtraError) as exc:  # not installed: said when built
        if name == FALLBACK_EMBEDDER:
            raise
        fallback = embedder_from_name(FALLBACK_EMBEDDER)
        return fallback, f"{name} unavailable ({exc}): using the offline MiniLM embedder"


@contextlib.asynccontextmanager
async def open_runtime(settings: PlaygroundSettings) -> AsyncIterator[Runtime]:
    """Open pools, apply migrations, pick model and embedder, start the hub and the workers."""
    library = MemorySettings()
    url = settings.database_url or library.database_url
    async with contextlib.AsyncExitStack() as stack:
        if url is None:  # the embedded server, shared by every process on its data directory
            url = await asyncio.to_thread(start_embedded, library.pgdata)
            # last on the way out, whatever signal stopped us: the last process out stops the server
            stack.callback(release_embedded, library.pgdata)
        # every connection says which process holds it (pg_stat_activity.application_name)
        url = make_conninfo(url, application_name=f"{APPLICATION_NAME} {os.getpid()}")
        await db.check_connection_room(url, settings.connections_per_process, settings.processes)
        embedder, embedder_note = await asyncio.to_thread(select_embedder, settings.embedder)
        model = await asyncio.to_thread(select_model, settings)
        gate = await asyncio.to_thread(gate_tools, settings, model)

        # check=: a connection that died idle (the database restarted) is replaced, not handed out
        pool = await open_async_pool(
            url,
            min_size=2,
            max_size=settings.app_pool_size,
            check=AsyncConnectionPool.check_connection,
            timeout=settings.database_wait_seconds,
        )
        stack.push_async_callback(pool.close)
        sync_pool = await asyncio.to_thread(
            open_pool,
            url,
            min_size=1,
            max_size=settings.facts_pool_size,
            check=ConnectionPool.check_connection,
        )
        stack.callback(sync_pool.close)
        facts = FactStore(sync_pool, embedder, auto_supersede=settings.auto_supersede)
        setting_up = await db.hold_setup_lock(url)  # one starting process at a time, to the stock store
        stack.push_async_callback(setting_up.close)
        await asyncio.to_thread(facts.setup)  # the library's migrations
        stack.callback(facts.aio.close)
        async with pool.connection() as conn:
            await db.setup(conn)  # the playground's migrations
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        stock_store, stock_pool = await open_async_stock_store(
            url, embedder, settings.stock_pool_size, backend=settings.stock_store
        )
        stack.push_async_callback(stock_pool.close)
        await setting_up.close()

        tools = [web_search_tool()] if settings.web_search else []
        hub = Hub(db.conninfo_of(pool), poll_seconds=settings.poll_seconds)
        await hub.start()
        stack.push_async_callback(hub.stop)
        rt = Runtime(
            settings, pool, facts, stock_store, saver, model, embedder, embedder_note, tools, hub, gate
        )
        rt.compile_lanes()

        async def run(turn: Any, owner: Any) -> None:
            await run_turn(rt, turn, owner)

        async def database_back() -> None:
            _log.info("the database is back: replacing the stock store's dead connections")
            await stock_pool.check()

        rt.worker = TurnWorker(
            pool,
            hub,
            run,
            concurrency=settings.workers,
            lease_seconds=settings.lease_seconds,
            poll_seconds=settings.poll_seconds,
            on_reconnect=database_back,
        )
        hub.on_chat_stop = rt.worker.stop_chat  # a chat deleted through another process
        await rt.worker.start()  # unfinished turns of an earlier process are claimed from here on
        stack.push_async_callback(rt.worker.stop)
        if settings.consolidate_every > 0:
            leader = Leadership(url)  # one process at a time consolidates
            stack.push_async_callback(leader.close)
            consolidating = asyncio.create_task(consolidation_loop(rt, leader), name="consolidation")
            stack.callback(consolidating.cancel)
        _log.info("playground ready: %s", "; ".join(f"{k}: {v}" for k, v in rt.status_lines))
        yield rt
