"""Full pages: the landing page, a chat, its memory inspector."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from playground.deps import ChatDep, RuntimeDep, TemplatesDep
from playground.inspector import load_inspector
from playground.routes.common import chat_context, frame_context


def pages_router() -> APIRouter:
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse)
    async def index(request: Request, rt: RuntimeDep, templates: TemplatesDep) -> HTMLResponse:
        return templates.TemplateResponse(request, "index.html", await frame_context(rt))

    @router.get("/chats/{chat_id}", response_class=HTMLResponse)
    async def chat_page(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        return templates.TemplateResponse(request, "chat.html", await chat_context(rt, chat))

    @router.get("/chats/{chat_id}/inspector", response_class=HTMLResponse)
    async def inspector_page(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> HTMLResponse:
        inspector = await load_inspector(rt.facts.aio, rt.stock_store, chat)
        context = {**await frame_context(rt, chat), "chat": chat, "inspector": inspector}
        return templates.TemplateResponse(request, "inspector.html", context)

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return router
