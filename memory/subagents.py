"""Delegation with enforced rollups: `make_subagent_tool` forks a namespace per task, runs a sub-agent
with its own memory there, and guarantees the parent gets exactly one summary back.

A sub-agent that never calls conclude_task is re-prompted once; if it still does not conclude, or
if it crashes, the wrapper writes a "did not complete" fact (source fallback_conclude) so a failed
delegation is visible in memory instead of silently returning nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool

from memory.block import clip
from memory.middleware import BeadsMemoryMiddleware
from memory.model import Fact, Kind, Namespace, Relation, Source
from memory.store import FactStore

_log = logging.getLogger(__name__)

SUBAGENT_PROMPT = (
    "You are a research sub-agent. Work on the task you are given with the tools you have. "
    "When you are done, call conclude_task with a short summary of what you found, then answer."
)
REPROMPT = "You have not called conclude_task. Call it now with a summary of what you found."


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
    raw = [f.id for f in store.facts_in_namespace(child.id) if f.kind is not Kind.DIRECTIVE]
    store.relate_many(fact, Relation.ROLLUP_OF, raw)
    return fact


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
) -> Fact:
    """Run one delegated task in a fresh child namespace; returns the summary fact in `parent`."""
    child = store.fork(parent, researcher, agent_id=researcher)
    middleware = BeadsMemoryMiddleware(
        store, child, agent_id=researcher, role="subagent", window=window, acting_on_behalf_of=parent.agent_id
    )
    agent = create_agent(model, tools=list(tools), system_prompt=system_prompt, middleware=[middleware])
    messages: list[Any] = [HumanMessage(task)]
    last_answer = ""
    try:
        for attempt in range(max_reprompts + 1):
            state = agent.invoke({"messages": messages})
            messages = state["messages"]
            final = messages[-1]
            last_answer = final.text if isinstance(final, AIMessage) else ""
            summary = store.rollup_from(child)
            if summary is not None:
                return summary
            if attempt < max_reprompts:
                messages = [*messages, HumanMessage(REPROMPT)]
    except Exception as exc:  # any failure of the sub-agent is the parent's fact, not the parent's crash
        _log.warning("sub-agent %s failed: %r", researcher, exc)
        return _fallback(
            store, child, researcher, f"it failed with {type(exc).__name__}: {clip(str(exc), 200)}"
        )
    reason = "it never called conclude_task"
    if last_answer.strip():
        reason += f"; its last answer was: {clip(last_answer, 400)}"
    return _fallback(store, child, researcher, reason)


def make_subagent_tool(
    store: FactStore,
    parent: Namespace,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    name: str = "delegate_research",
    description: str = (
        "Delegate a research task to a sub-agent named `researcher` (e.g. researcher_qdrant). It works in its "
        "own memory and returns its summary; read its raw findings later with recall_from_subagents."
    ),
    **kwargs: Any,
) -> BaseTool:
    """A tool the orchestrator calls to fork a sub-agent for one task."""

    def delegate(task: str, researcher: str = "researcher") -> str:
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in researcher)[:40] or "researcher"
        summary = run_subagent(store, parent, model, tools, task, safe, **kwargs)
        return f"[{summary.short_id}] {summary.body}"

    return StructuredTool.from_function(delegate, name=name, description=description)
