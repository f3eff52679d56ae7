"""Everything the app shares, as one record: pools, stores, the model, the embedder, the workers.

`playground.startup.open_runtime` builds it once at startup and closes it at shutdown; the routes and
the turn runner read it. The background consolidation of idle chats lives here too: it needs only
the record.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore

from memory.embedders import Embedder
from memory.graph.consolidate import ConsolidationReport
from memory.graph.store import FactStore
from playground import jobs
from playground.comparison.lanes import build_beads_agent, build_stock_agent
from playground.db import AppPool
from playground.events import Hub
from playground.leader import Leadership
from playground.models.select import ActiveModel
from playground.models.smoke import ToolGate
from playground.settings import PlaygroundSettings
from playground.turn_worker import TurnWorker

_log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: PlaygroundSettings
    pool: AppPool
    facts: FactStore
    stock_store: AsyncPostgresStore
    saver: AsyncPostgresSaver
    model: ActiveModel
    embedder: Embedder
    embedder_note: str
    tools: list[BaseTool]
    hub: Hub
    #: what the smoke gate's tool-call checks decided at startup; None: not run (see startup.gate_tools)
    gate: ToolGate | None = None
    worker: TurnWorker = field(init=False)
    stock_agent: Any = field(init=False)
    beads_agent: Any = field(init=False)

    def compile_lanes(self) -> None:
        """Both lanes' agents, compiled once for every chat: each run names its session in
        `configurable` (LangMem's namespace template reads it there, our middleware too)."""
        chat_model = self.model.chat_model
        self.stock_agent = build_stock_agent(
            chat_model,
            self.stock_store,
            tools=self.lane_tools,
            checkpointer=self.saver,
            research=self.research,
        )
        self.beads_agent, _ = build_beads_agent(
            chat_model,
            self.facts,
            tools=self.lane_tools,
            checkpointer=self.saver,
            research=self.research,
            injection=self.settings.injection,
            capture=self.settings.capture,
            memory_tools=self.memory_tools,
        )

    @property
    def tools_allowed(self) -> bool:
        """Whether the model may have web search and the research sub-agent (the gate passed, or
        did not run)."""
        return self.gate is None or self.gate.passed

    @property
    def lane_tools(self) -> list[BaseTool]:
        return self.tools if self.tools_allowed else []

    @property
    def research(self) -> bool:
        return self.settings.research and self.tools_allowed

    @property
    def memory_tools(self) -> bool:
        """Whether our lane's model is offered the memory tools (settings.memory_tools)."""
        return self.settings.offers_memory_tools(self.model.backend)

    @property
    def status_lines(self) -> list[tuple[str, str]]:
        """What the page says about the setup: which model and embedder, and what is missing."""
        return [
            ("Model", f"{self.model.label}, in both lanes: {self.model.note}"),
            ("Embedder", f"{self.embedder.name}: {self.embedder_note}"),
            ("Tools", self._tools_line),
            ("Memory tools", self._memory_tools_line),
        ]

    @property
    def _tools_line(self) -> str:
        wanted = [
            name
            for name, on in (("web search", self.settings.web_search), ("delegation", self.settings.research))
            if on
        ]
        if not wanted:
            return "web search and delegation off (settings)"
        if self.gate is None:
            return f"{' and '.join(wanted)} on" + (
                " (web search answers in one sentence when the web is unreachable)"
                if self.settings.web_search
                else ""
            )
        if self.gate.passed:
            return f"{' and '.join(wanted)} on: {self.gate.reason}"
        return (
            f"{' and '.join(wanted)} off, because {self.gate.reason}; our lane still captures and "
            "injects, the stock lane keeps LangMem's tools"
        )

    @property
    def _memory_tools_line(self) -> str:
        if self.memory_tools:
            return "our lane's model may call remember_fact, pin_fact and recall_from_subagents"
        why = (
            " (the offline model calls tools instead of answering)"
            if self.settings.memory_tools == "auto"
            else ""
        )
        return f"off for our lane{why}: capture, corrections and recall need no tool call"


async def consolidate_idle_chats(rt: Runtime) -> list[ConsolidationReport]:
    """One consolidation pass over every idle chat; never inside a turn.

    Each chat is re-checked just before its own pass. A turn submitted during that pass is still
    safe: consolidation writes in short transactions that re-check what they change under row locks.
    """
    days = rt.settings.consolidate_horizon_days
    horizon = timedelta(days=days) if days > 0 else None
    reports = []
    for session in await jobs.idle_sessions(rt.pool):
        if not await jobs.idle_sessions(rt.pool, session):
            continue  # a turn started since the list was read: this chat waits for the next pass
        reports.append(await rt.facts.aio.consolidate(session, horizon=horizon))
    return reports


async def consolidation_loop(rt: Runtime, leader: Leadership) -> None:
    """Consolidate idle chats every `consolidate_every` minutes until cancelled; of all the app
    processes on the database, only the one that holds the leader lock does."""
    while True:
        await asyncio.sleep(rt.settings.consolidate_every * 60)
        if not await leader.lead():
            continue
        try:
            reports = await consolidate_idle_chats(rt)
        except Exception:  # a failed pass must not end the loop: the next one tries again
            _log.exception("consolidation pass failed")
            continue
        archived = sum(r.archived for r in reports)
        if archived:
            _log.info("consolidation archived %d facts in %d chats", archived, len(reports))
