"""Chats: create, list, rename, delete. A chat is one memory session in both lanes.

Deleting a chat forgets everything it stored: the fact graph's session (FactStore.forget), the stock
store's items under ("memories", session), the LangGraph threads of every turn in both lanes, and the
playground's own rows. The chat is marked first, so no worker starts one of its turns meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from memory.graph.store import AsyncFactStore
from playground.comparison.stock import STOCK_NAMESPACE_ROOT
from playground.db import AppPool

DEFAULT_TITLE = "New chat"
MAX_TITLE_CHARS = 200


class InvalidTitleError(ValueError):
    """A chat title must have between 1 and 200 characters."""


@dataclass(frozen=True, slots=True)
class Chat:
    id: uuid.UUID
    session_id: str
    title: str
    walkthrough: bool
    turns: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Chat:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            title=row["title"],
            walkthrough=row["walkthrough"],
            turns=row["last_turn_no"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


_COLUMNS = "id, session_id, title, walkthrough, last_turn_no, created_at, updated_at"


def clean_title(title: str) -> str:
    cleaned = " ".join(title.split())
    if not 1 <= len(cleaned) <= MAX_TITLE_CHARS:
        raise InvalidTitleError(InvalidTitleError.__doc__)
    return cleaned


async def create_chat(pool: AppPool, title: str = DEFAULT_TITLE, walkthrough: bool = False) -> Chat:
    chat_id = uuid.uuid4()
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"INSERT INTO playground.chats (id, session_id, title, walkthrough) VALUES (%s, %s, %s, %s)"
            f" RETURNING {_COLUMNS}",
            # the session id is the chat's id: unique, and safe inside a store namespace (no dots)
            (chat_id, chat_id.hex, clean_title(title), walkthrough),
        )
        row = await cur.fetchone()
        assert row is not None  # INSERT ... RETURNING returns the row it inserted
        return Chat.from_row(row)


async def list_chats(pool: AppPool) -> list[Chat]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLUMNS} FROM playground.chats WHERE deleted_at IS NULL ORDER BY updated_at DESC, id"
        )
        return [Chat.from_row(r) for r in await cur.fetchall()]


async def get_chat(pool: AppPool, chat_id: uuid.UUID) -> Chat | None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"SELECT {_COLUMNS} FROM playground.chats WHERE id = %s AND deleted_at IS NULL", (chat_id,)
        )
        row = await cur.fetchone()
    return Chat.from_row(row) if row else None


async def rename_chat(pool: AppPool, chat_id: uuid.UUID, title: str) -> Chat | None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            f"UPDATE playground.chats SET title = %s, updated_at = now() WHERE id = %s AND deleted_at IS NULL"
            f" RETURNING {_COLUMNS}",
            (clean_title(title), chat_id),
        )
        row = await cur.fetchone()
    return Chat.from_row(row) if row else None


async def forget_stock_items(store: BaseStore, session_id: str) -> int:
    """Delete the stock lane's memories of one session; returns how many were deleted."""
    namespace = (STOCK_NAMESPACE_ROOT, session_id)
    deleted = 0
    while items := await store.asearch(namespace, limit=100):
        for item in items:
            await store.adelete(item.namespace, item.key)
        deleted += len(items)
    return deleted


async def mark_deleting(pool: AppPool, chat_id: uuid.UUID) -> str | None:
    """Start deleting a chat: returns its session id, or None if there is no such chat."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "UPDATE playground.chats SET deleted_at = now() WHERE id = %s AND deleted_at IS NULL"
            " RETURNING session_id",
            (chat_id,),
        )
        row = await cur.fetchone()
    return row["session_id"] if row else None


async def thread_ids(pool: AppPool, chat_id: uuid.UUID) -> list[str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT stock_thread_id, beads_thread_id FROM playground.turn_worker WHERE chat_id = %s",
            (chat_id,),
        )
        return [
            tid for row in await cur.fetchall() for tid in (row["stock_thread_id"], row["beads_thread_id"])
        ]


async def drop_chat_rows(pool: AppPool, chat_id: uuid.UUID) -> None:
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM playground.chats WHERE id = %s", (chat_id,))


async def delete_chat(
    pool: AppPool,
    chat_id: uuid.UUID,
    *,
    facts: AsyncFactStore,
    stock: BaseStore,
    checkpointer: BaseCheckpointSaver[Any],
    stop_turns: Callable[[uuid.UUID], Awaitable[None]],
) -> bool:
    """Forget the chat in both lanes and delete it; False if there was no such chat."""
    session_id = await mark_deleting(pool, chat_id)
    if session_id is None:
        return False
    await stop_turns(chat_id)  # a running turn would write memory after we forget it
    await facts.forget(session_id)
    await forget_stock_items(stock, session_id)
    for thread_id in await thread_ids(pool, chat_id):
        await checkpointer.adelete_thread(thread_id)
    await drop_chat_rows(pool, chat_id)
    return True
