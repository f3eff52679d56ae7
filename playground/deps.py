"""Small dependency getters: the shared runtime, the templates, a chat that must exist."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.templating import Jinja2Templates

from playground.chats import Chat, get_chat
from playground.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


def get_templates(request: Request) -> Jinja2Templates:
    return request.app.state.templates  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
TemplatesDep = Annotated[Jinja2Templates, Depends(get_templates)]


async def existing_chat(chat_id: uuid.UUID, rt: RuntimeDep) -> Chat:
    chat = await get_chat(rt.pool, chat_id)
    if chat is None:
        raise HTTPException(status_code=404, detail="No such chat.")
    return chat


ChatDep = Annotated[Chat, Depends(existing_chat)]


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"
