"""One compiled agent for every session: the middleware, its tools and the sub-agent tool resolve the
session per call (memory.doors.scope), from the run's context or configurable, against real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from memory import BeadsMemoryMiddleware, FactStore, Kind, Source, make_subagent_tool
from memory.doors.middleware import INJECTION_EVENT
from memory.doors.scope import NAMESPACE_KEY, SessionScope
from memory.errors import SessionNotGivenError
from memory.scripted import ScriptedChatModel, calls, tool_call


def echo_memory(messages: list[BaseMessage]) -> str:
    """A reply rule: say which memory the model was shown (the system prompt's Memory section)."""
    system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    text = str(system.content) if system is not None else ""
    return "Memory shown: " + (text.split("## Memory", 1)[1] if "## Memory" in text else "none")


def thread(session: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": str(uuid.uuid4())}
    if session is not None:
        configurable["session_id"] = session
    return {"configurable": configurable}


def reply_of(out: dict[str, Any]) -> str:
    return str(out["messages"][-1].content)


def one_agent(store: FactStore, model: ScriptedChatModel, **kwargs: Any) -> tuple[Any, BeadsMemoryMiddleware]:
    middleware = BeadsMemoryMiddleware(store, **kwargs)
    return create_agent(model, middleware=[middleware]), middleware


async def test_two_sessions_through_one_compiled_agent_at_once_see_only_their_own(store: FactStore) -> None:
    agent, _ = one_agent(store, ScriptedChatModel(fallback=echo_memory))
    said = {"alice": "Our budget is $100k per year.", "bob": "Our budget is $7k per month."}

    async def say(session: str, text: str) -> tuple[str, list[dict[str, Any]]]:
        events: list[dict[str, Any]] = []
        last: dict[str, Any] = {}
        async for mode, chunk in agent.astream(
            {"messages": [HumanMessage(text)]}, thread(session), stream_mode=["custom", "values"]
        ):
            if mode == "custom" and chunk.get("type") == INJECTION_EVENT:
                events.append(chunk)
            elif mode == "values":
                last = chunk
        return reply_of(last), events

    await asyncio.gather(*(say(session, text) for session, text in said.items()))
    asked = await asyncio.gather(*(say(session, "What is our budget?") for session in said))

    for (session, text), (reply, events) in zip(said.items(), asked, strict=True):
        other = next(t for s, t in said.items() if s != session)
        assert text in reply and other not in reply, (session, reply)
        assert {e["namespace_id"] for e in events} == {str(store.root(session).id)}
        bodies = {f.body for f in store.audit.session_facts(session)}
        assert text in bodies and other not in bodies
    assert {n.session_id for s in said for n in store.session_namespaces(s)} == set(said)


def test_the_runtime_context_names_the_session_too(store: FactStore) -> None:
    agent, _ = one_agent(store, ScriptedChatModel(fallback=echo_memory))
    agent.invoke(
        {"messages": [HumanMessage("My cat is called Mochi.")]}, thread(), context={"session_id": "carol"}
    )
    out = agent.invoke(
        {"messages": [HumanMessage("What is my cat called?")]}, thread(), context={"session_id": "carol"}
    )
    assert "Mochi" in reply_of(out)
    assert "Mochi" not in reply_of(
        agent.invoke({"messages": [HumanMessage("What is my cat called?")]}, thread("dave"))
    )


def test_the_constructor_namespace_is_the_default_and_a_run_with_none_is_refused(store: FactStore) -> None:
    default = store.root("default-session")
    agent, _ = one_agent(store, ScriptedChatModel(fallback="ok"), namespace=default)
    agent.invoke({"messages": [HumanMessage("The office is in Lyon.")]}, thread())
    assert "The office is in Lyon." in {f.body for f in store.audit.session_facts("default-session")}
    # a run that names its session works there, not in the default
    agent.invoke({"messages": [HumanMessage("The office is in Porto.")]}, thread("elsewhere"))
    assert "The office is in Porto." not in {f.body for f in store.audit.session_facts("default-session")}

    bare, _ = one_agent(store, ScriptedChatModel(fallback="ok"))
    with pytest.raises(SessionNotGivenError, match="session_id"):
        bare.invoke({"messages": [HumanMessage("hello")]}, thread())


def test_memory_tools_write_into_the_calling_runs_session(store: FactStore) -> None:
    model = ScriptedChatModel(
        replies=[calls(tool_call("remember_fact", fact="The launch is on 3 March.")), "Noted."],
        fallback="ok",
    )
    middleware = BeadsMemoryMiddleware(store)
    agent = create_agent(model, tools=[], middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Remember the launch date.")]}, thread("frank"))
    [remembered] = [f for f in store.audit.session_facts("frank") if f.source is Source.REMEMBER_TOOL]
    assert (
        remembered.body == "The launch is on 3 March." and remembered.namespace_id == store.root("frank").id
    )
    # the tool resolves per call: outside a run with no default it answers with the reason
    remember = next(t for t in middleware.tools if t.name == "remember_fact")
    assert "session_id" in remember.invoke({"fact": "x"})


def test_one_sub_agent_tool_forks_under_the_calling_runs_session(store: FactStore) -> None:
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("delegate_research", task="Is Qdrant self-hostable?", researcher="r_qdrant")),
            calls(tool_call("conclude_task", summary="Qdrant can be self-hosted.")),
            "Done.",
            "It can.",
        ],
        fallback="ok",
    )
    delegate = make_subagent_tool(store, None, model, [])
    agent = create_agent(model, tools=[delegate], middleware=[BeadsMemoryMiddleware(store)])
    agent.invoke({"messages": [HumanMessage("Research Qdrant.")]}, thread("grace"))

    root = store.root("grace")
    [child] = store.children(root.id)
    assert child.session_id == "grace" and child.agent_id == "r_qdrant"
    [summary] = [f for f in store.audit.facts_in_namespace(root.id) if f.kind is Kind.SUMMARY]
    assert summary.body == "Qdrant can be self-hosted."
    # the sub-agent captured its task in its fork (it named the fork outright), not in the root
    assert "Is Qdrant self-hostable?" in {f.body for f in store.audit.facts_in_namespace(child.id)}
    assert "Is Qdrant self-hostable?" not in {f.body for f in store.audit.facts_in_namespace(root.id)}


def test_a_scope_resolves_an_explicit_namespace_before_the_session(store: FactStore) -> None:
    root = store.root("henry")
    child = store.fork(root, "a", "researcher_a")
    scope = SessionScope(store)
    assert scope.resolve({NAMESPACE_KEY: str(child.id), "session_id": "henry"}).id == child.id
    assert scope.resolve({"session_id": "henry"}).id == root.id
    # a default in the named session is kept (a fork's middleware keeps its fork)
    assert SessionScope(store, child).resolve({"session_id": "henry"}).id == child.id
    assert SessionScope(store, child).resolve({"session_id": "ivy"}).id == store.root("ivy").id
    with pytest.raises(SessionNotGivenError):
        scope.resolve({})
