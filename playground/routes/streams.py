"""Server-sent events: a chat's stream (what the page follows) and one turn's (it ends with the turn).

Both replay the log after the client's position (Last-Event-ID, or `after`, since htmx's SSE extension
reconnects with a new EventSource that sends no header), then follow it live.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.templating import Jinja2Templates
from sse_starlette import EventSourceResponse

from playground import jobs
from playground.deps import ChatDep, RuntimeDep, TemplatesDep
from playground.events import EventRow, StreamScope, event_stream, parse_last_event_id
from playground.render import render_event
from playground.runtime import Runtime
from playground.walkthrough import load_walkthrough


def streams_router() -> APIRouter:
    router = APIRouter()

    def open_stream(
        rt: Runtime, templates: Jinja2Templates, scope: StreamScope, after: int, walkthrough: bool
    ) -> EventSourceResponse:
        async def render(event: EventRow) -> str:
            extra = ""
            if walkthrough and event.kind == "turn_done":  # the verdict may be ready: refresh the panel
                view = await load_walkthrough(rt.pool, event.chat_id)
                extra = templates.get_template("partials/walkthrough.html").render(
                    {"walkthrough": view, "oob": True}
                )
            return render_event(templates, event, extra)

        settings = rt.settings
        stream = event_stream(
            rt.pool,
            rt.hub,
            scope,
            after,
            render,
            retry_ms=settings.sse_retry_ms,
            queue_size=settings.sse_queue_size,
            poll_seconds=settings.poll_seconds,
        )
        return EventSourceResponse(
            stream, ping=settings.sse_ping_seconds, headers={"Cache-Control": "no-store"}
        )

    @router.get("/chats/{chat_id}/events")
    async def chat_events(
        chat: ChatDep,
        rt: RuntimeDep,
        templates: TemplatesDep,
        after: Annotated[int | None, Query(ge=0)] = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> EventSourceResponse:
        position = parse_last_event_id(last_event_id, after)
        return open_stream(rt, templates, StreamScope(chat.id), position, chat.walkthrough)

    @router.get("/chats/{chat_id}/turns/{turn_id}/events")
    async def turn_events(
        chat: ChatDep,
        turn_id: uuid.UUID,
        rt: RuntimeDep,
        templates: TemplatesDep,
        after: Annotated[int | None, Query(ge=0)] = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> EventSourceResponse:
        if not await jobs.in_chat(rt.pool, chat.id, turn_id):
            raise HTTPException(404, "No such turn in this chat.")
        position = parse_last_event_id(last_event_id, after)
        return open_stream(rt, templates, StreamScope(chat.id, turn_id), position, False)

    return router
