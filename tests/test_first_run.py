"""A developer's first runs: a model that cannot bind tools is refused before anything is stored, a
rerun of the same input stores nothing new, and the injection event shows the block as the model
read it. On the public test double (memory.testing) and real Postgres."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import memory.testing
from memory import BeadsMemoryMiddleware, ModelCannotBindToolsError
from memory.graph.store import FactStore
from memory.scripted import ScriptedChatModel as PlaygroundsScriptedModel
from memory.testing import ScriptedChatModel, calls, injections, throwaway_database, tool_call

SESSION = "first-run"
BUDGET = "Our budget is $120k per year."


def config(thread: str = "t-1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "session_id": SESSION}}


def said(text: str = BUDGET) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def stored(store: FactStore) -> list[str]:
    return sorted(f.body for f in store.audit.session_facts(SESSION))


@tool
def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city} is sunny."


def test_the_test_double_is_the_scripted_model_the_project_runs_on() -> None:
    assert ScriptedChatModel is PlaygroundsScriptedModel
    assert {"ScriptedChatModel", "calls", "tool_call", "injections", "throwaway_database"} <= set(
        memory.testing.__all__
    )


def test_a_model_that_cannot_bind_the_memory_tools_is_refused_naming_both_ways_out(store: FactStore) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("OK.")]))
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    with pytest.raises(ModelCannotBindToolsError) as refused:
        agent.invoke(said(), config())
    assert str(refused.value) == (
        "GenericFakeChatModel cannot bind tools (it does not implement bind_tools), and "
        "BeadsMemoryMiddleware offers it the memory tools (remember_fact, recall_from_subagents, pin_fact). "
        "Either build the middleware with BeadsMemoryMiddleware(store, bind_tools=False): capture, "
        "corrections and recall work without them; or use a chat model that supports tool calling "
        "(in tests, memory.testing.ScriptedChatModel, which binds tools and records its prompts). "
        "Nothing was captured."
    )
    assert stored(store) == []  # refused before capture
    # the first way out works as said
    model = GenericFakeChatModel(messages=iter([AIMessage("Noted.")]))
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store, bind_tools=False)])
    agent.invoke(said(), config())
    assert BUDGET in stored(store)


def test_a_model_that_cannot_bind_the_agents_own_tools_is_told_so(store: FactStore) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("OK.")]))
    agent = create_agent(model, tools=[lookup], middleware=[BeadsMemoryMiddleware(store)])
    with pytest.raises(ModelCannotBindToolsError) as refused:
        agent.invoke(said(), config())
    assert str(refused.value) == (
        "GenericFakeChatModel cannot bind tools (it does not implement bind_tools), and the agent offers "
        "it its own tools (lookup), and BeadsMemoryMiddleware the memory tools (remember_fact, "
        "recall_from_subagents, pin_fact). Either use a chat model that supports tool calling (in tests, "
        "memory.testing.ScriptedChatModel, which binds tools and records its prompts); or create the "
        "agent with tools=[] and the middleware with bind_tools=False. Nothing was captured."
    )
    assert stored(store) == []


async def test_the_async_path_refuses_too(store: FactStore) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("OK.")]))
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    with pytest.raises(ModelCannotBindToolsError):
        await agent.ainvoke(said(), config())
    assert stored(store) == []


class FailingModel(ScriptedChatModel):
    """Fails its first `failures` calls, as a model server that is down does."""

    failures: int = 1

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("model server unreachable")
        return super()._next(messages)


def test_a_rerun_of_the_same_input_after_a_model_error_writes_nothing_new(store: FactStore) -> None:
    model = FailingModel(replies=["Noted: $120k a year."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    with pytest.raises(ConnectionError):
        agent.invoke(said(), config())
    after_failure = store.audit.session_facts(SESSION)
    assert [f.body for f in after_failure] == [BUDGET]  # the message was captured before the call
    agent.invoke(said(), config())  # the user runs it again: LangGraph gives the message a new id
    facts = store.audit.session_facts(SESSION)
    assert [f.body for f in facts if f.kind.value == "user_input"] == [BUDGET]  # not stored twice
    assert {f.id for f in after_failure} <= {f.id for f in facts}


def test_a_client_that_resends_the_whole_conversation_stores_each_message_once(store: FactStore) -> None:
    model = ScriptedChatModel(replies=["Noted.", "Kubernetes, noted."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store, bind_tools=False)])
    first = agent.invoke(said(), config())
    history = [*first["messages"], HumanMessage("We deploy on Kubernetes.")]
    # a stateless client: the same thread, the whole history again, every message with a fresh id
    agent.invoke({"messages": [(m.type, m.text) for m in history]}, config())
    bodies = [f.body for f in store.audit.session_facts(SESSION) if f.kind.value == "user_input"]
    assert sorted(bodies) == [BUDGET, "We deploy on Kubernetes."]


def test_a_message_said_again_later_in_a_thread_is_a_new_capture(store: FactStore) -> None:
    # the key is the message's place in its thread, so saying a value again (undoing a correction,
    # say) is captured, not mistaken for a replay
    model = ScriptedChatModel()
    checkpointed = create_agent(
        model,
        tools=[],
        middleware=[BeadsMemoryMiddleware(store, bind_tools=False)],
        checkpointer=InMemorySaver(),
    )
    checkpointed.invoke(said("Our budget is $100k."), config())
    checkpointed.invoke(said("Correction: our budget is now $120k."), config())
    checkpointed.invoke(said("Our budget is $100k."), config())
    facts = [f for f in store.audit.session_facts(SESSION) if f.kind.value == "user_input"]
    assert len(facts) == 3
    [current] = [f for f in facts if f.status.value == "active"]
    assert current.body == "Our budget is $100k." and current.thread_id == "t-1"


def test_a_checkpoint_replay_writes_nothing_new(store: FactStore) -> None:
    model = FailingModel(replies=["Noted."])
    agent = create_agent(
        model, tools=[], middleware=[BeadsMemoryMiddleware(store)], checkpointer=InMemorySaver()
    )
    with pytest.raises(ConnectionError):
        agent.invoke(said(), config())
    before = {f.id for f in store.audit.session_facts(SESSION)}
    agent.invoke(None, config())  # resume the failed step from its checkpoint
    facts = store.audit.session_facts(SESSION)
    assert [f.body for f in facts if f.kind.value == "user_input"] == [BUDGET]
    assert before <= {f.id for f in facts}


def test_the_injection_event_carries_the_block_the_model_read(store: FactStore) -> None:
    model = ScriptedChatModel()
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    agent.invoke(said(), config("t-1"))
    [event] = injections(agent, said("What is our budget?"), config("t-2"))
    assert event["block"] and BUDGET in event["block"]
    assert event["block"] in model.system_prompts[-1]  # exactly the text that reached the model
    assert BUDGET in [f["text"] for f in event["facts"]]


def test_tool_calls_run_through_the_double(store: FactStore) -> None:
    model = ScriptedChatModel(replies=[calls(tool_call("lookup", city="Lisbon")), "It is sunny in Lisbon."])
    agent = create_agent(model, tools=[lookup], middleware=[BeadsMemoryMiddleware(store)])
    out = agent.invoke(said("What is the weather in Lisbon?"), config())
    assert out["messages"][-1].text == "It is sunny in Lisbon."
    assert "lookup" in model.bound_tools and "remember_fact" in model.bound_tools
    assert len(model.prompts) == 2 and model.prompts[1][-1].text == "Lisbon is sunny."


def test_a_throwaway_database_is_empty_then_gone(pg_server_url: str) -> None:
    with throwaway_database(pg_server_url) as url:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'beads'").fetchone()
            assert row == (0,)
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(pg_server_url) as admin:
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None
