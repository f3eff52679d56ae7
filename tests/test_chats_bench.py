"""The new-chats bench: how it reads a reply and a block, and one chat through the real app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.chats import Chat, load_chats, main, names, pick, read_block, read_reply, run_chat
from bench.reliability.servers import app_process, create_database, drop_database

pytestmark = pytest.mark.bench


CHAT = Chat(
    id="sync",
    kind="update",
    messages=("Our weekly sync is on Tuesdays.", "The weekly sync moved to Thursdays.", "When is the sync?"),
    expect=("Thursday",),
    wrong=("Tuesday",),
)


def test_a_value_matches_whole_with_its_unit_or_plural() -> None:
    assert names("at 9:30am", ["9:30"]) and not names("at 19:30", ["9:30"])
    assert names("50mg once a day", ["50"]) and not names("150mg", ["50"])
    assert names("on Thursdays", ["Thursday"]) and names("It costs $4,200.", ["4,200"])
    assert not names("42,000 a year", ["4,200"])


def test_a_reply_is_current_stale_both_neither_or_no_answer() -> None:
    assert read_reply("On Thursdays.", CHAT) == "current"
    assert read_reply("Tuesdays, as before.", CHAT) == "stale"
    assert read_reply("It moved from Tuesday to Thursday.", CHAT) == "both"
    assert read_reply("I do not know.", CHAT) == "neither"
    assert read_reply('{"name": "web_search", "arguments": {"query": "sync"}}', CHAT) == "no_answer"


def test_a_block_is_read_as_a_small_model_reads_it() -> None:
    folded = "## Memory\nheader\n- (today 10:00) The sync moved to Thursdays. | earlier (today 09:00): Sync on Tuesdays."
    assert read_block(folded, CHAT) == {
        "lines": 1,
        "first_topical": "current",
        "current_shown": True,
        "wrong_as_plain_lines": 0,  # folded in as the earlier value, not a line of its own
    }
    plain = "## Memory\n- (today 09:00) Sync on Tuesdays.\n- (today 10:00) The sync moved to Thursdays."
    assert read_block(plain, CHAT)["first_topical"] == "wrong"
    assert read_block(plain, CHAT)["wrong_as_plain_lines"] == 1
    marked = "## Memory\n- (today 09:00) Sync on Tuesdays. (an older line: a later one on this gives a newer value)"
    assert read_block(marked, CHAT)["wrong_as_plain_lines"] == 0


def test_the_chat_sets_parse_and_are_balanced() -> None:
    for name in ("chats_tune.jsonl", "chats_holdout.jsonl"):
        chats = load_chats(Path("bench/data") / name)
        assert len(chats) == 24
        assert sum(c.kind == "update" for c in chats) == 16
        assert sum(c.kind == "update" and c.cue is False for c in chats) >= 5
        assert sum(bool(c.old_said_twice) for c in chats) >= 3


def test_one_chat_through_both_lanes_of_the_real_app(pg_server_url: str) -> None:
    db = create_database(pg_server_url, prefix="chatsbench")
    try:
        with app_process(db) as app:  # the scripted model and the fake embedder (APP_DEFAULTS)
            row = run_chat(app.base, db, CHAT)
    finally:
        drop_database(pg_server_url, db)
    assert row["reading"]["beads"] == "current", row["replies"]
    assert row["block"]["first_topical"] == "current" and "Thursdays" in row["block_text"]
    assert len(row["seconds_per_message"]) == 3
    with pytest.raises(ValueError):
        Chat.from_json({"id": "x", "kind": "other", "messages": ["a", "b"], "expect": ["1"], "wrong": ["2"]})


def test_a_run_of_some_chats_keeps_the_rows_of_the_others(tmp_path: Path) -> None:
    chats = Path(__file__).parent / "data" / "chats_three.jsonl"
    first, second = (c.id for c in load_chats(chats)[:2])
    for only in (first, second):  # one chat, then another: the second run adds to the first's rows
        assert (
            main(["--chats", str(chats), "--out", str(tmp_path), "--model", "scripted", "--ids", only]) == 0
        )
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [first, second]
    assert f"| {first} |" in (tmp_path / "summary.md").read_text()


def test_chosen_chats_run_in_the_order_given_and_an_unknown_id_is_refused() -> None:
    chats = load_chats(Path("bench/data/chats_holdout.jsonl"))
    assert [c.id for c in pick(chats, ["b17", "b01", "b17", "b05"])] == ["b17", "b01", "b05"]
    with pytest.raises(ValueError, match="b99"):
        pick(chats, ["b01", "b99"])
