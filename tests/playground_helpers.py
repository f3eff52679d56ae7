"""Shared by the playground tests: a migrated template database, app settings, and waiting helpers.

Every playground table, LangGraph's checkpointer tables and the stock store's schema are created once
per run in a template database; each test gets a clone (tens of milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.reliability.checks import query as rows  # noqa: F401  (re-exported for the tests)
from bench.reliability.checks import wait_idle
from bench.reliability.servers import APP_DEFAULTS, free_port, serve  # noqa: F401  (re-exported for the tests)
from playground.runtime import Runtime
from playground.settings import PlaygroundSettings
from playground.startup import open_runtime

#: where a TestClient sends its requests: a loopback address, as the app is bound by default (a keyless
#: app serves its pages on loopback only; TestClient's own "testserver" is no address)
LOOPBACK_BASE = "http://127.0.0.1"
ORIGIN = {"origin": LOOPBACK_BASE}
HTMX = {**ORIGIN, "hx-request": "true"}


def new_chat(client: Any, path: str = "/chats") -> str:
    """Create a chat through the app (a same-origin POST); returns its path."""
    response = client.post(path, headers=ORIGIN, follow_redirects=False)
    assert response.status_code == 303
    return response.headers["location"]


def send(client: Any, chat: str, text: str, key: str | None = None) -> str:
    """Send a message to `chat` as htmx does; returns the turn id."""
    response = client.post(
        f"{chat}/messages", data={"text": text, "idempotency_key": key or uuid.uuid4().hex}, headers=HTMX
    )
    assert response.status_code == 200, response.text
    return response.headers["x-turn-id"]


def settings_for(db_url: str, **overrides: Any) -> PlaygroundSettings:
    """The app on the test database with the scripted model and the fake embedder: no model, no network."""
    values: dict[str, Any] = {"database_url": db_url, **APP_DEFAULTS, "lease_seconds": 5, **overrides}
    return PlaygroundSettings(**values)


def _admin(server_url: str, statement: sql.Composable) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(statement)


@pytest.fixture(scope="session")
def playground_template(pg_server_url: str, template_db: str) -> str:
    name = f"playground_tpl_{os.getpid()}"
    _admin(pg_server_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    _admin(
        pg_server_url,
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template_db)),
    )

    async def build() -> None:
        settings = settings_for(make_conninfo(pg_server_url, dbname=name), workers=1)
        async with open_runtime(settings):
            pass

    asyncio.run(build())
    return name


@pytest.fixture
def play_db(pg_server_url: str, playground_template: str) -> Iterator[str]:
    """A fresh database with the library's, LangGraph's and the playground's tables."""
    name = f"p_{uuid.uuid4().hex[:12]}"
    _admin(
        pg_server_url,
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(playground_template)
        ),
    )
    yield make_conninfo(pg_server_url, dbname=name)
    _admin(pg_server_url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.asynccontextmanager
async def running(db_url: str, **overrides: Any) -> AsyncIterator[Runtime]:
    async with open_runtime(settings_for(db_url, **overrides)) as rt:
        yield rt


def scalar(db_url: str, query: str, params: Any = None) -> Any:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def wait_until_idle(db_url: str, timeout: float = 30.0) -> None:
    """Until every turn in the database is done."""
    try:
        wait_idle(db_url, timeout=timeout)
    except TimeoutError:
        raise AssertionError("turns did not finish in time") from None


async def await_idle(db_url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while await asyncio.to_thread(
        scalar, db_url, "SELECT count(*) FROM playground.turn_worker WHERE status <> 'done'"
    ):
        if time.monotonic() > deadline:
            raise AssertionError("turns did not finish in time")
        await asyncio.sleep(0.05)
