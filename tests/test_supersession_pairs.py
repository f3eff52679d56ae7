"""The labeled supersession pairs are well-formed, BEAM pairs hold ids only, and the measurement runs
end to end on real Postgres (the fake embedder: no model to load)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from bench.eval import supersession as measure
from bench.eval import supersession_pairs as pairs_lib
from bench.eval.cli import main
from bench.eval.supersession_pairs import KEEP_BOTH, LABELS, SUPERSEDE, Pair
from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore
from memory.model import Kind
from tests.eval_samples import beam_chat, beam_questions

pytestmark = pytest.mark.bench


def test_own_pairs_are_well_formed() -> None:
    rows = pairs_lib.read_jsonl(pairs_lib.OWN_PAIRS)
    assert pairs_lib.own_pair_problems(rows) == []
    pairs = pairs_lib.load_own_pairs()
    assert len(pairs) >= 60
    assert len({p.id for p in pairs}) == len(pairs)
    assert {p.label for p in pairs} == set(LABELS)
    families = Counter(p.family for p in pairs)
    # corrections, look-alikes and additions are all there, each kind of look-alike the rule must not touch
    assert families["correction"] >= 30 and families["lookalike"] >= 20 and families["addition"] >= 3
    kinds = {p.category for p in pairs}
    for kind in ("lookalike/qualifier", "lookalike/person", "lookalike/entity", "lookalike/history"):
        assert kind in kinds
    assert all("Information Update" not in p.old[0] + p.new[0] for p in pairs)


def test_every_blind_set_is_well_formed_and_apart_from_the_others() -> None:
    ids: set[str] = {p.id for p in pairs_lib.load_own_pairs()}
    for source, path in {"ours-blind": pairs_lib.BLIND_PAIRS, **pairs_lib.BLIND_SETS}.items():
        assert pairs_lib.own_pair_problems(pairs_lib.read_jsonl(path)) == [], source
        pairs = pairs_lib.load_own_pairs(path, source=source)
        assert {p.label for p in pairs} == set(LABELS) and {p.source for p in pairs} == {source}
        assert not ids & {p.id for p in pairs}, f"{source} reuses another set's ids"
        ids |= {p.id for p in pairs}
        assert all("Information Update" not in p.old[0] + p.new[0] for p in pairs)


def test_own_pair_problems_are_named() -> None:
    rows = [
        {"id": "a", "category": "correction/money", "old": "x", "new": "y", "label": "keep_both"},
        {"id": "a", "category": "lookalike/person", "old": "x", "new": "y", "label": "maybe"},
        {
            "id": "b",
            "category": "addition",
            "old": "x",
            "new": "y",
            "label": "keep_both",
            "expected_old": "z",
        },
    ]
    problems = " | ".join(pairs_lib.own_pair_problems(rows))
    assert "corrections are labeled supersede" in problems
    assert "duplicate id" in problems
    assert "label must be one of" in problems
    assert "expected_old is not a substring" in problems


def test_beam_pair_file_holds_ids_only() -> None:
    specs = pairs_lib.load_beam_pair_specs()
    assert pairs_lib.beam_spec_problems(specs) == []
    assert len({s["id"] for s in specs}) == len(specs)
    for spec in specs:
        assert set(spec) <= pairs_lib.BEAM_FIELDS
        assert all(isinstance(i, str) and i.isdigit() for i in spec["old_ids"] + spec["new_ids"])
    assert {s["split"] for s in specs} == {"tune", "holdout"}


def _write_beam(tmp_path: Path) -> Path:
    questions = beam_questions()
    questions["contradiction_resolution"] = [
        {"question": "Is the team 5?", "source_chat_ids": [[20], [2]]},  # nested list, later one first
        {"question": "Deployed where?", "source_chat_ids": [4, 5]},  # cites an assistant message
    ]
    folder = tmp_path / "beam" / "1"
    folder.mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(beam_chat()), encoding="utf-8")
    (folder / "probing_questions.json").write_text(json.dumps(questions), encoding="utf-8")
    return folder.parent


def test_beam_specs_are_built_from_the_questions_and_resolved_from_the_data(tmp_path: Path) -> None:
    beam = _write_beam(tmp_path)
    specs = pairs_lib.build_beam_pair_specs(
        beam, previous=[{"id": "beam-1-knowledge_update-0", "check": "ok"}]
    )
    by_id = {s["id"]: s for s in specs}
    update = by_id["beam-1-knowledge_update-0"]
    assert (update["old_ids"], update["new_ids"]) == (["2"], ["20"])
    assert (update["label"], update["split"]) == (SUPERSEDE, "tune")
    assert update["check"] == "ok"  # the hand check survives a rebuild
    assert by_id["beam-1-knowledge_update-1"]["unresolved"] == "one message is cited as both statements"
    contradiction = by_id["beam-1-contradiction_resolution-0"]
    # cited later message first: the one said first is the old one
    assert (contradiction["old_ids"], contradiction["new_ids"]) == (["2"], ["20"])
    assert contradiction["label"] == KEEP_BOTH
    assert "assistant" in by_id["beam-1-contradiction_resolution-1"]["unresolved"]
    resolution = pairs_lib.resolve_beam_pairs(specs, beam)
    assert [p.id for p in resolution.pairs] == [
        "beam-1-knowledge_update-0",
        "beam-1-contradiction_resolution-0",
    ]
    first = resolution.pairs[0]
    assert first.old == ("My team has 5 engineers working on the tracker.",)  # BEAM's index marker stripped
    assert not first.texts_public
    assert len(resolution.unresolved) == 2


class EveryLaterClaimSupersedes(FactStore):
    """A stand-in rule, for the read-back only: each captured claim supersedes every user claim before it."""

    def capture_message(self, ns, text, **kwargs):  # type: ignore[no-untyped-def]
        earlier = [
            f
            for f in self.audit.session_facts(ns.session_id)
            if f.kind is Kind.USER_INPUT and f.head_id == f.id
        ]
        result = super().capture_message(ns, text, **kwargs)
        for new in (f for f in result.facts if f.kind is Kind.USER_INPUT):
            for old in earlier:
                self.supersede(new, old)
            break
        return result


def test_measure_reads_supersessions_back(pool: ConnectionPool) -> None:
    # the store's own rule off, where it has one: only the stand-in supersedes
    store = EveryLaterClaimSupersedes(
        pool, FakeEmbedder(64), supersede_min_similarity=-1.0, **measure.store_kwargs(False)
    )
    store.setup()
    pair = Pair(
        id="moved",
        source="ours",
        category="correction/multi",
        label=SUPERSEDE,
        old=("The review is on May 2. I sit on the panel.",),
        new=("The review is on May 9 now.",),
        old_ids=("old",),
        new_ids=("new",),
        expected_old="The review is on May 2.",
        expected_new="The review is on May 9",
    )
    row = measure.measure_pair(store, pair)
    assert row["predicted"] == SUPERSEDE and row["correct"]
    assert (row["facts_old"], row["facts_new"]) == (2, 1)
    assert {link["old"]["text"] for link in row["links"]} == {
        "The review is on May 2.",
        "I sit on the panel.",
    }
    assert row["expected_linked"] is True
    assert (row["user_claims_old"], row["user_claims_new"]) == (2, 1)
    assert not any(link["old"]["in_code"] or link["new"]["in_code"] for link in row["links"])
    hidden = measure.measure_pair(store, Pair(**{**_fields(pair), "id": "hidden", "texts_public": False}))
    assert all("text" not in link["old"] for link in hidden["links"])


def _fields(pair: Pair) -> dict:
    return {name: getattr(pair, name) for name in Pair.__slots__}


def test_reasons_of_pairs_whose_text_stays_out_keep_their_leading_words_only() -> None:
    assert measure.reason_kind("same slot (alarm set), value changed: 6:30 -> 8:00") == "same slot"
    assert measure.reason_kind('"quoted" first') == "(quoted)"
    assert measure.reason_kind(None) is None
    row = {"links": [{"old": {}, "new": {}, "reason": "state ended: no longer vegetarian"}]}
    assert measure.redacted(row)["links"][0]["reason"] == "state ended"


def test_figures_count_supersede_as_the_positive_class() -> None:
    rows = [
        {"label": SUPERSEDE, "predicted": SUPERSEDE},
        {"label": SUPERSEDE, "predicted": KEEP_BOTH},
        {"label": KEEP_BOTH, "predicted": SUPERSEDE},
        {"label": KEEP_BOTH, "predicted": KEEP_BOTH},
        {"label": KEEP_BOTH, "predicted": KEEP_BOTH},
    ]
    f = measure.figures(rows)
    assert (f["tp"], f["fp"], f["fn"], f["tn"]) == (1, 1, 1, 2)
    assert f["precision"] == 0.5 and f["recall"] == 0.5 and f["kept"] == pytest.approx(2 / 3)


def test_the_command_runs_end_to_end(db_url: str, tmp_path: Path) -> None:
    chosen = [
        r
        for r in pairs_lib.read_jsonl(pairs_lib.OWN_PAIRS)
        if r["id"] in {"rent-raised", "employer-me-vs-brother", "cello-too"}
    ]
    assert len(chosen) == 3
    own = pairs_lib.write_jsonl(tmp_path / "pairs.jsonl", chosen)
    beam = _write_beam(tmp_path)
    specs = pairs_lib.write_jsonl(tmp_path / "beam.jsonl", pairs_lib.build_beam_pair_specs(beam))
    out = tmp_path / "out"
    argv = [
        "supersession",
        "--pairs",
        str(own),
        "--beam",
        str(beam),
        "--beam-pairs",
        str(specs),
        "--beam-chats",
    ]
    argv += ["--out", str(out), "--embedder", "fake-64", "--database-url", db_url, "--exact-database"]
    assert main(argv) == 0
    rows = pairs_lib.read_jsonl(out / measure.ROWS_FILE)
    assert [r["id"] for r in rows[:3]] == [r["id"] for r in chosen]
    assert {r["source"] for r in rows} == {"ours", "beam-tune"}
    assert all(r["predicted"] in LABELS for r in rows)
    beam_rows = [r for r in rows if r["source"] == "beam-tune"]
    assert beam_rows and all("text" not in json.dumps(r["links"]) for r in beam_rows)
    summary = (out / measure.SUMMARY_FILE).read_text()
    assert "## Headline" in summary and "| ours (3) |" in summary
    assert "BEAM questions that make no pair: 2" in summary
    # the BEAM chats counted whole, with no hand check yet; LoCoMo was not asked for
    assert "## BEAM: automatic supersessions in whole conversations" in summary
    assert "## LoCoMo" in summary and "Not run (no --locomo FILE given)." in summary
    assert (out / measure.whole_file("beam")).exists()
