"""Pages, partials and writes of the playground: they render, refuse bad input clearly, and forget."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from playground_helpers import (
    HTMX,
    LOOPBACK_BASE,
    ORIGIN,
    new_chat,
    play_db,
    playground_template,
    rows,
    scalar,
    send,
    settings_for,
    wait_until_idle,
)

from playground.app import create_app

__all__ = ["play_db", "playground_template"]  # fixtures


@pytest.fixture
def client(play_db: str) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(play_db, max_message_chars=200)), base_url=LOOPBACK_BASE) as c:
        yield c


def test_every_page_renders_with_a_strict_policy(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    send(client, chat, "Our budget is $100k per year.")
    send(client, chat, "What is our budget?")
    wait_until_idle(play_db)
    walkthrough = new_chat(client, "/walkthrough")
    for path in ("/", chat, f"{chat}/inspector", walkthrough, f"{walkthrough}/inspector"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert page.text.startswith("<!doctype html>")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "img-src 'self'" in csp
        assert not re.search(r"<script(?![^>]*\bsrc=)", page.text), "an inline script"
        assert not re.search(r"\s(style|on[a-z]+)=", page.text), "an inline style or event handler"
    page = client.get(chat).text
    assert "Our budget is $100k per year." in page and "From memory: Our budget is $100k per year." in page
    assert 'class="fact-text">Our budget is $100k per year.' in page  # an injected fact under our reply
    assert "search_memory" in page  # the stock lane's memory tool call
    assert "model call" in page and "tokens" in page
    assert "Step 1 is filled in below" in client.get(walkthrough).text


def test_partials_are_fragments(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    turn = send(client, chat, "Our budget is $100k per year.")
    wait_until_idle(play_db)
    walkthrough = new_chat(client, "/walkthrough")
    chat_id, walkthrough_id = chat.rsplit("/", 1)[1], walkthrough.rsplit("/", 1)[1]
    paths = [
        "/partials/status",
        "/partials/chats",
        f"/partials/chats/{chat_id}/turns",
        f"/partials/chats/{chat_id}/turns/{turn}",
        f"/partials/chats/{chat_id}/composer",
        f"/partials/chats/{chat_id}/inspector",
        f"/partials/chats/{chat_id}/header",
        f"/partials/chats/{walkthrough_id}/walkthrough",
    ]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, path
        assert "<html" not in response.text and response.text.strip(), path
    turn_html = client.get(f"/partials/chats/{chat_id}/turns/{turn}").text
    assert f'id="turn-{turn}"' in turn_html and f'id="text-{turn}-beads"' in turn_html
    assert client.get(f"/partials/chats/{chat_id}/walkthrough").status_code == 404  # not a walkthrough


def test_bad_input_gets_a_clear_4xx_and_stores_nothing(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    for text in ("", "   \n\t ", "x" * 201):
        response = client.post(f"{chat}/messages", data={"text": text, "idempotency_key": "k"}, headers=HTMX)
        assert response.status_code == 422
        assert "<html" not in response.text and 'id="composer"' in response.text
    assert "too long: 201 characters" in response.text
    huge = client.post(
        f"{chat}/messages",
        content=b"text=" + b"x" * 20_000,
        headers={**HTMX, "content-type": "application/x-www-form-urlencoded"},
    )
    assert huge.status_code == 413
    json_body = client.post(f"{chat}/messages", json={"text": "hi"}, headers=HTMX)
    assert json_body.status_code == 415
    assert scalar(play_db, "SELECT count(*) FROM playground.turn_worker") == 0
    assert scalar(play_db, "SELECT count(*) FROM playground.messages") == 0

    unknown = f"/chats/{uuid.uuid4()}"
    assert client.get(unknown).status_code == 404
    assert client.get(f"{unknown}/inspector").status_code == 404
    assert client.get(f"/partials{unknown}/turns").status_code == 404
    assert client.post(f"{unknown}/messages", data={"text": "hi"}, headers=HTMX).status_code == 404
    assert client.get("/chats/not-a-uuid").status_code == 422
    assert client.get(f"{chat}/messages").status_code == 405
    assert client.put("/chats", headers=ORIGIN).status_code == 405


def test_cross_origin_writes_are_refused(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    for headers in (
        {"origin": "http://evil.example"},
        {"referer": "http://evil.example/page"},
        {},
        {"origin": "null"},
    ):
        response = client.post(f"{chat}/messages", data={"text": "hi"}, headers=headers)
        assert response.status_code == 403, headers
        assert client.post("/chats", headers=headers).status_code == 403
    same_site_referer = client.post(
        f"{chat}/messages",
        data={"text": "hi"},
        headers={"referer": f"{LOOPBACK_BASE}{chat}"},
        follow_redirects=False,
    )
    assert same_site_referer.status_code == 303
    assert scalar(play_db, "SELECT count(*) FROM playground.chats") == 1


def test_user_and_model_text_is_rendered_as_text(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    send(client, chat, '<script>alert("x")</script> What is <b>this</b>?')
    wait_until_idle(play_db)
    page = client.get(chat).text
    assert "<script>alert" not in page and "<b>this</b>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_rename_list_and_delete_forgets_both_lanes(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    chat_id = chat.rsplit("/", 1)[1]
    renamed = client.post(f"{chat}/rename", data={"title": "  Vector   databases "}, headers=HTMX)
    assert (
        renamed.status_code == 200
        and "Vector databases" in renamed.text
        and 'hx-swap-oob="true"' in renamed.text
    )
    assert client.post(f"{chat}/rename", data={"title": "   "}, headers=HTMX).status_code == 422
    assert "Vector databases" in client.get("/partials/chats").text

    send(client, chat, "Our budget is $100k per year.")
    send(client, chat, "What is our budget?")
    wait_until_idle(play_db)
    session = uuid.UUID(chat_id).hex
    threads = [
        t
        for row in rows(play_db, "SELECT stock_thread_id, beads_thread_id FROM playground.turn_worker")
        for t in row
    ]
    assert scalar(play_db, "SELECT count(*) FROM beads.facts WHERE session_id = %s", (session,)) > 0
    assert (
        scalar(
            play_db, "SELECT count(*) FROM lg_fake_64_s0.store WHERE prefix = %s", (f"memories.{session}",)
        )
        == 1
    )
    assert (
        scalar(
            play_db, "SELECT count(DISTINCT thread_id) FROM checkpoints WHERE thread_id = ANY(%s)", (threads,)
        )
        == 4
    )

    deleted = client.post(f"{chat}/delete", headers=HTMX)
    assert deleted.status_code == 204 and deleted.headers["hx-redirect"] == "/"
    assert client.get(chat).status_code == 404
    assert scalar(play_db, "SELECT count(*) FROM beads.facts WHERE session_id = %s", (session,)) == 0
    assert scalar(play_db, "SELECT count(*) FROM beads.namespaces WHERE session_id = %s", (session,)) == 0
    assert scalar(play_db, "SELECT count(*) FROM lg_fake_64_s0.store WHERE prefix LIKE 'memories.%%'") == 0
    assert scalar(play_db, "SELECT count(*) FROM checkpoints WHERE thread_id = ANY(%s)", (threads,)) == 0
    assert scalar(play_db, "SELECT count(*) FROM playground.events") == 0
    assert client.post(f"{chat}/delete", headers=HTMX).status_code == 404


def test_the_inspector_shows_sub_agents_and_their_rollups(client: TestClient, play_db: str) -> None:
    from memory.doors.tools import memory_tools
    from memory.embedders import FakeEmbedder
    from memory.graph.store import FactStore
    from memory.postgres.connection import open_pool

    chat = new_chat(client)
    session = scalar(
        play_db, "SELECT session_id FROM playground.chats WHERE id = %s", (chat.rsplit("/", 1)[1],)
    )
    with open_pool(play_db, max_size=2) as pool:
        store = FactStore(pool, FakeEmbedder(64))
        store.setup()
        root = store.root(session)
        child = store.fork(root, "qdrant", "researcher_qdrant")
        store.remember(child, "Qdrant runs on-prem with Docker.")
        conclude = next(
            t
            for t in memory_tools(store, child, "researcher_qdrant", "subagent")
            if t.name == "conclude_task"
        )
        assert conclude.invoke({"summary": "Qdrant can be self-hosted."}).startswith("Concluded")
    page = client.get(f"{chat}/inspector")
    assert page.status_code == 200
    assert "agent researcher_qdrant · 1 fact (1 active)" in page.text  # the fork's node in the tree
    # its rollup hangs under that node, nested in the root's
    node = page.text[page.text.index("agent researcher_qdrant") :]
    assert re.search(
        r'<div class="rollup"><span class="chip">conclude_task</span> Qdrant can be self-hosted\.</div>', node
    )
