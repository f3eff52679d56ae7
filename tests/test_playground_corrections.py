"""Corrections capture makes by itself, in the playground: the inspector lists each automatic supersede
with its reason, an undo button takes one back (kept as history), and the setting turns them off."""

from __future__ import annotations

import html
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
from playground.settings import PlaygroundSettings

__all__ = ["play_db", "playground_template"]  # fixtures

OLD = "Our budget is $100k per year."
NEW = "Correction: our budget is $120k per year."


@pytest.fixture
def client(play_db: str) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(play_db)), base_url=LOOPBACK_BASE) as c:
        yield c


def correct_the_budget(client: TestClient, play_db: str) -> str:
    chat = new_chat(client)
    send(client, chat, OLD)
    wait_until_idle(play_db)
    send(client, chat, NEW)
    wait_until_idle(play_db)
    return chat


def fact(play_db: str, body: str) -> tuple[str, str]:
    """The id and status of the one user claim with this body."""
    [(fid, status)] = rows(
        play_db, "SELECT id, status FROM beads.facts WHERE body = %s AND kind = 'user_input'", (body,)
    )
    return str(fid), status


def section(html: str, element_id: str) -> str:
    return html.split(f'id="{element_id}"', 1)[1].split("</section>", 1)[0]


def injected_texts(html: str) -> list[str]:
    return re.findall(r'<span class="fact-text">([^<]*)</span>', html)


def test_the_inspector_lists_an_automatic_correction_and_undo_keeps_it_as_history(
    client: TestClient, play_db: str
) -> None:
    chat = correct_the_budget(client, play_db)
    old_id, old_status = fact(play_db, OLD)
    new_id, _ = fact(play_db, NEW)
    assert old_status == "superseded"
    [(reason,)] = rows(
        play_db,
        "SELECT reason FROM beads.edges WHERE relation = 'supersedes' AND automatic AND src = %s AND dst = %s",
        (new_id, old_id),
    )
    assert reason
    shown = html.escape(reason, quote=False)  # as the page writes it

    page = client.get(f"{chat}/inspector")
    assert page.status_code == 200
    listed = section(page.text, "corrections")
    key = f"{uuid.UUID(new_id).hex[:8]}-{uuid.UUID(old_id).hex[:8]}"
    item = listed.split(f'id="correction-{key}"', 1)[1].split("</li>", 1)[0]
    assert f'<s class="fact-text">{OLD}</s>' in item and f'<span class="fact-text">{NEW}</span>' in item
    assert shown in item and "undone" not in item
    undo = f"{chat}/corrections/{new_id}/{old_id}/undo"
    assert f'hx-post="{undo}"' in item and f'id="undo-{key}"' in item
    # the chain marks its link as automatic, with the reason
    chains = page.text.split("<h2>Supersede chains</h2>", 1)[1].split("</section>", 1)[0]
    assert f"automatically ({shown})" in chains and f'<s class="fact-text">{OLD}</s>' in chains

    # a later question: the corrected value reaches the model as current, the old one does not
    turn = send(client, chat, "What is our budget?")
    wait_until_idle(play_db)
    chat_id = chat.rsplit("/", 1)[1]
    injected = client.get(f"/partials/chats/{chat_id}/turns/{turn}").text
    injected = injected.split(f'id="facts-{turn}-beads"', 1)[1].split(f'id="assembly-{turn}-beads"', 1)[0]
    texts = injected_texts(injected)
    assert any("$120k" in t for t in texts), texts
    assert not any("$100k" in t for t in texts), texts
    assert "automatically" in injected  # the hit's flag names the replaced claim

    undone = client.post(undo, headers=HTMX)
    assert undone.status_code == 200 and "<html" not in undone.text  # the inspector partial
    assert fact(play_db, OLD)[1] == "active"
    assert fact(play_db, NEW)[1] == "active"
    item = section(undone.text, "corrections").split(f'id="correction-{key}"', 1)[1].split("</li>", 1)[0]
    assert "undone on" in item and f'id="undo-{key}"' not in item and shown in item
    chains = undone.text.split("<h2>Supersede chains</h2>", 1)[1].split("</section>", 1)[0]
    assert "automatically" not in chains
    assert rows(play_db, "SELECT count(*) FROM beads.edges WHERE automatic AND undone_at IS NOT NULL") == [
        (1,)
    ]

    # once undone it cannot be undone again; a plain form gets a redirect back to the inspector
    assert client.post(undo, headers=HTMX).status_code == 409
    assert client.post(undo, headers=ORIGIN, follow_redirects=False).status_code == 409
    assert "undone on" in section(client.get(f"{chat}/inspector").text, "corrections")


