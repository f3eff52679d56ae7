"""Run one turn: both lanes at once, each on its own new LangGraph thread, every chunk logged as an event.

A lane streams with `durability="sync"`, so each finished step is checkpointed before the next one
starts. When a turn is claimed again after a crash, each lane that had not finished asks its
checkpoint where it was: never started (run it), stopped mid-way (resume with `None` input on the
same thread: only the step that was cut off runs again), or finished (just record the reply). Memory
writes are safe to repeat: the fact graph's ids are content-addressed, and a finished stock tool call
is in the checkpoint, so it is not called twice.

A tool's error goes back to the lane's model as the tool's result (playground.comparison.lanes), so
it fails nothing. A lane's failure (model down, LangMem's ConfigurationError, which is a
BaseException) becomes that lane's `error` event; the other lane and the page carry on. Losing the database is not a
lane's failure: the attempt stops, and once the database answers again the turn is handed back to the
queue with an `interrupted` event saying why, and the next attempt resumes both lanes from their
checkpoints.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal, cast

import psycopg
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langmem.errors import ConfigurationError as LangMemConfigurationError

from memory.context.block import clip
from memory.doors.middleware import INJECTION_EVENT, message_text
from memory.errors import BeadsMemoryError
from memory.rules.conclusions import why_no_answer
from playground import jobs
from playground.comparison.lanes import LANE_TOOL_NAMES, MEMORY_TOOLS
from playground.events import LANES, EventWriter, LeaseLostError
from playground.jobs import ClaimedTurn
from playground.runtime import Runtime

_log = logging.getLogger(__name__)

LaneName = Literal["stock", "beads"]
STREAM_MODES = ["messages", "updates", "custom"]
#: a tool result is shown up to this many characters (the log keeps what the page shows)
MAX_TOOL_RESULT_CHARS = 2_000
RECURSION_LIMIT = 40
#: how long an attempt cut off by a database outage waits for the database to hand its turn back (past
#: this, the turn's lease lapses and it is reclaimed like a dead worker's)
DATABASE_WAIT_SECONDS = 600.0


async def run_turn(rt: Runtime, turn: ClaimedTurn, owner: uuid.UUID, lanes: Sequence[str] = LANES) -> None:
    """Run the turn's unfinished lanes of `lanes` (both, in the app; one, in a bench that runs an arm
    at a time) and mark the turn done."""
    flush = rt.settings.token_flush_ms / 1000
    try:
        async with EventWriter(rt.pool, turn.id, turn.chat_id, owner, flush) as writer:
            pending = [
                cast(LaneName, lane) for lane in lanes if turn.lane_status(lane) not in ("done", "error")
            ]
            if turn.attempts > rt.settings.max_attempts:
                message = f"This turn was interrupted {turn.attempts - 1} times; giving up on it."
                for lane in pending:
                    await writer.finish_lane(lane, "error", "error", {"message": message})
                await writer.finish_turn()
                return
            try:
                if pending:
                    text = await jobs.user_text(rt.pool, turn.id)
                    async with asyncio.TaskGroup() as tasks:
                        for lane in pending:
                            tasks.create_task(run_lane(rt, writer, turn, lane, text))
                await writer.finish_turn()
            except* psycopg.OperationalError as lost:
                await hand_back_when_reachable(rt, writer, lost)
    except* LeaseLostError:
        _log.info("turn %s was taken over by another worker", turn.id)


async def hand_back_when_reachable(rt: Runtime, writer: EventWriter, cause: BaseException) -> None:
    """Wait for the database, then log why this attempt stopped and put the turn back in the queue."""
    while isinstance(cause, BaseExceptionGroup):
        cause = cause.exceptions[0]
    message = (
        f"The database became unreachable during this turn ({describe_failure(cause)}); "
        "the turn goes on from its last checkpoint now that the database is back."
    )
    deadline = time.monotonic() + DATABASE_WAIT_SECONDS
    while True:
        try:
            await writer.hand_back(message)
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(rt.settings.poll_seconds)


async def lane_agent(rt: Runtime, turn: ClaimedTurn, lane: LaneName) -> tuple[Any, dict[str, Any]]:
    config: dict[str, Any] = {
        "configurable": {"thread_id": turn.thread_id(lane), "session_id": turn.session_id},
        "recursion_limit": RECURSION_LIMIT,
    }
    return (rt.stock_agent if lane == "stock" else rt.beads_agent), config


class LaneCounters:
    """Model calls and tokens of one lane across every attempt at the turn."""

    def __init__(self, calls: int = 0, input_tokens: int = 0, output_tokens: int = 0) -> None:
        self.calls, self.input_tokens, self.output_tokens = calls, input_tokens, output_tokens

    def add(self, usage: dict[str, Any] | None) -> dict[str, int]:
        usage = usage or {}
        self.calls += 1
        self.input_tokens += int(usage.get("input_tokens", 0) or 0)
        self.output_tokens += int(usage.get("output_tokens", 0) or 0)
        return self.totals()

    def totals(self) -> dict[str, int]:
        return {
            "model_calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


# each usage event carries the lane's running totals: the last one logged is where a resumed lane starts
_LOGGED_USAGE = """
SELECT payload FROM playground.events WHERE turn_id = %s AND lane = %s AND kind = 'usage'
 ORDER BY seq DESC LIMIT 1
