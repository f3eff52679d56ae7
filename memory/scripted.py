"""A deterministic chat model: replies are enqueued (tool calls included) or computed by a rule.

Used by the tests and by the playground's scripted mode; memory.testing is its public door. It binds
tools, streams its replies token by token like a real model (tool calls arrive as tool_call_chunks on
the last chunk), and records every prompt it received so tests can assert on what reached the model.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

Reply = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]

_TOKEN = re.compile(r"\S+\s*|\s+")
_ids = itertools.count(1)


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    """A tool call as an AIMessage carries it."""
    return {"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}


def calls(*tool_calls: dict[str, Any], content: str = "") -> AIMessage:
    """An assistant turn that calls tools."""
    return AIMessage(content=content, tool_calls=list(tool_calls))


class ScriptedChatModel(BaseChatModel):
    """Replies in order from `replies`; when they run out, from `fallback` (a rule over the prompt)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    fallback: Any = None  # Callable[[list[BaseMessage]], AIMessage | str] | str | None
    model_name: str = "scripted"

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound_tools: list[str] = PrivateAttr(default_factory=list)
    _tool_history: list[list[str]] = PrivateAttr(default_factory=list)
    _queue: list[Any] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        self._queue = list(self.replies)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Every message list the model was called with, in order."""
        return self._prompts

    @property
    def system_prompts(self) -> list[str]:
        """The system prompt of every call, in order ("" for a call without one): where
        BeadsMemoryMiddleware puts the facts it injected."""
        return [_system_text(prompt) for prompt in self._prompts]

    @property
    def bound_tools(self) -> list[str]:
        """The tool names bound last."""
        return self._bound_tools

    @property
    def tool_history(self) -> list[list[str]]:
        """The tool names bound for each call, in order (agents bind per model call)."""
        return self._tool_history

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        names = [_tool_name(t) for t in tools]
        self._bound_tools = names
        with self._lock:
            self._tool_history.append(names)
        return self  # shares the queue and the prompt log: a bound model is the same script

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._prompts.append(list(messages))
            reply = self._queue.pop(0) if self._queue else self.fallback
        if reply is None:
            reply = "OK."
        if callable(reply) and not isinstance(reply, AIMessage):
            reply = reply(list(messages))
        if isinstance(reply, str):
            reply = AIMessage(content=reply)
        return AIMessage(
            content=reply.content,
            tool_calls=[dict(tc, id=tc.get("id") or f"call_{next(_ids)}") for tc in reply.tool_calls],
            usage_metadata=_usage(messages, reply),
            response_metadata={"model_name": self.model_name},
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._next(messages)
        text = reply.content if isinstance(reply.content, str) else ""
        for token in _TOKEN.findall(text):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {
                        "name": tc["name"],
                        "args": _json(tc["args"]),
                        "id": tc["id"],
                        "index": i,
                        "type": "tool_call_chunk",
                    }
                    for i, tc in enumerate(reply.tool_calls)
                ],
                usage_metadata=reply.usage_metadata,
                response_metadata=reply.response_metadata,
                chunk_position="last",
            )
        )


def _json(args: dict[str, Any]) -> str:
    import json

    return json.dumps(args)


def _usage(messages: Sequence[BaseMessage], reply: AIMessage) -> dict[str, int]:
    # a stable stand-in for token counts: words, so per-reply cost figures are comparable across lanes
    words_in = sum(len(str(m.content).split()) for m in messages)
    words_out = len(str(reply.content).split())
    return {"input_tokens": words_in, "output_tokens": words_out, "total_tokens": words_in + words_out}


def _system_text(prompt: Sequence[BaseMessage]) -> str:
    return "\n\n".join(m.text for m in prompt if isinstance(m, SystemMessage))


def _tool_name(tool: Any) -> str:
    """A bound tool's name: a tool's `name`, a schema dict's "name"; else the tool as text."""
    name = tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
    return name if isinstance(name, str) else str(tool)
