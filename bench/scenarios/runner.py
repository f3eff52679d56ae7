"""One arm through one scenario: the playground's runtime, its turn runner, one lane, rows out.

Each cell (scenario, arm, run) gets a database of its own, cloned from a template migrated once, and
the playground's runtime opened on it in this process with the arm's settings (`open_runtime`, as
the app starts). The runtime's worker is stopped so that the bench claims each turn itself and runs
it with `run_turn(..., lanes=(arm.lane,))`: the same code the app runs, for the arm's lane alone, so
that no turn waits on another lane's model calls and latency is the lane's own. Every message is a
new turn on a new LangGraph thread in one chat, as a user's messages are in the playground.

What a step's row holds comes from the turn's event log (reply, model calls, tokens, latency, tool
calls, each injected block's facts, characters and tokens), the scenario tool's own log of calls
(the sub-agents' calls included), the lane's checkpoint (the stock lane's search results, whole),
and the lane's store after the step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from langchain_core.messages import ToolMessage
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.scenarios.arms import ARMS, Arm
from bench.scenarios.checks import step_checks
from bench.scenarios.script import Scenario, ToolLog, scenario_tool
from memory.doors.middleware import message_text
from playground import jobs
from playground.chats import create_chat
from playground.comparison.stock import STOCK_NAMESPACE_ROOT
from playground.runtime import Runtime
from playground.settings import PlaygroundSettings
from playground.startup import open_runtime
from playground.turn_runner import run_turn

#: the playground's settings every arm shares. No web: the scenario's tool is the only source, so a
#: finding is checkable and no run depends on the network. No background consolidation: a pass on a
#: wall-clock timer would change a chat's memory between two turns in some runs and not in others.
BASE_SETTINGS: dict[str, Any] = {
    "web_search": False,
    "research": True,
    "consolidate_every": 0,
    "workers": 1,
    "lease_seconds": 3600,
}
#: the root agent's id in our lane: its injections are the block the mechanism table reads
ROOT_AGENT = "root"

StepSink = Callable[[dict[str, Any]], None]


def settings_for(db_url: str, arm: Arm, model_setting: str, embedder: str) -> PlaygroundSettings:
    values = {
        **BASE_SETTINGS,
        "database_url": db_url,
        "model": model_setting,
        "embedder": embedder,
        **arm.settings,
    }
    return PlaygroundSettings(**values)


def _admin(server_url: str, statement: sql.Composed) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(statement)


async def make_template(server_url: str, model_setting: str, embedder: str) -> str:
    """A database with the library's, the playground's, LangGraph's and the stock store's tables,
    to clone per cell; returns its name."""
    name = f"scenarios_tpl_{uuid.uuid4().hex[:10]}"
    _admin(server_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(server_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    async with open_runtime(settings_for(url, ARMS["ours"], model_setting, embedder)) as rt:
        await rt.worker.stop()
    return name


def drop_database(server_url: str, name: str) -> None:
    _admin(server_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.asynccontextmanager
async def cell_database(server_url: str, template: str) -> AsyncIterator[str]:
    name = f"scenarios_{uuid.uuid4().hex[:12]}"
    _admin(
        server_url,
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)),
    )
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        drop_database(server_url, name)


_EVENTS = "SELECT lane, kind, payload FROM playground.events WHERE turn_id = %s ORDER BY seq"


async def turn_events(rt: Runtime, turn_id: uuid.UUID) -> list[dict[str, Any]]:
    async with rt.pool.connection() as conn:
        cur = await conn.execute(_EVENTS, (turn_id,))
        return [dict(row) for row in await cur.fetchall()]


async def store_size(rt: Runtime, arm: Arm, session_id: str) -> dict[str, int]:
    """What the lane's memory holds for the session: our facts (every status) and edges, or the stock
    lane's items."""
    if arm.lane == "stock":
        items = await rt.stock_store.asearch((STOCK_NAMESPACE_ROOT, session_id), limit=10_000)
        texts = [str((item.value or {}).get("content", item.value)) for item in items]
        return {
            "facts": len(texts),
            "active": len(texts),
            "chars": sum(len(t) for t in texts),
            "supersedes": 0,
        }
    facts = await asyncio.to_thread(rt.facts.audit.session_facts, session_id)
    edges = await asyncio.to_thread(rt.facts.audit.edge_counts, session_id)
    return {
        "facts": len(facts),
        "active": sum(f.status.value == "active" for f in facts),
        "chars": sum(len(f.body) for f in facts),
        "supersedes": int(edges.get("supersedes", 0)),
    }


async def stock_recall_chars(rt: Runtime, thread_id: str) -> list[int]:
    """The length of every search_memory result the stock lane read in the turn, whole (the event
    log keeps what the page shows)."""
    state = await rt.stock_agent.aget_state({"configurable": {"thread_id": thread_id}})
    messages = state.values.get("messages", [])
    return [
        len(message_text(m)) for m in messages if isinstance(m, ToolMessage) and m.name == "search_memory"
    ]


