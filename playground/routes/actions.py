"""Writes: create, rename and delete chats; send a message; pin or unpin a fact; undo a correction capture made
by itself. Every one is a same-origin form POST
(see playground.security); htmx requests get a fragment back, plain forms a redirect."""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from memory.errors import BeadsMemoryError, FactNotFoundError
from playground.chats import DEFAULT_TITLE, Chat, InvalidTitleError, create_chat, delete_chat, rename_chat
from playground.deps import ChatDep, RuntimeDep, TemplatesDep, is_htmx
from playground.inspector import load_inspector
from playground.jobs import submit_message
from playground.routes.common import composer_context, frame_context
from playground.runtime import Runtime
from playground.security import read_form

MAX_IDEMPOTENCY_KEY = 100


def go_to(request: Request, url: str) -> Response:
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def actions_router() -> APIRouter:
    router = APIRouter()

    @router.post("/chats")
    async def new_chat(request: Request, rt: RuntimeDep) -> Response:
        chat = await create_chat(rt.pool, DEFAULT_TITLE)
        return go_to(request, f"/chats/{chat.id}")

    @router.post("/walkthrough")
    async def new_walkthrough(request: Request, rt: RuntimeDep) -> Response:
        chat = await create_chat(rt.pool, "Walkthrough: a corrected budget", walkthrough=True)
        return go_to(request, f"/chats/{chat.id}")

    @router.post("/chats/{chat_id}/rename", response_class=HTMLResponse)
    async def rename(request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep) -> Response:
        form = await read_form(request, rt.settings.max_body_bytes)
        try:
            renamed = await rename_chat(rt.pool, chat.id, form.get("title", ""))
        except InvalidTitleError as exc:
            context = {"chat": chat, "title_error": str(exc)}
            return templates.TemplateResponse(request, "partials/chat_header.html", context, status_code=422)
        if renamed is None:
            raise HTTPException(404, "No such chat.")
        if not is_htmx(request):
            return RedirectResponse(f"/chats/{chat.id}", status_code=303)
        header = templates.get_template("partials/chat_header.html").render({"chat": renamed})
        frame = await frame_context(rt, renamed)
        chat_list = templates.get_template("partials/chat_list.html").render({**frame, "oob": True})
        return HTMLResponse(header + chat_list)

    @router.post("/chats/{chat_id}/delete")
    async def delete(request: Request, chat: ChatDep, rt: RuntimeDep) -> Response:
        await delete_chat(
            rt.pool,
            chat.id,
            facts=rt.facts.aio,
            stock=rt.stock_store,
            checkpointer=rt.saver,
            stop_turns=rt.worker.stop_chat_everywhere,
        )
        return go_to(request, "/")

    @router.post("/chats/{chat_id}/messages", response_class=HTMLResponse)
    async def send_message(
        request: Request, chat: ChatDep, rt: RuntimeDep, templates: TemplatesDep
    ) -> Response:
        form = await read_form(request, rt.settings.max_body_bytes)
        text = form.get("text", "")
        key = form.get("idempotency_key", "").strip() or uuid.uuid4().hex  # no key: no double-submit guard
        limit = rt.settings.max_message_chars
        error = None
        if not text.strip():
            error = "Type a message first: an empty message is not sent."
        elif len(text) > limit:
            error = f"That message is too long: {len(text)} characters, and the limit is {limit}."
        elif len(key) > MAX_IDEMPOTENCY_KEY:
            error = f"The idempotency key is longer than {MAX_IDEMPOTENCY_KEY} characters."
        if error is not None:
            context = await composer_context(rt, chat, text=text[:limit], error=error)
            return templates.TemplateResponse(request, "partials/composer.html", context, status_code=422)
        submitted = await submit_message(rt.pool, chat.id, text.strip(), key)
        if submitted is None:
            raise HTTPException(404, "No such chat.")
        if not is_htmx(request):
            return RedirectResponse(f"/chats/{chat.id}", status_code=303)
        headers = {"X-Turn-Id": str(submitted.turn_id), "X-Turn-Created": str(submitted.created).lower()}
        composer = templates.get_template("partials/composer.html").render(await composer_context(rt, chat))
        chat_list = templates.get_template("partials/chat_list.html").render(
            {**await frame_context(rt, chat), "oob": True}  # its message counts just changed
        )
        return HTMLResponse(composer + chat_list, headers=headers)

    @router.post("/chats/{chat_id}/facts/{fact_id}/{action}", response_class=HTMLResponse)
    async def pin(
        request: Request,
        chat: ChatDep,
        fact_id: uuid.UUID,
        action: Literal["pin", "unpin"],
        rt: RuntimeDep,
        templates: TemplatesDep,
    ) -> Response:
        facts = rt.facts.aio
        try:
            fact = await facts.get(fact_id)
        except FactNotFoundError:
            raise HTTPException(404, "No such fact.") from None
        if fact.session_id != chat.session_id:  # another chat's fact: as if it did not exist
            raise HTTPException(404, "No such fact.")
        try:
            await (facts.pin(fact, pinned_by="user") if action == "pin" else facts.unpin(fact))
        except BeadsMemoryError as exc:  # untrusted content, an archived fact
            raise HTTPException(422, str(exc)) from None
        return await inspector_response(request, rt, templates, chat)

    @router.post("/chats/{chat_id}/corrections/{new_id}/{old_id}/undo", response_class=HTMLResponse)
    async def undo_correction(
        request: Request,
        chat: ChatDep,
        new_id: uuid.UUID,
        old_id: uuid.UUID,
        rt: RuntimeDep,
        templates: TemplatesDep,
    ) -> Response:
        """Take back a supersede capture wrote by itself: the old claim is current again."""
        facts = rt.facts.aio
        # only this chat's automatic edges: another chat's, or one a person or the agent wrote, is not found
        edges = [
            e
            for e in await facts.review.automatic_edges(chat.session_id)
            if (e["src"], e["dst"]) == (new_id, old_id)
        ]
        if not edges:
            raise HTTPException(404, "No such automatic correction.")
        if edges[0]["undone_at"] is not None:
            raise HTTPException(409, "That correction was already undone.")
        try:
            await facts.undo_supersede(new_id, old_id)
        except FactNotFoundError:  # undone by another request in the meantime
            raise HTTPException(409, "That correction was already undone.") from None
        return await inspector_response(request, rt, templates, chat)

    @router.post("/chats/{chat_id}/proposals/{new_id}/{old_id}/{decision}", response_class=HTMLResponse)
    async def settle_proposal(
        request: Request,
        chat: ChatDep,
        new_id: uuid.UUID,
        old_id: uuid.UUID,
        decision: Literal["accept", "dismiss"],
        rt: RuntimeDep,
        templates: TemplatesDep,
    ) -> Response:
        """A person's answer to a replacement capture only proposed."""
        facts = rt.facts.aio
        if not any(
            (p["src"], p["dst"]) == (new_id, old_id) for p in await facts.review.proposals(chat.session_id)
        ):
            raise HTTPException(404, "No such open proposal in this chat.")
        try:
            await facts.settle_proposal(new_id, old_id, accept=decision == "accept")
        except BeadsMemoryError as exc:  # settled by another request, or the guard refused
            raise HTTPException(409, str(exc)) from None
        return await inspector_response(request, rt, templates, chat)

    @router.post("/chats/{chat_id}/replaces/{new_id}/{old_id}", response_class=HTMLResponse)
    async def this_replaces_that(
        request: Request,
        chat: ChatDep,
        new_id: uuid.UUID,
        old_id: uuid.UUID,
        rt: RuntimeDep,
        templates: TemplatesDep,
    ) -> Response:
        """A person links two current claims of this chat: the newer replaces the older."""
        facts = rt.facts.aio
        try:
            new, old = await facts.get(new_id), await facts.get(old_id)
            if chat.session_id not in (new.session_id, old.session_id) or new.session_id != old.session_id:
                raise FactNotFoundError("not this chat's facts")
            await facts.supersede(new, old, by_person=True)
        except FactNotFoundError:
            raise HTTPException(404, "No such fact in this chat.") from None
        except BeadsMemoryError as exc:  # a cycle, or the two are not about the same thing
            raise HTTPException(422, str(exc)) from None
        return await inspector_response(request, rt, templates, chat)

    return router


async def inspector_response(
    request: Request, rt: Runtime, templates: Jinja2Templates, chat: Chat
) -> Response:
    """After a write from the inspector: its partial for htmx, a redirect back to it for a plain form."""
    if not is_htmx(request):
        return RedirectResponse(f"/chats/{chat.id}/inspector", status_code=303)
    context = {"inspector": await load_inspector(rt.facts.aio, rt.stock_store, chat)}
    return templates.TemplateResponse(request, "partials/inspector.html", context)