"""


async def logged_usage(rt: Runtime, writer: EventWriter, turn_id: uuid.UUID, lane: str) -> LaneCounters:
    await writer.flush()
    async with rt.pool.connection() as conn:
        row = await (await conn.execute(_LOGGED_USAGE, (turn_id, lane))).fetchone()
    totals = row["payload"] if row else {}
    return LaneCounters(
        int(totals.get("model_calls", 0)),
        int(totals.get("input_tokens", 0)),
        int(totals.get("output_tokens", 0)),
    )


def turn_messages(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages of this turn: everything after its (only) user message."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return messages[i + 1 :]
    return messages


def committed_text(messages: list[BaseMessage]) -> str:
    return "".join(message_text(m) for m in turn_messages(messages) if isinstance(m, AIMessage))


def final_text(messages: list[BaseMessage]) -> str:
    for message in reversed(turn_messages(messages)):
        if isinstance(message, AIMessage) and not message.tool_calls:
            return message_text(message)
    return ""


def reply_payload(messages: list[BaseMessage], asked: str) -> dict[str, Any]:
    """The lane's reply for its `done` event: the final text when it answers `asked`; otherwise an
    empty text, why it is no answer (memory.rules.conclusions.why_no_answer), and the raw text, which the
    page shows only behind a disclosure."""
    text = final_text(messages)
    this_turn = turn_messages(messages)
    why = why_no_answer(
        text,
        asked=asked,
        tool_results=[
            message_text(m) for m in this_turn if isinstance(m, ToolMessage) and m.name not in MEMORY_TOOLS
        ],
        tool_names=LANE_TOOL_NAMES,
    )
    if why is None:
        return {"text": text}
    return {"text": "", "no_answer": why, "raw": clip(text, MAX_TOOL_RESULT_CHARS)}


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, LangMemConfigurationError):
        return f"LangMem is misconfigured: {clip(str(exc), 300)}"
    if isinstance(exc, BeadsMemoryError):
        return clip(str(exc), 400)
    return f"{type(exc).__name__}: {clip(str(exc), 300) or 'no details'}"


async def run_lane(rt: Runtime, writer: EventWriter, turn: ClaimedTurn, lane: LaneName, text: str) -> None:
    started = time.monotonic()
    writer.emit(lane, "start", {"attempt": turn.attempts, "model": rt.model.label})
    try:
        counters = await logged_usage(rt, writer, turn.id, lane)
        agent, config = await lane_agent(rt, turn, lane)
        state = await agent.aget_state(config)
        # `next` alone is not enough: a step whose writes were saved but whose checkpoint was not (the
        # process or the database went away in between) shows no `next`, only its finished `tasks`,
        # and the nodes after it (the final-answer capture among them) have not run yet
        resumed = bool(state.next or state.tasks)
        if resumed:  # stopped mid-way: what the checkpoint kept stands, the step cut off runs again
            writer.emit(lane, "resume", {"text": committed_text(state.values.get("messages", []))})
            await stream_lane(agent, None, config, writer, lane, counters)
        elif not state.values.get("messages"):  # never started
            start = {"messages": [HumanMessage(text, id=f"{turn.id}-{lane}")]}
            await stream_lane(agent, start, config, writer, lane, counters)
        # (otherwise it finished before the process stopped: only its reply is left to record)
        messages = (await agent.aget_state(config)).values.get("messages", [])
        metrics = {
            **counters.totals(),
            "latency_ms": round((time.monotonic() - started) * 1000),
            "resumed": resumed,
        }
        await writer.finish_lane(lane, "done", "done", {**reply_payload(messages, text), "metrics": metrics})
    except (asyncio.CancelledError, LeaseLostError, psycopg.OperationalError):
        raise  # (a lost database is the turn's interruption, not this lane's failure: see run_turn)
    except (Exception, LangMemConfigurationError) as exc:
        _log.warning("%s lane of turn %s failed: %r", lane, turn.id, exc)
        await writer.finish_lane(lane, "error", "error", {"message": describe_failure(exc)})


def _nested(meta: dict[str, Any]) -> bool:
    # a sub-agent run inside a tool streams under the tool's checkpoint namespace ("tools:…|model:…")
    return "|" in str(meta.get("langgraph_checkpoint_ns") or meta.get("checkpoint_ns") or "")


async def stream_lane(
    agent: Any,
    source: Any,
    config: dict[str, Any],
    writer: EventWriter,
    lane: LaneName,
    counters: LaneCounters,
) -> None:
    """Map LangGraph's stream to events: tokens, tool calls and results, injected facts, usage."""
    async for mode, chunk in agent.astream(source, config, stream_mode=STREAM_MODES, durability="sync"):
        if mode == "messages":
            message, meta = chunk
            if (
                isinstance(message, AIMessageChunk)
                and meta.get("langgraph_node") == "model"
                and not _nested(meta)
            ):
                token = message_text(message)
                if token:
                    writer.emit(lane, "token", {"text": token})
        elif mode == "updates":
            for node, update in chunk.items():
                for message in _update_messages(update):
                    if node == "model" and isinstance(message, AIMessage):
                        for call in message.tool_calls:
                            writer.emit(
                                lane,
                                "tool_call",
                                {"id": call["id"], "name": call["name"], "args": call["args"]},
                            )
                        usage = dict(message.usage_metadata or {})
                        writer.emit(lane, "usage", {**usage_numbers(usage), **counters.add(usage)})
                    elif node == "tools" and isinstance(message, ToolMessage):
                        writer.emit(lane, "tool_result", tool_result(message))
        elif mode == "custom" and isinstance(chunk, dict) and chunk.get("type") == INJECTION_EVENT:
            writer.emit(lane, "injection", injection(chunk))


