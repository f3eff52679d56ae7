"""`BeadsMemoryMiddleware`: fact-graph memory for `langchain.agents.create_agent`.

Per model call it
  1. captures new user messages (verbatim, split into claims) and non-memory tool results into the
     calling agent's namespace, with no extraction model;
  2. trims the model's view to the last `window` raw messages (state keeps everything);
  3. takes the query from the FULL message list (a turn with many tool calls would otherwise leave the
     window without a user message, and memory would silently switch off);
  4. injects the ranked facts into the system prompt for that call only, skipping facts whose source
     message is still in the window, and reports what it injected as a custom stream event.
At the end of the turn the final answer is captured as a conclusion.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config, get_stream_writer

from memory.block import describe_injection, render_block
from memory.model import Kind, Namespace, SearchResult, Source
from memory.retrieval import SearchOptions
from memory.store import FactStore
from memory.tools import MEMORY_TOOL_NAMES, memory_tools

INJECTION_EVENT = "beads_injection"
# a tool result is captured verbatim up to this many characters: a whole web page would flood the
# namespace with claims nobody asked for
MAX_TOOL_RESULT_CHARS = 8_000


class BeadsState(AgentState):
    beads_captured: NotRequired[Annotated[list[str], PrivateStateAttr]]


def message_text(message: AnyMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def trim_window(messages: Sequence[AnyMessage], size: int) -> list[AnyMessage]:
    """The last `size` messages, never starting on a tool result whose call was cut off."""
    window = list(messages[-size:]) if size > 0 else []
    while window and isinstance(window[0], ToolMessage):
        window.pop(0)
    return window


def query_from(messages: Sequence[AnyMessage]) -> str:
    """The latest user message in the full list: what the model is being asked, however many tool
    calls came after it."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message_text(message).strip()
    return ""


def _thread_id() -> str | None:
    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # called outside a runnable context
        return None


def _emit(event: dict[str, Any]) -> None:
    with contextlib.suppress(RuntimeError):  # outside a graph there is no stream to write to
        get_stream_writer()(event)


class BeadsMemoryMiddleware(AgentMiddleware[BeadsState, Any]):
    """Capture verbatim, inject a small ranked block; see the module docstring."""

    state_schema = BeadsState

    def __init__(
        self,
        store: FactStore,
        namespace: Namespace,
        *,
        agent_id: str | None = None,
        acting_on_behalf_of: str | None = "user",
        role: Literal["orchestrator", "subagent"] = "orchestrator",
        window: int = 10,
        search_options: SearchOptions | None = None,
        capture_final: bool | None = None,
        capture_tool_results: bool = True,
        skip_capture_tools: Collection[str] = (),
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.namespace = namespace
        self.agent_id = agent_id or namespace.agent_id
        self.acting_on_behalf_of = acting_on_behalf_of
        self.role = role
        self.window = window
        self.search_options = search_options or store.search_options
        # a fork's final answer is not the orchestrator's conclusion: it concludes with conclude_task
        self.capture_final = (role == "orchestrator") if capture_final is None else capture_final
        self.capture_tool_results = capture_tool_results
        self.skip_capture_tools = frozenset(MEMORY_TOOL_NAMES) | frozenset(skip_capture_tools)
        self.tools = memory_tools(store, namespace, self.agent_id, role)
        self._name = name

    @property
    def name(self) -> str:
        return self._name or f"BeadsMemory[{self.agent_id}]"

    # -- capture -------------------------------------------------------------------------------

    def _capture_new(self, state: dict[str, Any]) -> dict[str, Any] | None:
        seen = set(state.get("beads_captured", ()))
        new: list[str] = []
        thread_id = _thread_id()
        for message in state["messages"]:
            if message.id is None or message.id in seen:
                continue
            if isinstance(message, HumanMessage):
                self.store.capture_message(
                    self.namespace,
                    message_text(message),
                    source=Source.PASSIVE_CAPTURE,
                    agent_id=self.agent_id,
                    acting_on_behalf_of=self.acting_on_behalf_of,
                    thread_id=thread_id,
                    message_id=message.id,
                )
            elif (
                isinstance(message, ToolMessage)
                and self.capture_tool_results
                and message.name not in self.skip_capture_tools
                and message.status != "error"
            ):
                self.store.capture_message(
                    self.namespace,
                    message_text(message)[:MAX_TOOL_RESULT_CHARS],
                    source=Source.TOOL_RESULT,
                    agent_id=self.agent_id,
                    thread_id=thread_id,
                    message_id=message.id,
                )
            else:
                continue
            new.append(message.id)
        return {"beads_captured": [*seen, *new]} if new else None

    def _capture_final(self, state: dict[str, Any]) -> None:
        if not self.capture_final or not state["messages"]:
            return
        final = state["messages"][-1]
        if isinstance(final, AIMessage) and not final.tool_calls and message_text(final).strip():
            thread_id = _thread_id()
            # keyed by the turn (thread + the user message it answers), not by the AI message id: a
            # checkpoint replay regenerates the answer under a new id and must not store it twice
            asked = next((m.id for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None)
            self.store.remember(
                self.namespace,
                message_text(final),
                kind=Kind.CONCLUSION,
                source=Source.PASSIVE_CAPTURE,
                agent_id=self.agent_id,
                acting_on_behalf_of=self.acting_on_behalf_of,
                thread_id=thread_id,
                message_id=final.id,
                source_key=f"final:{thread_id}:{asked}",
            )

    def before_model(self, state: BeadsState, runtime: Any) -> dict[str, Any] | None:
        return self._capture_new(state)

    async def abefore_model(self, state: BeadsState, runtime: Any) -> dict[str, Any] | None:
        return await self.store.aio.run(self._capture_new, state)

    def after_agent(self, state: BeadsState, runtime: Any) -> None:
        self._capture_final(state)

    async def aafter_agent(self, state: BeadsState, runtime: Any) -> None:
        await self.store.aio.run(self._capture_final, state)

    # -- recall and injection --------------------------------------------------------------------

    def _recall(self, request: ModelRequest) -> tuple[ModelRequest, dict[str, Any]]:
        full = request.state["messages"]
        window = trim_window(full, self.window)
        query = query_from(full)
        result: SearchResult | None = None
        if query:
            options = dataclasses.replace(
                self.search_options,
                exclude_message_ids=frozenset(m.id for m in window if m.id is not None),
            )
            result = self.store.search(self.namespace, query, options)
        block = render_block(result)
        base = request.system_message.text if request.system_message is not None else ""
        system = "\n\n".join(part for part in (base, block) if part)
        event = {
            "type": INJECTION_EVENT,
            "agent_id": self.agent_id,
            "namespace_id": str(self.namespace.id),
            "window_messages": len(window),
            "history_messages": len(full),
            **describe_injection(result, block),
        }
        overridden = request.override(
            system_message=SystemMessage(system) if system else None, messages=window
        )
        return overridden, event

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        overridden, event = self._recall(request)
        _emit(event)
        return handler(overridden)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        overridden, event = await self.store.aio.run(self._recall, request)
        _emit(event)
        return await handler(overridden)
