"""`beads-memory show` in an 80-column terminal (every text whole, wrapped) and as JSON."""

from __future__ import annotations

import json
import re

import pytest
from psycopg_pool import ConnectionPool
from rich.console import Console

from memory.doors.cli import main
from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore

SESSION = "budget-review"
OLD = "Our budget is $100k per year for the vector database."
NEW = "Correction: our budget is now $120k per year, approved by finance last week after the review."


@pytest.fixture
def session(pool: ConnectionPool) -> FactStore:
    store = FactStore(pool, FakeEmbedder(64))
    store.setup()
    root = store.root(SESSION)
    store.capture_message(root, OLD, message_id="m1", thread_id="t-1")
    captured = store.capture_message(root, NEW, message_id="m2", thread_id="t-2")
    assert captured.superseded  # the correction replaced the old value on capture
    return store


def show(db_url: str, *extra: str, width: int = 80) -> str:
    console = Console(record=True, width=width)
    argv = ["show", SESSION, "--database-url", db_url, "--embedder", "fake-64", *extra]
    assert main(argv, console=console) == 0
    return console.export_text()


def words(text: str) -> str:
    return " ".join(text.split())


def test_at_80_columns_nothing_is_cut_and_every_text_wraps_whole(session: FactStore, db_url: str) -> None:
    text = show(db_url, "--all", "--query", "what is our budget?")
    assert all(len(line.rstrip()) <= 80 for line in text.splitlines())
    assert "…" not in text
    flat = words(text)
    # each fact's text reads in one piece: in the chain, in the facts, and ranked for the query
    assert flat.count(OLD) >= 2 and flat.count(NEW) >= 3, text
    ranked = flat[flat.index("Ranked for: what is our budget?") :]
    assert re.search(
        r"1 \w{8} distance \d\.\d{3} score \d\.\d{3} user_input passive_capture " + re.escape(NEW), ranked
    )
    assert "flags: resolved from superseded" in ranked


def test_a_wide_terminal_keeps_the_tables(session: FactStore, db_url: str) -> None:
    text = show(db_url, width=200)
    assert any(NEW in line and "│" in line for line in text.splitlines())


def test_json_holds_the_same_record(session: FactStore, db_url: str) -> None:
    document = json.loads(show(db_url, "--json", "--all", "--query", "what is our budget?", width=80))
    assert document["session"] == SESSION and document["embedder"] == "fake-64-s0"
    assert {(f["text"], f["status"], f["current"]) for f in document["facts"]} == {
        (OLD, "superseded", False),
        (NEW, "active", True),
    }
    [chain] = document["chains"]
    assert [f["text"] for f in chain] == [OLD, NEW]
    [root] = document["namespaces"]
    assert (root["path"], root["facts"], root["active"]) == ([], 2, 1)
    assert sum(row["facts"] for row in document["counts"]) == 2
    search = document["search"]
    assert search["query"] == "what is our budget?" and not search["not_in_memory"]
    top = search["hits"][0]
    assert (top["rank"], top["text"], top["resolved_from"]["text"]) == (1, NEW, OLD)
    assert top["thread_id"] == "t-2" and top["message_id"] == "m2"
    # without --all, only what is current
    current = json.loads(show(db_url, "--json"))
    assert [f["text"] for f in current["facts"]] == [NEW] and current["search"] is None
