"""The middleware's context assembly against real Postgres: the injection gate, clearing old tool
output, the model's context limit, and capture at eviction (window, fork, merge, thread end)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from agent_helpers import injection_events, system_text
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from memory.doors.middleware import INJECTION_EVENT, BeadsMemoryMiddleware
from memory.doors.subagents import make_subagent_tool
from memory.graph.store import FactStore
from memory.model import Relation, Source
from memory.scripted import ScriptedChatModel, calls, tool_call

BUDGET = "Our budget is $100k per year."
ASK = "What is our budget? Check a few sources."


def page(i: int) -> str:
    return f"Source {i} says " + " ".join(f"detail{i}w{j}" for j in range(60)) + "."


def lookup_tool(
    store: FactStore | None = None, session: str = "s", seen: list[int] | None = None
) -> BaseTool:
    def lookup(item: str) -> str:
        """Look something up."""
        if store is not None and seen is not None:  # how many facts were stored when the tool ran
            seen.append(len(store.audit.session_facts(session)))
        return page(int(item))

    return StructuredTool.from_function(lookup)


def lookups(n: int, answer: str = "Done.") -> list[Any]:
    return [calls(tool_call("lookup", item=str(i))) for i in range(n)] + [answer]


def agent_with(store: FactStore, model: ScriptedChatModel, tools: list[BaseTool], **options: Any) -> Any:
    middleware = BeadsMemoryMiddleware(store, store.root("s"), **options)
    return create_agent(model, tools=tools, middleware=[middleware])


# -- the gate -------------------------------------------------------------------------------------


def test_gated_injection_waits_until_the_history_no_longer_fits_the_window(store: FactStore) -> None:
    store.capture_message(store.root("s"), BUDGET, message_id="earlier")
    model = ScriptedChatModel(replies=lookups(8))
    agent = agent_with(store, model, [lookup_tool()], injection="gated")  # a 10-message window
    events = injection_events(agent, ASK)
    assert len(events) == 9
    first, last = events[0], events[-1]
    # one message fits the window: nothing recalled, no Memory section, the decision explained
    assert first["gate"]["inject"] is False and "fits the window" in first["gate"]["reason"]
    assert first["facts"] == [] and first["query"] == ASK
    assert "## Memory" not in system_text(model.prompts[0])
    # 17 messages do not: the window kept 9 of them and memory fills the gap
    assert last["history_messages"] == 17 and last["gate"]["inject"] is True
    assert last["gate"]["history_tokens"] > last["gate"]["window_tokens"]
    assert any("$100k" in f["text"] for f in last["facts"])
    assert "$100k" in system_text(model.prompts[-1])
    flips = [e["gate"]["inject"] for e in events]
    assert flips == sorted(flips)  # off while it fits, then on


def test_gated_on_a_token_window_and_the_default_always(store: FactStore) -> None:
    store.capture_message(store.root("s"), BUDGET, message_id="earlier")
    model = ScriptedChatModel(replies=lookups(2))
    agent = agent_with(store, model, [lookup_tool()], injection="gated", window_tokens=100_000)
    events = injection_events(agent, ASK)
    assert [e["gate"]["inject"] for e in events] == [False, False, False]
    assert all(e["gate"]["window_tokens"] == 100_000 for e in events)

    model = ScriptedChatModel(replies=["ok"])
    [event] = injection_events(agent_with(store, model, []), ASK)
    assert event["gate"] == {
        "mode": "always",
        "inject": True,
        "reason": "injection is always on (mode always)",
        "history_tokens": event["gate"]["history_tokens"],
        "window_tokens": event["gate"]["window_tokens"],
    }
    assert "$100k" in system_text(model.prompts[0])
    with pytest.raises(ValueError):
        BeadsMemoryMiddleware(store, store.root("s"), injection="sometimes")  # type: ignore[arg-type]


# -- clearing old tool output ---------------------------------------------------------------------


def assert_pairing_valid(prompt: list[BaseMessage]) -> None:
    """Every tool result the model reads follows the call that asked for it."""
    called: set[str] = set()
    for message in prompt:
        if isinstance(message, AIMessage):
            called |= {c["id"] for c in message.tool_calls}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in called, f"orphaned tool result {message.tool_call_id}"


def test_old_tool_output_is_cleared_to_a_placeholder_before_anything_is_dropped(store: FactStore) -> None:
    model = ScriptedChatModel(replies=lookups(5))
    agent = agent_with(store, model, [lookup_tool()], window=3, window_tokens=800)
    events = injection_events(agent, "Collect five sources.")
    last_prompt = model.prompts[-1]
    assert_pairing_valid(last_prompt)
    tools = [m for m in last_prompt if isinstance(m, ToolMessage)]
    cleared = [m for m in tools if "output cleared from this view" in str(m.content)]
    verbatim = [m for m in tools if "detail" in str(m.content)]
    assert len(tools) == 5 and cleared and verbatim  # every result is there, old ones as placeholders
    assert str(verbatim[-1].content) == page(4)  # the latest result is read in full
    assert isinstance(last_prompt[1], HumanMessage)  # the user's request was not dropped
    report = events[-1]["assembly"]
    assert len(report["cleared"]) == len(cleared)
    assert all("older than the last 3 messages" in c["reason"] for c in report["cleared"])
    assert all(c["tokens_after"] < c["tokens_before"] for c in report["cleared"])
    assert not [d for d in report["dropped"] if d["tier"] == "window"]


def test_a_tight_window_budget_drops_the_oldest_messages_after_clearing(store: FactStore) -> None:
    model = ScriptedChatModel(replies=lookups(6))
    agent = agent_with(store, model, [lookup_tool()], window=2, window_tokens=400)
    events = injection_events(agent, "Collect six sources.")
    assert_pairing_valid(model.prompts[-1])
    assert not isinstance(model.prompts[-1][1], ToolMessage)
    report = events[-1]["assembly"]
    window_drops = [d for d in report["dropped"] if d["tier"] == "window"]
    assert report["cleared"]  # old tool output went to placeholders first; that was not enough
    assert window_drops and window_drops[0]["item"] == "message 1 (human)"
    assert all(
        "window budget of 400 tokens" in d["reason"] or "did not fit" in d["reason"] for d in window_drops
    )
    window_tier = next(t for t in report["tiers"] if t["tier"] == "window")
    assert window_tier["tokens"] <= 400 and window_tier["budget"] == 400
    # the query still comes from the full history, so memory is asked the user's question
    assert events[-1]["query"] == "Collect six sources."


# -- the model's context --------------------------------------------------------------------------


def test_under_a_small_context_the_lowest_ranked_facts_go_first(store: FactStore) -> None:
    root = store.root("s")
    for i in range(8):
        store.capture_message(
            root, f"Budget line {i}: our budget for item {i} is ${i}0k.", message_id=f"m{i}"
        )
    model = ScriptedChatModel(replies=["ok", "ok"])
    roomy = agent_with(store, model, [])
    [wide] = injection_events(roomy, "What is our budget for each item?")
    assert len(wide["facts"]) == 8

    model = ScriptedChatModel(replies=["ok"])
    # an absolute retrieved budget (no share of the context): the tiers can outgrow the context, and
    # the overflow order is what keeps the prompt within it
    tight = agent_with(
        store, model, [], context_tokens=wide["assembly"]["total_tokens"] + 512 - 40, retrieved_share=None
    )
    [event] = injection_events(tight, "What is our budget for each item?")
    report = event["assembly"]
    drops = [d for d in report["dropped"] if d["tier"] == "retrieved"]
    assert drops and all(d["reason"].startswith("context full") for d in drops)
    assert all("lowest-ranked first" in d["reason"] for d in drops)
    kept = [f["short_id"] for f in event["facts"]]
    # the lowest-ranked went ("retrieved #8 [id]"), and the rest are read in the roomy block's order
    ranks = sorted(int(d["item"].split("#")[1].split()[0]) for d in drops)
    assert ranks == list(range(len(kept) + 1, len(wide["facts"]) + 1))
    gone = {d["item"].split("[")[1].rstrip("]") for d in drops}
    assert kept == [f["short_id"] for f in wide["facts"] if f["short_id"] not in gone]
    system = system_text(model.prompts[0])
    assert all(f"[{d['item'].split('[')[1]}" not in system for d in drops)
    assert report["total_tokens"] <= report["context"] - report["reserve"] and report["overflow"] == 0
    assert event["window_messages"] == 1  # the user's message was never at risk


# -- capture at eviction --------------------------------------------------------------------------


def facts_of(store: FactStore, session: str) -> list[tuple[str, str, str]]:
    return sorted((f.body, f.source.value, f.kind.value) for f in store.audit.session_facts(session))


def test_evict_mode_captures_late_but_loses_nothing_by_thread_end(store: FactStore) -> None:
    results: dict[str, list[int]] = {}
    for mode in ("eager", "evict"):
        seen: list[int] = []
        model = ScriptedChatModel(replies=lookups(8, answer="The budget is $100k."))
        middleware = BeadsMemoryMiddleware(store, store.root(mode), capture=mode)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[lookup_tool(store, mode, seen)], middleware=[middleware])
        events = injection_events(agent, f"{BUDGET} Check eight sources.", session=mode)
        results[mode] = seen
        if mode == "evict":
            evicted = [e["capture"]["captured_at_eviction"] for e in events]
            assert evicted[0] == 0 and sum(evicted) > 0  # captured when messages left the window
    # eager captured the user's message before the first call; evict only once it left the window
    assert results["eager"][0] > 0 and results["evict"][0] == 0
    assert results["evict"][-1] > 0
    # by the end of the thread both modes hold the very same facts, each exactly once
    assert facts_of(store, "evict") == facts_of(store, "eager")
    assert len(facts_of(store, "evict")) == len(set(facts_of(store, "evict")))
    tool_facts = [f for f in facts_of(store, "evict") if f[1] == Source.TOOL_RESULT.value]
    assert len(tool_facts) == 8


def test_evict_mode_shows_the_model_exactly_what_eager_capture_does(store: FactStore) -> None:
    """Why the harness figures of the two modes are the same: on every model call the injected facts
    and the view are identical, because retrieval never shows a fact whose message is still in view,
    and those are exactly the facts eviction has not stored yet."""
    seen: dict[str, list[tuple[list[str], int, list[str]]]] = {}
    for mode in ("eager", "evict"):
        model = ScriptedChatModel(replies=lookups(8, answer="The budget is $100k."))
        middleware = BeadsMemoryMiddleware(store, store.root(f"same-{mode}"), capture=mode, window=4)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[lookup_tool()], middleware=[middleware])
        events = injection_events(agent, f"{BUDGET} Check eight sources.", session=mode)
        views = [[m.type for m in prompt[1:]] for prompt in model.prompts]
        seen[mode] = [
            ([f["text"] for f in e["facts"]], e["window_messages"], view)
            for e, view in zip(events, views, strict=True)
        ]
    assert len(seen["eager"]) == 9
    assert seen["evict"] == seen["eager"]
    assert any(facts for facts, _, _ in seen["eager"])  # memory did inject, from messages out of view


def test_evict_mode_captures_at_fork_and_merge(store: FactStore) -> None:
    root = store.root("s")

    def web(query: str) -> str:
        """Search the web."""
        return "Qdrant supports on-prem deployment with Docker."

    sub_prompts: list[str] = []

    def sub_first(messages: list[BaseMessage]) -> AIMessage:
        sub_prompts.append(system_text(messages))
        return calls(tool_call("web", query="qdrant on-prem"))

    model = ScriptedChatModel(
        replies=[
            calls(tool_call("delegate_research", task="Does Qdrant fit our budget?", researcher="r_qdrant")),
            sub_first,
            calls(tool_call("conclude_task", summary="Qdrant can be self-hosted on-prem.")),
            "Done.",
            "Qdrant fits.",
        ]
    )
    delegate = make_subagent_tool(store, root, model, [StructuredTool.from_function(web)], capture="evict")
    middleware = BeadsMemoryMiddleware(store, root, capture="evict", skip_capture_tools={"delegate_research"})
    agent = create_agent(model, tools=[delegate], middleware=[middleware])
    injection_events(agent, f"{BUDGET} Research whether Qdrant can run on-prem.")

    # fork: the supervisor's request was captured before the sub-agent started, so it could recall it
    assert "$100k" in sub_prompts[0]
    # merge: the sub-agent's web result and task were captured, and its rollup links all of them
    [child] = store.children(root.id)
    raw = {f.id for f in store.audit.facts_in_namespace(child.id) if f.kind.value != "directive"}
    assert any(f.source is Source.TOOL_RESULT for f in store.audit.facts_in_namespace(child.id))
    [summary] = [f for f in store.audit.facts_in_namespace(root.id) if f.source is Source.CONCLUDE_TASK]
    linked = {dst for _, rel, dst in store.audit.edges(summary) if rel == Relation.ROLLUP_OF.value}
    assert raw and linked == raw
    # nothing was captured twice
    facts = facts_of(store, "s")
    assert len(facts) == len(set(facts))


async def test_evict_mode_on_the_async_path(store: FactStore) -> None:
    model = ScriptedChatModel(replies=lookups(8))
    middleware = BeadsMemoryMiddleware(store, store.root("s"), capture="evict")
    agent = create_agent(model, tools=[lookup_tool()], middleware=[middleware])
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    evicted = []
    async for _mode, chunk in agent.astream(
        {"messages": [HumanMessage(f"{BUDGET} Check eight sources.")]}, config, stream_mode=["custom"]
    ):
        if chunk.get("type") == INJECTION_EVENT:
            evicted.append(chunk["capture"]["captured_at_eviction"])
    assert sum(evicted) > 0
    sources = [f.source for f in store.audit.session_facts("s")]
    assert sources.count(Source.TOOL_RESULT) == 8 and Source.PASSIVE_CAPTURE in sources


def test_when_nothing_clears_the_floor_the_block_tells_the_model_so(store: FactStore) -> None:
    from memory.context.block import NOTHING

    store.capture_message(
        store.root("s"),
        "Quarterly reports from Lisbon arrived late because couriers rerouted every parcel twice.",
    )
    model = ScriptedChatModel(replies=["I don't know."])
    agent = agent_with(store, model, [])
    [event] = injection_events(
        agent, "Which orchestra rehearses Brahms symphonies near Lisbon during autumn evenings?"
    )
    assert event["not_in_memory"] is True and event["facts"] == []
    assert NOTHING in system_text(model.prompts[0])
