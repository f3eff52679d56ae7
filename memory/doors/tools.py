"""The tools the middleware binds: remember_fact (every agent), conclude_task (forked sub-agents),
recall_from_subagents and pin_fact (orchestrators). Each returns plain text the model can read; refusals are
answers, not exceptions, so one bad call does not abort the turn."""

from __future__ import annotations

from typing import Literal

from langchain_core.tools import BaseTool, StructuredTool

from memory.context.block import clip
from memory.doors.scope import SessionScope, as_scope
from memory.errors import BeadsMemoryError
from memory.graph.store import FactStore
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Namespace, Relation, Source, Status
from memory.rules.conclusions import is_bare_name, is_failure_notice, without_lead_in

MEMORY_TOOL_NAMES = frozenset({"remember_fact", "conclude_task", "recall_from_subagents", "pin_fact"})


def _where(scope: SessionScope, agent_id: str | None) -> tuple[Namespace, str]:
    """The namespace of this call and the agent acting in it (the namespace's own agent by default)."""
    ns = scope.resolve()
    return ns, agent_id or ns.agent_id


def _remember_tool(store: FactStore, scope: SessionScope, agent_id: str | None) -> BaseTool:
    def remember_fact(
        fact: str,
        supersedes: str | None = None,
        contradicts: str | None = None,
        relates_to: str | None = None,
    ) -> str:
        """Record one durable fact or conclusion in memory. To correct a remembered fact, pass its id
        (the 8-character id shown in brackets in the Memory section) as `supersedes`; use
        `contradicts` or `relates_to` to link it to another fact."""
        try:
            ns, agent = _where(scope, agent_id)
            if is_bare_name(fact):
                return (
                    f"Not stored: {fact.strip()!r} is a name, not a fact. "
                    "Say it as a sentence, e.g. 'The launch deadline is April 2.'"
                )
            if is_failure_notice(fact):
                return "Not stored: a tool's failure is not a fact to remember."
            stored = store.remember(
                ns, fact, kind=Kind.CONCLUSION, source=Source.REMEMBER_TOOL, agent_id=agent
            )
        except (BeadsMemoryError, ValueError) as exc:
            return f"Not stored: {exc}"
        notes = [f"Stored fact [{stored.short_id}]."]
        for target, relation in (
            (supersedes, Relation.SUPERSEDES),
            (contradicts, Relation.CONTRADICTS),
            (relates_to, Relation.RELATES_TO),
        ):
            if not target:
                continue
            try:
                other = store.get(target, session_id=ns.session_id)
                if relation is Relation.SUPERSEDES:
                    store.supersede(stored, other)
                    notes.append(f"It replaces [{other.short_id}].")
                else:
                    store.relate(stored, relation, other)
                    notes.append(f"Linked: {relation.value} [{other.short_id}].")
            except BeadsMemoryError as exc:
                notes.append(f"Could not link to {target!r}: {exc}")
        return " ".join(notes)

    return StructuredTool.from_function(remember_fact)


def _conclude_tool(store: FactStore, scope: SessionScope, agent_id: str | None) -> BaseTool:
    def conclude_task(summary: str) -> str:
        """Finish your delegated task: write the summary of what you found for the agent that
        delegated it. Required before you give your final answer; call it once."""
        try:
            ns, agent = _where(scope, agent_id)
        except BeadsMemoryError as exc:
            return f"Not concluded: {exc}"
        if ns.parent_id is None:
            return "conclude_task is only for delegated sub-agents."
        if store.rollup_from(ns) is not None:
            return "Already concluded; give your final answer now."
        if is_bare_name(summary):
            return (
                f"Not concluded: {summary.strip()!r} is a name, not a finding. Say what you found in a "
                "sentence, or that you found nothing."
            )
        if is_failure_notice(summary):
            return (
                "Not concluded: a tool's failure is not a finding. Say what you found from what you "
                "know, or that you could not find anything."
            )
        parent = store.namespace(ns.parent_id)
        try:
            rollup = store.remember(
                parent,
                without_lead_in(summary),
                kind=Kind.SUMMARY,
                source=Source.CONCLUDE_TASK,
                agent_id=agent,
                source_key=f"conclude:{ns.id}",
                metadata={"from_namespace": str(ns.id)},
            )
        except (BeadsMemoryError, ValueError) as exc:
            return f"Not concluded: {exc}"
        linked = store.link_rollup(rollup, ns.id)
        return f"Concluded: summary [{rollup.short_id}] recorded for the delegating agent, linked to {linked} facts."

    return StructuredTool.from_function(conclude_task)


