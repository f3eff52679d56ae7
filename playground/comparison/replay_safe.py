"""The stock lane's memory writes, safe to run twice.

A turn resumed after its process died reruns the step whose checkpoint was not saved (see
playground.turn_runner): a tool call that had already written may run again. Our lane's writes are
content-addressed, so a rerun writes nothing new. LangMem's ``manage_memory`` keys every created
memory with a fresh ``uuid4``, so a rerun stores the memory a second time, and a crash would leave the
stock lane holding a duplicate no uncrashed run has (the multiprocess reliability check saw it).

This middleware keys a create by its thread and tool call instead: it sends it to LangMem as an
``update`` of that key, which LangMem writes with the same ``put``. Run again, it writes the same item.
The model still reads "created memory <id>". Nothing else about the stock lane changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

MANAGE_MEMORY = "manage_memory"
# the uuid5 namespace of the keys this writes (any fixed uuid; this one is uuid5(NAMESPACE_URL, ...))
_KEYS = uuid.uuid5(uuid.NAMESPACE_URL, "langgraph-beads-memory/stock-lane/manage_memory")

Handler = Callable[[ToolCallRequest], ToolMessage | Command[Any]]
AsyncHandler = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


def create_key(thread_id: str, tool_call_id: str) -> uuid.UUID:
    """The key a created memory gets: the same for every run of one tool call of one thread."""
    return uuid.uuid5(_KEYS, f"{thread_id}:{tool_call_id}")


def _thread_id(request: ToolCallRequest) -> str | None:
    config = getattr(request.runtime, "config", None) or {}  # no runtime: called outside a graph
    thread = config.get("configurable", {}).get("thread_id")
    return str(thread) if thread is not None else None


def keyed(request: ToolCallRequest) -> tuple[ToolCallRequest, bool]:
    """`request` with a create turned into an update of its own key; whether it was one."""
    call = request.tool_call
    args = call.get("args") or {}
    thread = _thread_id(request)
    if (
        call.get("name") != MANAGE_MEMORY
        or args.get("action", "create") != "create"
        or args.get("id")  # LangMem refuses a create with an id: leave its message to the model
        or not call.get("id")
        or thread is None
    ):
        return request, False
    key = create_key(thread, str(call["id"]))
    return request.override(tool_call={**call, "args": {**args, "action": "update", "id": str(key)}}), True


def _as_created(result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
    if isinstance(result, ToolMessage) and isinstance(result.content, str):
        return result.model_copy(
            update={"content": result.content.replace("updated memory", "created memory", 1)}
        )
    return result


class ReplaySafeMemoryCreates(AgentMiddleware[Any, Any]):
    """Give each ``manage_memory`` create a key of its own tool call (see the module docstring)."""

    def wrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolMessage | Command[Any]:
        request, created = keyed(request)
        result = handler(request)
        return _as_created(result) if created else result

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: AsyncHandler
    ) -> ToolMessage | Command[Any]:
        request, created = keyed(request)
        result = await handler(request)
        return _as_created(result) if created else result


__all__ = ["MANAGE_MEMORY", "ReplaySafeMemoryCreates", "create_key", "keyed"]
