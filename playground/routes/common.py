"""What several routes render: the page frame, a chat's turns, its composer, its walkthrough."""

from __future__ import annotations

import uuid
from typing import Any

from playground.chats import Chat, list_chats
from playground.runtime import Runtime
from playground.views import load_turns
from playground.walkthrough import load_walkthrough


async def frame_context(rt: Runtime, current: Chat | None = None) -> dict[str, Any]:
    return {
        "chats": await list_chats(rt.pool),
        "current_chat_id": current.id if current else None,
        "status_lines": rt.status_lines,
        "login_required": rt.settings.api_key is not None,  # the frame then offers a logout
    }


async def composer_context(
    rt: Runtime, chat: Chat, *, text: str | None = None, error: str | None = None
) -> dict[str, Any]:
    """A fresh composer: a new idempotency key, and the next walkthrough step filled in."""
    if text is None:
        text = (await load_walkthrough(rt.pool, chat.id)).next_text if chat.walkthrough else ""
    return {
        "chat": chat,
        "idempotency_key": uuid.uuid4().hex,
        "max_chars": rt.settings.max_message_chars,
        "text": text,
        "error": error,
    }


async def chat_context(rt: Runtime, chat: Chat) -> dict[str, Any]:
    turns, last_event_no = await load_turns(rt.pool, chat.id)
    return {
        **await frame_context(rt, chat),
        **await composer_context(rt, chat),
        "turns": turns,
        "last_event_no": last_event_no,
        "walkthrough": await load_walkthrough(rt.pool, chat.id) if chat.walkthrough else None,
    }
