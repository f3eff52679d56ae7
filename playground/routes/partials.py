"""One route per live region, rendering the same partial the full page includes, from the database."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from playground.chats import list_chats
from playground.deps import ChatDep, RuntimeDep, TemplatesDep
from playground.inspector import load_inspector
from playground.routes.common import composer_context
from playground.views import load_turns
from playground.walkthrough import load_walkthrough


def partials_router() -> APIRouter:
    router = APIRouter(prefix="/partials", default_response_class=HTMLResponse)

    @router.get("/status")
    async def status(request: Request, rt: RuntimeDep, templates: TemplatesDep) -> HTMLResponse:
        return templates.TemplateResponse(request, "partials/status.html", {"status_lines": rt.status_lines})

    @router.get("/chats")
    async def chat_list(request: Request, rt: RuntimeDep, templates: TemplatesDep) -> HTMLResponse:
        context = {"chats": await list_chats(rt.pool), "current_chat_id": None}
        return templates.TemplateResponse(request, "partials/chat_list.html", context)

    @router.get("/chats/{chat_id}/turns")
    async def turns(request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep) -> HTMLResponse:
        views, _ = await load_turns(rt.pool, chat.id)
        return templates.TemplateResponse(request, "partials/turns.html", {"turns": views})

    @router.get("/chats/{chat_id}/turns/{turn_id}")
    async def turn(
        request: Request, chat: ChatDep, turn_id: uuid.UUID, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        views, _ = await load_turns(rt.pool, chat.id, turn_id)
        if not views:
            raise HTTPException(404, "No such turn in this chat.")
        return templates.TemplateResponse(request, "partials/_turn.html", {"turn": views[0]})

    @router.get("/chats/{chat_id}/composer")
    async def composer(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        return templates.TemplateResponse(request, "partials/composer.html", await composer_context(rt, chat))

    @router.get("/chats/{chat_id}/walkthrough")
    async def walkthrough(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        if not chat.walkthrough:
            raise HTTPException(404, "This chat is not a walkthrough.")
        context = {"walkthrough": await load_walkthrough(rt.pool, chat.id)}
        return templates.TemplateResponse(request, "partials/walkthrough.html", context)

    @router.get("/chats/{chat_id}/inspector")
    async def inspector(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        context = {"inspector": await load_inspector(rt.facts.aio, rt.stock_store, chat)}
        return templates.TemplateResponse(request, "partials/inspector.html", context)

    @router.get("/chats/{chat_id}/header")
    async def header(request: Request, chat: ChatDep, templates: TemplatesDep) -> HTMLResponse:
        return templates.TemplateResponse(request, "partials/chat_header.html", {"chat": chat})

    return router