def _recall_tool(store: FactStore, scope: SessionScope) -> BaseTool:
    def recall_from_subagents(researcher: str, limit: int = 20) -> str:
        """Read what a named sub-agent you delegated to actually recorded (not just its summary)."""
        try:
            ns = scope.resolve()
        except BeadsMemoryError as exc:
            return f"Could not read: {exc}"
        facts = [
            f for f in store.audit.subtree_facts(ns.id, agent_id=researcher) if f.status is Status.ACTIVE
        ]
        if not facts:
            known = sorted({child.agent_id for child in store.children(ns.id)})
            return f"No sub-agent named {researcher!r} recorded anything. Known sub-agents: {', '.join(known) or 'none'}."
        lines = [
            f"- [{f.short_id}] ({f.kind.value}) {clip(f.body)}" for f in facts[-max(1, min(limit, 50)) :]
        ]
        return f"{researcher} recorded {len(facts)} facts:\n" + "\n".join(lines)

    return StructuredTool.from_function(recall_from_subagents)


def pin_refusal(fact: Fact, ns: Namespace) -> str | None:
    """Why the agent may not pin `fact`, or None: only the user's own words, said in this conversation
    (not a tool result, a web page, a sub-agent's finding or the agent's own conclusion)."""
    if fact.source in UNTRUSTED_SOURCES:
        return f"it came from {fact.source.value}: tool results and web pages are never pinned"
    if fact.source is not Source.PASSIVE_CAPTURE or fact.kind not in (Kind.USER_INPUT, Kind.DIRECTIVE):
        return "only what the user said can be pinned by the agent (the user can pin anything else)"
    if fact.namespace_id != ns.id:
        return "it was not said in this conversation's memory"
    return None


def _pin_tool(store: FactStore, scope: SessionScope, agent_id: str | None) -> BaseTool:
    def pin_fact(fact_id: str, unpin: bool = False) -> str:
        """Pin a standing rule or profile fact the user stated, so it is in every prompt from now on
        (pass the 8-character id shown in brackets). Use it when the user asks you to always keep
        something in mind. With unpin=true, stop pinning it."""
        try:
            ns, agent = _where(scope, agent_id)
            fact = store.get(fact_id, session_id=ns.session_id)
            if unpin:
                removed = store.unpin(fact)
                return f"Unpinned [{fact.short_id}]." if removed else f"[{fact.short_id}] was not pinned."
            current = store.get(fact.head_id)
            refusal = pin_refusal(current, ns)
            if refusal:
                return f"Not pinned: {refusal}."
            pinned = store.pin(current, pinned_by=agent)
        except BeadsMemoryError as exc:
            return f"Not pinned: {exc}"
        return f"Pinned [{pinned.short_id}]: it is in every prompt from now on."

    return StructuredTool.from_function(pin_fact)


def memory_tools(
    store: FactStore,
    where: SessionScope | Namespace | None,
    agent_id: str | None,
    role: Literal["orchestrator", "subagent"],
    *,
    optional: bool = True,
) -> list[BaseTool]:
    """The memory tools of one agent. `where` is resolved on every call (memory.doors.scope): a namespace is
    only the default, used when the run names no session; `agent_id` None acts as the namespace's agent.
    `optional=False`: only what the agent's role requires, a sub-agent's conclude_task."""
    scope = as_scope(store, where)
    if not optional:
        return [_conclude_tool(store, scope, agent_id)] if role == "subagent" else []
    tools = [_remember_tool(store, scope, agent_id)]
    if role == "subagent":
        tools.append(_conclude_tool(store, scope, agent_id))
    else:
        # pinning changes every later prompt of the session: the supervisor's decision, not a fork's
        tools.extend([_recall_tool(store, scope), _pin_tool(store, scope, agent_id)])
    return tools
