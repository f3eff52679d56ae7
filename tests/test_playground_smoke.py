"""The playground starts on a database with nothing of its own yet, and answers."""

from __future__ import annotations

from fastapi.testclient import TestClient
from playground_helpers import LOOPBACK_BASE, settings_for

from playground.app import create_app
from playground.db import migrations


def test_starts_on_a_fresh_database_and_answers(db_url: str) -> None:
    with TestClient(create_app(settings_for(db_url)), base_url=LOOPBACK_BASE) as client:
        index = client.get("/")
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/static/vendor/htmx/htmx.min.js").status_code == 200
        assert client.get("/static/vendor/htmx-ext-sse/sse.js").status_code == 200
    assert index.status_code == 200
    assert "playground" in index.text
    assert "scripted" in index.text  # the page says which model is active
    assert "fake-64-s0" in index.text  # and which embedder


def test_migrations_are_numbered_and_applied_once(db_url: str) -> None:
    import asyncio

    import psycopg

    from playground.db import setup

    async def apply_twice() -> tuple[list[int], list[int]]:
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
            return await setup(conn), await setup(conn)

    first, second = asyncio.run(apply_twice())
    assert first == [m.version for m in migrations()] and second == []
