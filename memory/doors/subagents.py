"""Delegation with enforced rollups: `make_subagent_tool` forks a namespace per task, runs a sub-agent
with its own memory there, and guarantees the parent gets exactly one summary back.

In evict capture mode the supervisor's middleware captures its pending context at the fork (the
sub-agent starts from the task alone), and at the merge the sub-agent's remaining messages are
captured before its thread is dropped. A sub-agent that never calls conclude_task is re-prompted
once; if it still does not conclude, or if it crashes, the wrapper writes a "did not complete" fact
(source fallback_conclude) so a failed delegation is visible in memory instead of silently returning
nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any, TypedDict, Unpack

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from memory.context.block import clip
from memory.doors.middleware import FORK_TOOL_METADATA, BeadsMemoryMiddleware, CaptureMode
from memory.doors.scope import NAMESPACE_KEY, SessionScope
from memory.graph.store import FactStore
from memory.model import Fact, Kind, Namespace, Source

_log = logging.getLogger(__name__)

SUBAGENT_PROMPT = (
    "You are a research sub-agent. Work on the task you are given with the tools you have. "
    "When you are done, call conclude_task with a short summary of what you found, then answer."
)
REPROMPT = "You have not called conclude_task. Call it now with a summary of what you found."


class SubagentOptions(TypedDict, total=False):
    """How `make_subagent_tool` runs each sub-agent: `run_subagent`'s keyword arguments."""

    system_prompt: str
    max_reprompts: int
    window: int
    capture: CaptureMode
    memory_tools: bool


def _fallback(store: FactStore, child: Namespace, researcher: str, reason: str) -> Fact:
    parent = store.namespace(child.parent_id) if child.parent_id else child
    fact = store.remember(
        parent,
        f"Sub-agent {researcher} did not complete its task: {reason}",
        kind=Kind.SUMMARY,
        source=Source.FALLBACK_CONCLUDE,
        agent_id=researcher,
        source_key=f"fallback:{child.id}",
        metadata={"from_namespace": str(child.id)},
    )
    store.link_rollup(fact, child.id)
    return fact


def merge_capture(
    store: FactStore,
    child: Namespace,
    middleware: BeadsMemoryMiddleware,
    state: dict[str, Any] | None,
    summary: Fact | None,
    crashed: bool = False,
) -> int:
    """The merge, in evict mode: the sub-agent's thread is dropped here. Its end-of-thread hook has
    captured what was left, after conclude_task linked its rollup (`summary`, None when a crash
    left it unknown), so the rollup is linked again to every raw fact; a crashed sub-agent never
    reached that hook, so its last state is captured here. Returns the messages captured."""
    if middleware.capture != "evict":
        return 0  # eager capture took everything before each model call
    captured = middleware.capture_pending(state, child) if crashed and state else []
    if summary is None:
        summary = store.rollup_from(child)
    if summary is not None:
        store.link_rollup(summary, child.id)
    return len(captured)


def run_subagent(
    store: FactStore,
    parent: Namespace,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    task: str,
    researcher: str,
    *,
    system_prompt: str = SUBAGENT_PROMPT,
    max_reprompts: int = 1,
    window: int = 10,
    capture: CaptureMode = "eager",
    memory_tools: bool = True,
) -> Fact:
    """Run one delegated task in a fresh child namespace; returns the summary fact in `parent`.

    With `capture="evict"` the sub-agent captures where context is lost: when messages leave its
    view, and at merge (here), also when it crashes (from the last state it reached).
    `memory_tools=False` offers it conclude_task alone (no remember_fact), as a lane whose model is
    offered no memory tools wants for its sub-agents too."""
    child = store.fork(parent, researcher, agent_id=researcher)
    middleware = BeadsMemoryMiddleware(
        store,
        child,
        agent_id=researcher,
        role="subagent",
        window=window,
        acting_on_behalf_of=parent.agent_id,
        capture=capture,
        bind_tools=memory_tools,
    )
    agent = create_agent(model, tools=list(tools), system_prompt=system_prompt, middleware=[middleware])
    messages: list[AnyMessage | dict[str, Any]] = [HumanMessage(task)]  # what the agent's input takes
    last_answer = ""
    state: dict[str, Any] | None = None
    try:
        for attempt in range(max_reprompts + 1):
            # streamed values, not invoke: on a crash the last state reached is still in hand
            # the fork's own namespace, named outright: the sub-agent inherits the supervisor's
            # `configurable`, whose session_id alone would resolve to the supervisor's root
            config: RunnableConfig = {"configurable": {NAMESPACE_KEY: str(child.id)}}
            for values in agent.stream({"messages": messages}, config, stream_mode="values"):
                state = values
            messages = (state or {}).get("messages", messages)
            final = messages[-1]
            last_answer = final.text if isinstance(final, AIMessage) else ""
            summary = store.rollup_from(child)
            if summary is not None:
                merge_capture(store, child, middleware, state, summary)
                return summary
            if attempt < max_reprompts:
                messages = [*messages, HumanMessage(REPROMPT)]
    except Exception as exc:  # any failure of the sub-agent is the parent's fact, not the parent's crash
        _log.warning("sub-agent %s failed: %r", researcher, exc)
        with contextlib.suppress(Exception):  # a broken store must not hide the fallback below
            merge_capture(store, child, middleware, state, None, crashed=True)
        return _fallback(
            store, child, researcher, f"it failed with {type(exc).__name__}: {clip(str(exc), 200)}"
        )
    # no merge capture here: no attempt concluded, and a sub-agent that did not crash left nothing
    reason = "it never called conclude_task"
    if last_answer.strip():
        reason += f"; its last answer was: {clip(last_answer, 400)}"
    return _fallback(store, child, researcher, reason)


def make_subagent_tool(
    store: FactStore,
    parent: Namespace | None,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    name: str = "delegate_research",
    description: str = (
        "Delegate a research task to a sub-agent named `researcher` (e.g. researcher_qdrant). It works in its "
        "own memory and returns its summary; read its raw findings later with recall_from_subagents."
    ),
    **kwargs: Unpack[SubagentOptions],
) -> BaseTool:
    """A tool the orchestrator calls to fork a sub-agent for one task. The fork is made under the
    calling run's namespace (memory.doors.scope: its `session_id`), `parent` being only the default, so one
    compiled orchestrator serves every session."""
    scope = SessionScope(store, parent)

    def delegate(task: str, researcher: str = "researcher") -> str:
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in researcher)[:40] or "researcher"
        summary = run_subagent(store, scope.resolve(), model, tools, task, safe, **kwargs)
        return f"[{summary.short_id}] {summary.body}"

    # the supervisor's middleware sees this mark and, in evict mode, captures its context at the fork
    return StructuredTool.from_function(
        delegate, name=name, description=description, metadata={FORK_TOOL_METADATA: True}
    )
