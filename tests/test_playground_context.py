"""The playground shows pinned facts (with pin / unpin buttons in the inspector) and, under each of
our lane's replies, the context assembly of its latest model call."""

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
    send,
    settings_for,
    wait_until_idle,
)

from playground.app import create_app

__all__ = ["play_db", "playground_template"]  # fixtures

RULE = "I want every answer in metric units."
STANDING_RULE = "Always answer in metric units."


@pytest.fixture
def client(play_db: str) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(play_db)), base_url=LOOPBACK_BASE) as c:
        yield c


def fact_id_of(play_db: str, body: str) -> str:
    [(fid,)] = rows(play_db, "SELECT id FROM beads.facts WHERE body = %s", (body,))
    return str(fid)


def test_pin_from_the_inspector_and_see_it_under_the_next_reply(client: TestClient, play_db: str) -> None:
    chat = new_chat(client)
    send(client, chat, RULE)
    wait_until_idle(play_db)
    fid = fact_id_of(play_db, RULE)
    short = fid.replace("-", "")[:8]

    page = client.get(f"{chat}/inspector").text
    assert "Nothing is pinned" in page
    assert f'action="{chat}/facts/{fid}/pin"' in page and f'id="pin-{short}"' in page

    pinned = client.post(f"{chat}/facts/{fid}/pin", headers=HTMX)
    assert pinned.status_code == 200 and "<html" not in pinned.text  # the inspector partial
    assert f'id="pinned-{short}"' in pinned.text and f'id="unpin-{short}"' in pinned.text
    pinned_section = pinned.text.split('id="pinned"', 1)[1].split("</section>", 1)[0]
    assert RULE in pinned_section and "pinned by user" in pinned_section
    assert rows(play_db, "SELECT pinned_by FROM beads.pins") == [("user",)]

    turn = send(client, chat, "What's a good name for a cat?")  # unrelated: only the pin can show it
    wait_until_idle(play_db)
    chat_id = chat.rsplit("/", 1)[1]
    html = client.get(f"/partials/chats/{chat_id}/turns/{turn}").text
    facts = html.split(f'id="facts-{turn}-beads"', 1)[1]
    assert "Pinned facts" in facts and RULE in facts
    assert f'id="assembly-{turn}-beads"' in facts and "Context assembly:" in facts
    assert re.search(r"<td>pinned</td><td class=\"num\">400</td><td class=\"num\">[1-9]\d*</td>", facts)
    assert "Gate: injection is always on (mode always)." in facts
    assert "Capture: eager: each message stored as it arrived." in facts
    assert client.get(chat).status_code == 200  # the full page renders the same partials

    # a plain form (no JavaScript) gets a redirect back to the inspector
    unpinned = client.post(f"{chat}/facts/{fid}/unpin", headers=ORIGIN, follow_redirects=False)
    assert unpinned.status_code == 303 and unpinned.headers["location"] == f"{chat}/inspector"
    assert rows(play_db, "SELECT * FROM beads.pins") == []
    assert "Nothing is pinned" in client.get(f"{chat}/inspector").text

    # a standing instruction is pinned as the user says it, and the inspector says by whom
    send(client, chat, STANDING_RULE)
    wait_until_idle(play_db)
    assert rows(play_db, "SELECT pinned_by FROM beads.pins") == [("capture",)]
    assert "pinned by capture" in client.get(f"{chat}/inspector").text


def test_pin_refuses_other_chats_facts_bad_actions_and_cross_origin_posts(
    client: TestClient, play_db: str
) -> None:
    chat, other = new_chat(client), new_chat(client)
    send(client, chat, RULE)
    wait_until_idle(play_db)
    fid = fact_id_of(play_db, RULE)
    assert client.post(f"{other}/facts/{fid}/pin", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/facts/{uuid.uuid4()}/pin", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/facts/{fid}/star", headers=HTMX).status_code == 422
    assert (
        client.post(f"{chat}/facts/{fid}/pin", headers={"origin": "http://evil.example"}).status_code == 403
    )
    assert rows(play_db, "SELECT * FROM beads.pins") == []
