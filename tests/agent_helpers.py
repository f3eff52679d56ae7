"""Driving a `create_agent` agent with our middleware in tests: one turn, what it injected, what it saw."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from memory.doors.middleware import INJECTION_EVENT


def injection_events(agent: Any, text: str, session: str = "s") -> list[dict[str, Any]]:
    """Send `text` on a fresh thread; the middleware's injection events of that turn, in order."""
    config = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": session}}
    return [
        chunk
        for _mode, chunk in agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode=["custom"])
        if chunk.get("type") == INJECTION_EVENT
    ]


def system_text(prompt: list[BaseMessage]) -> str:
    """The system prompt a model call received ('' when it had none)."""
    return str(prompt[0].content) if prompt and prompt[0].type == "system" else ""