def summarise_events(events: list[dict[str, Any]], lane: str) -> dict[str, Any]:
    """The lane's reply, figures, tool calls and injections, from the turn's event log."""
    out: dict[str, Any] = {
        "status": "missing",
        "reply": "",
        "error": None,
        "model_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "latency_ms": 0,
        "tool_calls": [],
        "injections": [],
        "subagent_injections": 0,
        "other_lane_events": 0,  # none: the turn ran this lane alone
    }
    for event in events:
        if event["lane"] != lane:
            out["other_lane_events"] += event["lane"] != "turn"
            continue
        kind, payload = event["kind"], event["payload"] or {}
        if kind == "usage":  # running totals: a lane that fails part-way keeps what it had spent
            out.update({k: int(payload.get(k, 0)) for k in ("model_calls", "input_tokens", "output_tokens")})
        elif kind == "tool_call":
            out["tool_calls"].append(payload.get("name", ""))
        elif kind == "injection":
            if payload.get("agent_id") not in (None, ROOT_AGENT):
                out["subagent_injections"] += 1
                continue
            out["injections"].append(
                {
                    "facts": len(payload.get("facts") or []),
                    "chars": int(payload.get("chars") or 0),
                    "tokens": int(payload.get("tokens") or 0),
                    "not_in_memory": bool(payload.get("not_in_memory")),
                    "texts": [str(f.get("text", "")) for f in payload.get("facts") or []],
                }
            )
        elif kind == "done":
            metrics = payload.get("metrics") or {}
            out.update(
                status="done",
                reply=payload.get("text") or "",
                model_calls=int(metrics.get("model_calls", 0)),
                input_tokens=int(metrics.get("input_tokens", 0)),
                output_tokens=int(metrics.get("output_tokens", 0)),
                latency_ms=int(metrics.get("latency_ms", 0)),
            )
        elif kind == "error":
            out.update(status="error", error=payload.get("message"))
    return out


async def run_cell(
    server_url: str,
    template: str,
    scenario: Scenario,
    arm: Arm,
    run: int,
    *,
    model: str,
    model_setting: str,
    embedder: str,
    sink: StepSink,
) -> list[dict[str, Any]]:
    """Run every step of `scenario` in `arm`; each step's row goes to `sink` as soon as it is done."""
    cell = uuid.uuid4().hex[:12]
    rows: list[dict[str, Any]] = []
    async with cell_database(server_url, template) as db_url:
        settings = settings_for(db_url, arm, model_setting, embedder)
        async with open_runtime(settings) as rt:
            await rt.worker.stop()  # this bench claims each turn itself, for one lane
            log = ToolLog()
            rt.tools = [*rt.tools, scenario_tool(scenario, log)]
            rt.compile_lanes()
            chat = await create_chat(rt.pool, f"{scenario.name} / {arm.name} / run {run}")
            owner = uuid.uuid4()
            for index, step in enumerate(scenario.steps):
                submitted = await jobs.submit_message(rt.pool, chat.id, step.text, uuid.uuid4().hex)
                assert submitted is not None
                turn = await jobs.claim(rt.pool, owner, 1, settings.lease_seconds, [])
                if turn is None or turn.id != submitted.turn_id:
                    raise RuntimeError(f"claimed {turn} instead of the turn just submitted")
                log.take()
                started = time.monotonic()
                await run_turn(rt, turn, owner, lanes=(arm.lane,))
                wall = time.monotonic() - started
                lane = summarise_events(await turn_events(rt, turn.id), arm.lane)
                if lane["status"] != "done":  # a failed lane logs no latency: the turn's own time
                    lane["latency_ms"] = round(wall * 1000)
                tool_log = log.take()
                row: dict[str, Any] = {
                    "kind": "step",
                    "scenario": scenario.name,
                    "arm": arm.name,
                    "lane": arm.lane,
                    "run": run,
                    "cell": cell,
                    "step": index + 1,
                    "steps": len(scenario.steps),
                    "conversation": step.conversation,
                    "role": step.role,
                    "text": step.text,
                    **lane,
                    "wall_s": round(wall, 2),
                    "tool_log": tool_log,
                    "recall_chars": (
                        await stock_recall_chars(rt, turn.stock_thread_id) if arm.lane == "stock" else []
                    ),
                    "store": await store_size(rt, arm, chat.session_id),
                    "checks": step_checks(scenario, index, lane["reply"], lane["tool_calls"], tool_log),
                    "model": model,
                    "model_name": rt.model.model_name,
                    "embedder": rt.embedder.name,
                    "settings": {
                        k: getattr(settings, k) for k in ("injection", "auto_supersede", "memory_tools")
                    },
                    "memory_tools": rt.memory_tools,
                    "at": datetime.now(UTC).isoformat(timespec="seconds"),
                }
                rows.append(row)
                sink(row)
    return rows
