"""The three loaders on handmade files: one internal model, lenient parsing, every defect counted."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from eval_samples import write_beam, write_locomo, write_longmemeval

from bench.eval.conversation import LoadIssues
from bench.eval.loaders import (
    beam_dataset_name,
    beam_tier,
    flatten_beam_ids,
    load_beam,
    load_beam_tiered,
    load_locomo,
    load_longmemeval,
    load_sequences,
    parse_locomo_evidence,
)

pytestmark = pytest.mark.bench


def test_locomo_normalises_sessions_turns_and_questions(tmp_path: Path) -> None:
    data = load_locomo(write_locomo(tmp_path, filler_sessions=1))
    [conv] = data.conversations
    assert conv.id == "conv-test" and conv.dataset == "locomo"
    assert [s.id for s in conv.sessions] == ["session_1", "session_2"]
    first = conv.turns[0]
    assert (first.id, first.speaker, first.role) == ("D1:1", "Ana", "user")
    assert first.timestamp == datetime(2023, 1, 3, 13, 0, tzinfo=UTC)
    # both speakers are people: both are user turns, and order survives in the timestamps
    assert {t.role for t in conv.turns} == {"user"}
    assert conv.turns[1].timestamp > first.timestamp
    # a shared photo is kept as its caption
    assert conv.turn_by_id["D1:4"].text.endswith("[shares a photo: a photo of a cello leaning on a chair]")
    by_question = {q.question: q for q in conv.questions}
    assert by_question["What is the name of Ana's cat?"].type == "single-hop"
    assert by_question["Cello and parrots?"].judge_prompt == "temporal"
    assert by_question["Cello and parrots?"].reference == "2023"
    adversarial = by_question["Which parrots does Ana's sister breed?"]
    assert (
        adversarial.abstention
        and adversarial.judge_prompt == "abstention"
        and adversarial.type == "adversarial"
    )
    assert "grey parrots" in adversarial.reference


def test_locomo_malformed_evidence_is_repaired_or_counted(tmp_path: Path) -> None:
    data = load_locomo(write_locomo(tmp_path, filler_sessions=1))
    evidence = {q.question: q.evidence_ids for q in data.questions}
    assert evidence["Cat and climbing?"] == ("D1:1", "D1:3")  # space-joined
    assert evidence["Cello and parrots?"] == ("D1:4", "D1:2")  # "; "-joined
    assert evidence["Which gym does Ana like?"] == ("D1:3",)  # "D:1:3"
    assert evidence["What pet did Ana adopt?"] == ("D1:1",)  # "D1:01"
    assert evidence["Broken evidence?"] == ()
    counts = data.issues.counts
    assert counts["evidence strings holding several ids (split)"] == 2
    assert counts["evidence ids repaired (format)"] == 2
    assert counts["evidence unresolved: malformed"] == 1  # "D"
    assert counts["evidence unresolved: no such turn"] == 1  # "D9:9"


def test_locomo_evidence_parser_directly() -> None:
    issues = LoadIssues()
    known = {"D8:6", "D9:17", "D30:5"}
    assert parse_locomo_evidence(["D8:6; D9:17", "D30:05", "D", "D99:1", "D8:6"], known, issues, "q") == (
        "D8:6",
        "D9:17",
        "D30:5",
    )
    assert issues.counts["evidence unresolved: malformed"] == 1
    assert issues.counts["evidence unresolved: no such turn"] == 1
    assert issues.examples["evidence ids repaired (format)"] == ["q: 'D30:05' -> D30:5"]


def test_beam_loads_batches_anchors_and_every_id_shape(tmp_path: Path) -> None:
    data = load_beam(write_beam(tmp_path))
    [conv] = data.conversations
    assert conv.id == "beam-1" and [s.id for s in conv.sessions] == ["batch-1", "batch-2"]
    first = conv.turns[0]
    assert first.text == "I am building a budget tracker in Flask."  # the "->-> 1,0" marker is gone
    assert first.timestamp is not None and first.timestamp.date() == datetime(2024, 1, 10).date()
    assert conv.turn_by_id["8"].timestamp.date() == datetime(2024, 2, 20).date()  # type: ignore[union-attr]
    assert conv.turn_by_id["1"].role == "assistant"
    questions = {q.type: q for q in reversed(conv.questions)}  # the first of each type
    ku = questions["knowledge_update"]
    assert (ku.stale_ids, ku.current_ids, ku.evidence_ids) == (("2",), ("20",), ("20",))
    assert ku.judge_prompt == "knowledge-update"
    assert questions["abstention"].abstention and questions["abstention"].evidence_ids == ()
    assert "cousin" in questions["abstention"].reference
    assert questions["event_ordering"].evidence_ids == ("0", "2", "4")  # nested list
    assert questions["temporal_reasoning"].evidence_ids == ("0", "20")  # dict, with "chat_id: 20"
    assert questions["preference_following"].evidence_ids == ()  # id 999 does not exist
    assert "minimal dependencies" in questions["preference_following"].reference
    # a knowledge update citing one message as both values keeps its evidence but no stale id
    defect = [q for q in conv.questions if q.type == "knowledge_update"][1]
    assert (defect.stale_ids, defect.current_ids) == ((), ("4",))
    counts = data.issues.counts
    assert counts["knowledge updates citing one message as stale and current"] == 1
    assert counts["evidence in nested lists (flattened)"] == 1
    assert counts["evidence ids repaired (format)"] == 1
    assert counts["evidence unresolved: no such turn"] == 1
    assert counts["questions left without evidence"] == 1


def test_beam_ids_say_the_tier_the_folder_names(tmp_path: Path) -> None:
    assert [beam_tier(p) for p in ("data/beam/100K", "beam/500K/", "beam/1M", "beam/500K/11")] == [
        "100k",
        "500k",
        "1m",
        "500k",  # one chat's folder: its parent names the tier
    ]
    assert beam_tier("data/chats") is None and beam_dataset_name(None) == "beam"
    tiers = {}
    for tier in ("100K", "500K", "1M"):
        folder = tmp_path / tier
        shutil.copytree(write_beam(tmp_path / "source"), folder, dirs_exist_ok=True)
        tiers[tier] = load_beam_tiered(folder)
    # chat 1 of each tier is its own conversation, and every question id says which
    assert [d.name for d in tiers.values()] == ["beam-100k", "beam-500k", "beam-1m"]
    assert [d.conversations[0].id for d in tiers.values()] == ["beam-100k-1", "beam-500k-1", "beam-1m-1"]
    assert all(q.id.startswith("beam-500k-1:") for q in tiers["500K"].questions)
    assert tiers["1M"].conversations[0].dataset == "beam-1m"
    # one chat's folder alone, and the library call without a tier, keep the plain ids
    assert load_beam_tiered(tmp_path / "500K" / "1").conversations[0].id == "beam-500k-1"
    assert load_beam(tmp_path / "500K").conversations[0].id == "beam-1"


def test_beam_id_flattening_accepts_each_shape() -> None:
    issues = LoadIssues()
    assert flatten_beam_ids([1, [2, [3]], {"a": [4], "b": 5}, "6", 7.0, None], issues, "q") == [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
    assert flatten_beam_ids("Session 4: setup", issues, "q") == []
    assert issues.counts["evidence unresolved: malformed"] == 1


def test_longmemeval_format(tmp_path: Path) -> None:
    data = load_longmemeval(write_longmemeval(tmp_path))
    assert [c.id for c in data.conversations] == ["q-kayak", "q-boat_abs"]
    kayak, boat = data.questions
    assert kayak.evidence_ids == ("s-a:0",) and not kayak.abstention
    assert kayak.question_date == "2023/06/01 (Thu) 10:00" and kayak.judge_prompt == "default"
    conv = data.conversations[0]
    assert conv.turns[0].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert [t.role for t in conv.turns] == ["user", "assistant", "user", "assistant"]
    assert boat.abstention and boat.judge_prompt == "abstention" and boat.evidence_ids == ()
    assert data.issues.counts["session dates unparsed"] == 1


def test_sequences_read_as_knowledge_updates_of_two_kinds(tmp_path: Path) -> None:
    rows = [
        {
            "id": "s-budget",
            "kind": "update",
            "messages": ["Our budget is $100k.", "Any pasta recipes?", "Correction: budget is $120k."],
            "question": "What's our budget?",
            "current": "$120k",
            "stale": "$100k",
        },
        {
            "id": "s-sister",
            "kind": "lookalike",
            "messages": ["I work at SAP.", "My sister works at Siemens."],
            "question": "Where do I work?",
            "current": "SAP",
            "other": "Siemens",
        },
        {"id": "s-bad", "kind": "update", "messages": ["x"], "question": "?", "current": "y", "stale": "z"},
    ]
    path = tmp_path / "sequences.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    updates = load_sequences(path, "update")
    assert updates.name == "sequences-update" and [c.id for c in updates.conversations] == ["s-budget"]
    [conv] = updates.conversations
    assert [t.id for t in conv.turns] == ["m1", "m2", "m3"] and {t.role for t in conv.turns} == {"user"}
    assert conv.turns[0].timestamp < conv.turns[1].timestamp < conv.turns[2].timestamp
    [q] = conv.questions
    assert (q.stale_ids, q.current_ids, q.evidence_ids, q.reference) == (("m1",), ("m3",), ("m3",), "$120k")
    assert updates.issues.counts["sequences whose values are not in their messages"] == 1
    [look] = load_sequences(path, "lookalike").questions
    assert (look.current_ids, look.stale_ids, look.type) == (("m1",), ("m2",), "sequence-lookalike")