def _update_messages(update: Any) -> list[Any]:
    parts = update if isinstance(update, list) else [update]
    found: list[Any] = []
    for part in parts:
        if isinstance(part, dict):
            messages = part.get("messages")
            if isinstance(messages, list):
                found.extend(messages)
    return found


def usage_numbers(usage: dict[str, Any]) -> dict[str, int]:
    """This call's own figures (the event's input_tokens / output_tokens are the lane's totals)."""
    return {f"call_{key}": int(usage.get(key, 0) or 0) for key in ("input_tokens", "output_tokens")}


def tool_result(message: ToolMessage) -> dict[str, Any]:
    content = message_text(message)
    if message.name == "search_memory":
        content = search_results(content)
    return {
        "id": message.tool_call_id,
        "name": message.name or "",
        "content": clip(content, MAX_TOOL_RESULT_CHARS),
        "status": message.status,
    }


def search_results(raw: str) -> str:
    """LangMem's search result (a JSON list of store items) as what a reader wants: score and content."""
    try:
        items = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(items, list):
        return raw
    if not items:
        return "no items"
    lines = []
    for item in items:
        if not isinstance(item, dict):
            return raw
        value = item.get("value") or {}
        content = value.get("content", value) if isinstance(value, dict) else value
        score = item.get("score")
        lines.append(f"[{score:.3f}] {content}" if isinstance(score, (int, float)) else f"{content}")
    return f"{len(items)} item{'s' * (len(items) != 1)}: " + " | ".join(lines)


def injection(event: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "id",
        "short_id",
        "text",
        "distance",
        "score",
        "kind",
        "source",
        "agent_id",
        "demoted",
        "resolved_from",
        "flags",
        "marks",
    )
    facts = event.get("facts", [])
    return {
        "query": event.get("query"),
        "not_in_memory": bool(event.get("not_in_memory")),
        "tokens": event.get("tokens", 0),
        "chars": event.get("chars", 0),
        "block": event.get("block", ""),  # the text the model read, exactly
        "facts": [{k: fact.get(k) for k in keep} for fact in facts],
        "dropped": len(event.get("dropped", [])),
        "agent_id": event.get("agent_id"),
        # the pinned tier and the call's assembly (tiers, tokens, kept / dropped / why, the gate)
        "pinned": event.get("pinned", []),
        "assembly": event.get("assembly"),
        "capture": event.get("capture"),  # eager or evict, and what this call captured at eviction
        "window_messages": event.get("window_messages"),
        "history_messages": event.get("history_messages"),
    }