def test_undo_refuses_other_chats_unknown_edges_bad_ids_and_cross_origin_posts(
    client: TestClient, play_db: str
) -> None:
    chat = correct_the_budget(client, play_db)
    other = new_chat(client)
    old_id, _ = fact(play_db, OLD)
    new_id, _ = fact(play_db, NEW)
    assert client.post(f"{other}/corrections/{new_id}/{old_id}/undo", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/corrections/{old_id}/{new_id}/undo", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/corrections/{uuid.uuid4()}/{old_id}/undo", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/corrections/{new_id}/not-an-id/undo", headers=HTMX).status_code == 422
    assert (
        client.post(f"/chats/{uuid.uuid4()}/corrections/{new_id}/{old_id}/undo", headers=HTMX).status_code
        == 404
    )
    evil = {"origin": "http://evil.example"}
    assert client.post(f"{chat}/corrections/{new_id}/{old_id}/undo", headers=evil).status_code == 403
    assert fact(play_db, OLD)[1] == "superseded"  # nothing was undone

    # a plain form (no JavaScript) undoes too, and is sent back to the inspector
    undone = client.post(f"{chat}/corrections/{new_id}/{old_id}/undo", headers=ORIGIN, follow_redirects=False)
    assert undone.status_code == 303 and undone.headers["location"] == f"{chat}/inspector"
    assert fact(play_db, OLD)[1] == "active"


def test_with_the_setting_off_capture_corrects_nothing_by_itself(play_db: str) -> None:
    with TestClient(
        create_app(settings_for(play_db, auto_supersede=False)), base_url=LOOPBACK_BASE
    ) as client:
        chat = correct_the_budget(client, play_db)
        assert rows(play_db, "SELECT count(*) FROM beads.edges WHERE automatic") == [(0,)]
        # what corrects the budget now is the agent's remember_fact, never capture's own claim
        old_id, _ = fact(play_db, OLD)
        assert rows(
            play_db,
            "SELECT f.source FROM beads.edges e JOIN beads.facts f ON f.id = e.src"
            " WHERE e.relation = 'supersedes' AND e.dst = %s",
            (old_id,),
        ) == [("remember_tool",)]
        page = client.get(f"{chat}/inspector").text
        listed = section(page, "corrections")
        assert "Capture has corrected nothing by itself" in listed and "Undo" not in listed
        assert "automatically" not in page


def test_the_setting_reads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAYGROUND_AUTO_SUPERSEDE", raising=False)
    assert PlaygroundSettings(_env_file=None).auto_supersede is True  # type: ignore[call-arg]
    monkeypatch.setenv("PLAYGROUND_AUTO_SUPERSEDE", "false")
    assert PlaygroundSettings(_env_file=None).auto_supersede is False  # type: ignore[call-arg]


def test_a_proposal_is_accepted_or_dismissed_in_the_inspector(
    play_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.graph import supersession

    # a rule measured below the bar proposes instead of writing the edge (and the model, offered no
    # memory tools, corrects nothing itself)
    monkeypatch.setattr(supersession, "PROPOSING_RULES", frozenset({"strong cue, short messages"}))
    with TestClient(create_app(settings_for(play_db, memory_tools="off")), base_url=LOOPBACK_BASE) as client:
        proposal_round_trip(client, play_db)


def proposal_round_trip(client: TestClient, play_db: str) -> None:
    chat = correct_the_budget(client, play_db)
    old_id, old_status = fact(play_db, OLD)
    new_id, _ = fact(play_db, NEW)
    assert old_status == "active"
    listed = section(client.get(f"{chat}/inspector").text, "proposed-corrections")
    key = f"{uuid.UUID(new_id).hex[:8]}-{uuid.UUID(old_id).hex[:8]}"
    item = listed.split(f'id="proposal-{key}"', 1)[1].split("</li>", 1)[0]
    assert f'id="accept-{key}"' in item and f'id="dismiss-{key}"' in item and "cue: correction" in item

    other = new_chat(client)
    assert client.post(f"{other}/proposals/{new_id}/{old_id}/accept", headers=HTMX).status_code == 404
    assert client.post(f"{chat}/proposals/{new_id}/{old_id}/maybe", headers=HTMX).status_code == 422
    accepted = client.post(f"{chat}/proposals/{new_id}/{old_id}/accept", headers=HTMX)
    assert accepted.status_code == 200 and "<html" not in accepted.text
    assert fact(play_db, OLD)[1] == "superseded"
    assert f'id="proposal-{key}"' not in accepted.text
    assert client.post(f"{chat}/proposals/{new_id}/{old_id}/dismiss", headers=HTMX).status_code == 404


def test_this_replaces_that_links_two_claims_the_block_folds(play_db: str) -> None:
    with TestClient(
        create_app(settings_for(play_db, auto_supersede=False)), base_url=LOOPBACK_BASE
    ) as client:
        chat = new_chat(client)
        send(client, chat, "Our weekly sync is on Tuesdays.")
        wait_until_idle(play_db)
        send(client, chat, "Our weekly sync is on Thursdays.")
        wait_until_idle(play_db)
        old_id, _ = fact(play_db, "Our weekly sync is on Tuesdays.")
        new_id, _ = fact(play_db, "Our weekly sync is on Thursdays.")
        key = f"{uuid.UUID(new_id).hex[:8]}-{uuid.UUID(old_id).hex[:8]}"
        listed = section(client.get(f"{chat}/inspector").text, "proposed-corrections")
        item = listed.split(f'id="proposal-{key}"', 1)[1].split("</li>", 1)[0]
        assert f'id="replaces-{key}"' in item and "ranking reads them as one slot" in item
        done = client.post(f"{chat}/replaces/{new_id}/{old_id}", headers=HTMX)
        assert done.status_code == 200
        assert fact(play_db, "Our weekly sync is on Tuesdays.")[1] == "superseded"
        assert f'id="proposal-{key}"' not in done.text
        other = new_chat(client)
        assert client.post(f"{other}/replaces/{old_id}/{new_id}", headers=HTMX).status_code == 404
