"""Everything the app shares, built once at startup and closed at shutdown.

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
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory.connection import open_async_pool, open_pool, resolve_database_url
from memory.consolidate import ConsolidationReport
from memory.embedders import Embedder, embedder_from_name
from memory.errors import EmbedderUnavailableError
from memory.lanes import build_stock_agent
from memory.models.select import ActiveModel, select_chat_model
from memory.models.settings import ModelSettings
from memory.stock import open_async_stock_store
from memory.store import FactStore
from memory.websearch import web_search_tool
from playground import db
from playground.events import Hub
from playground.scripted import scripted_lane_model
from playground.settings import PlaygroundSettings
from playground.turns import TurnWorker

_log = logging.getLogger(__name__)

FALLBACK_EMBEDDER = "minilm"


@dataclass
class Runtime:
    settings: PlaygroundSettings
    pool: AsyncConnectionPool
    facts: FactStore
    stock_store: AsyncPostgresStore
    saver: AsyncPostgresSaver
    model: ActiveModel
    embedder: Embedder
    embedder_note: str
    tools: list[BaseTool]
    stock_agent: Any
    hub: Hub
    worker: TurnWorker = field(init=False)

    @property
    def status_lines(self) -> list[tuple[str, str]]:
        """What the page says about the setup: which model and embedder, and what is missing."""
        search = "on (answers say so when the web is unreachable)" if self.settings.web_search else "off"
        model = self.model.model_name
        if self.model.backend != model:
            model += f" ({self.model.backend})"
        return [
            ("Model", f"{model}: {self.model.note}"),
            ("Embedder", f"{self.embedder.name}: {self.embedder_note}"),
            ("Web search", search),
        ]


def select_model(settings: PlaygroundSettings) -> ActiveModel:
    overrides = {} if settings.model_backend is None else {"model_backend": settings.model_backend}
    active = select_chat_model(ModelSettings(**overrides))
    if active.backend == "scripted":
        # rule-based replies that use each lane's memory tools, so the comparison means something
        model = scripted_lane_model(settings.scripted_token_delay_ms)
        active = dataclasses.replace(active, chat_model=model, note="replies by rule; no model is running")
    return active


def select_embedder(name: str) -> tuple[Embedder, str]:
    """The embedder `name` stands for, tried once; the offline one, with a note, if it cannot work."""
    embedder = embedder_from_name(name)  # an unknown name is a configuration error: refuse to start
    try:
        embedder.embed(["probe"])
        return embedder, "ready"
    except EmbedderUnavailableError as exc:
        if name == FALLBACK_EMBEDDER:
            raise
        fallback = embedder_from_name(FALLBACK_EMBEDDER)
        return fallback, f"{name} unavailable ({exc}): using the offline MiniLM embedder"


# chats whose memory may be consolidated now: not being deleted, and no turn queued or running
_IDLE_SESSIONS = """
SELECT c.session_id FROM playground.chats c
 WHERE c.deleted_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM playground.turns t WHERE t.chat_id = c.id AND t.status <> 'done')
   AND (%(session)s::text IS NULL OR c.session_id = %(session)s)
 ORDER BY c.updated_at DESC
"""


async def consolidate_idle_chats(rt: Runtime) -> list[ConsolidationReport]:
    """One consolidation pass over every idle chat; never inside a turn.

    Each chat is re-checked just before its own pass. A turn submitted during that pass is still
    safe: consolidation writes in short transactions that re-check what they change under row locks.
    """
    days = rt.settings.consolidate_horizon_days
    horizon = timedelta(days=days) if days > 0 else None
    async with rt.pool.connection() as conn:
        cur = await conn.execute(_IDLE_SESSIONS, {"session": None})
        sessions = [row["session_id"] for row in await cur.fetchall()]
    reports = []
    for session in sessions:
        async with rt.pool.connection() as conn:
            cur = await conn.execute(_IDLE_SESSIONS, {"session": session})
            if await cur.fetchone() is None:
                continue  # a turn started since the list was read: this chat waits for the next pass
        reports.append(await rt.facts.aio.consolidate(session, horizon=horizon))
    return reports


async def consolidation_loop(rt: Runtime) -> None:
    """Consolidate idle chats every `consolidate_every` minutes until cancelled."""
    while True:
        await asyncio.sleep(rt.settings.consolidate_every * 60)
        try:
            reports = await consolidate_idle_chats(rt)
        except Exception:  # a failed pass must not end the loop: the next one tries again
            _log.exception("consolidation pass failed")
            continue
        archived = sum(r.archived for r in reports)
        if archived:
            _log.info("consolidation archived %d facts in %d chats", archived, len(reports))


@contextlib.asynccontextmanager
async def open_runtime(settings: PlaygroundSettings) -> AsyncIterator[Runtime]:
    """Open pools, apply migrations, pick model and embedder, start the hub and the workers."""
    from playground.lanes_runner import run_turn  # the runner needs Runtime; keep the import one-way

    url = settings.database_url or await asyncio.to_thread(resolve_database_url)
    async with contextlib.AsyncExitStack() as stack:
        embedder, embedder_note = await asyncio.to_thread(select_embedder, settings.embedder)
        model = await asyncio.to_thread(select_model, settings)

        # check=: a connection that died idle (the database restarted) is replaced, not handed out
        pool = await open_async_pool(
            url,
            min_size=2,
            max_size=8 + 3 * settings.workers,
            check=AsyncConnectionPool.check_connection,
            timeout=settings.database_wait_seconds,
        )
        stack.push_async_callback(pool.close)
        sync_pool: ConnectionPool = await asyncio.to_thread(
            open_pool, url, min_size=1, max_size=8, check=ConnectionPool.check_connection
        )
        stack.callback(sync_pool.close)
        facts = FactStore(sync_pool, embedder, auto_supersede=settings.auto_supersede)
        await asyncio.to_thread(facts.setup)  # the library's migrations
        stack.callback(facts.aio.close)
        async with pool.connection() as conn:
            await db.setup(conn)  # the playground's migrations
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        stock_store, stock_pool = await open_async_stock_store(url, embedder)
        stack.push_async_callback(stock_pool.close)

        tools = [web_search_tool()] if settings.web_search else []
        stock_agent = build_stock_agent(
            model.chat_model, stock_store, tools=tools, checkpointer=saver, research=settings.research
        )
        hub = Hub(pool.conninfo, poll_seconds=settings.poll_seconds)
        await hub.start()
        stack.push_async_callback(hub.stop)
        rt = Runtime(
            settings, pool, facts, stock_store, saver, model, embedder, embedder_note, tools, stock_agent, hub
        )

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
        await rt.worker.start()  # unfinished turns of an earlier process are claimed from here on
        stack.push_async_callback(rt.worker.stop)
        if settings.consolidate_every > 0:
            consolidating = asyncio.create_task(consolidation_loop(rt), name="consolidation")
            stack.callback(consolidating.cancel)
        _log.info("playground ready: %s", "; ".join(f"{k}: {v}" for k, v in rt.status_lines))
        yield rt
