"""The stock lane's manage_memory creates, keyed by their tool call (the async path the playground
runs; the sync path runs through create_agent and PostgresStore in test_agents)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from playground.comparison.replay_safe import ReplaySafeMemoryCreates, create_key


def request(
    args: dict[str, Any], name: str = "manage_memory", thread: str | None = "thread-1"
) -> ToolCallRequest:
    call = {"name": name, "args": args, "id": "call-1", "type": "tool_call"}
    # the tool runtime carries the run's config; outside a graph there is none
    runtime = SimpleNamespace(config={"configurable": {"thread_id": thread}}) if thread else None
    return ToolCallRequest(tool_call=call, tool=None, state={}, runtime=runtime)  # type: ignore[arg-type]


async def run(req: ToolCallRequest) -> tuple[dict[str, Any], str]:
    seen: list[dict[str, Any]] = []

    async def handler(r: ToolCallRequest) -> ToolMessage:
        seen.append(dict(r.tool_call["args"]))
        return ToolMessage(
            content=f"{r.tool_call['args'].get('action', 'create')}d memory x", tool_call_id="call-1"
        )

    out = await ReplaySafeMemoryCreates().awrap_tool_call(req, handler)
    assert isinstance(out, ToolMessage)
    return seen[0], str(out.content)


async def test_a_create_is_an_update_of_its_own_key_and_reads_as_a_create() -> None:
    args, said = await run(request({"content": "Budget is $100k."}))
    assert args == {
        "content": "Budget is $100k.",
        "action": "update",
        "id": str(create_key("thread-1", "call-1")),
    }
    assert said == "created memory x"
    again, _ = await run(request({"content": "Budget is $100k.", "action": "create"}))
    assert again == args  # the same call run again: the same key
    other, _ = await run(request({"content": "Budget is $100k."}, thread="thread-2"))
    assert other["id"] != args["id"]


async def test_everything_else_passes_through() -> None:
    for req in [
        request({"content": "x", "action": "update", "id": "1f0e..."}),  # LangMem's own update
        request({"content": "x", "action": "create", "id": "abc"}),  # LangMem refuses this
        request({"query": "budget"}, name="search_memory"),
        request({"content": "x"}, thread=None),  # outside a run: no thread to key by
    ]:
        args, said = await run(req)
        assert args == req.tool_call["args"]
        assert said.endswith("memory x")
