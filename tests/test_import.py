"""`FactStore.import_messages` and `beads-memory import`: the rows capture writes message by message,
written in bulk; resumed after a stop; bad files refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from memory.doors.cli import main
from memory.doors.transcripts import read_transcripts
from memory.embedders import FakeEmbedder
from memory.graph.importing import ImportError_, ImportMessage, read_jsonl
from memory.graph.indexer import BackgroundIndexer
from memory.graph.store import CAPTURE_CHUNK_CLAIMS, FactStore
from memory.model import Kind, Source
from memory.postgres import vectors
from memory.postgres.connection import open_pool

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

# a working conversation with what the rules act on: corrections (paired and not), restatements, a
# goal, two speakers, a tool's result, assistant answers, a long message of several chunks
SAID: list[tuple[str, str | None, str]] = [
    ("user", "ana", "Our budget is $100k per year and it must be self-hostable."),
    ("assistant", None, "Noted: a $100k budget, self-hosted."),
    ("user", "ana", "We deploy on Kubernetes in eu-west-1."),
    ("user", "ben", "I prefer Qdrant for the vector index."),
    ("tool", None, "Qdrant 1.9 released: faster filtering. Pricing starts at $0 for self-hosting."),
    ("user", "ana", "Correction: the budget is now $120k."),
    ("assistant", None, "Updated: the budget is $120k per year."),
    ("user", "ana", "Our weekly sync is on Tuesdays at 10am."),
    ("user", "ana", "Heads up: the weekly sync moved to Thursdays, same time."),
    ("user", "ben", "Our budget is $120k per year, I checked with finance."),
    (
        "user",
        "ana",
        " ".join(f"Rack {n} in hall {n % 7} holds {n * 3} servers." for n in range(CAPTURE_CHUNK_CLAIMS + 9)),
    ),
    ("user", "ana", "We moved the cluster to eu-central-1 last week, it runs on spot nodes now."),
    ("user", "ben", "From now on, always give costs in euros."),  # a standing instruction: pinned
    ("user", "ana", "Which region do we deploy in?"),
]


def conversation() -> list[ImportMessage]:
    return [
        ImportMessage(
            text=text,
            role=role,  # type: ignore[arg-type]
            message_id=f"m{n}",
            thread_id=f"t{n // 4}",
            speaker=speaker,
            time=T0 + timedelta(hours=n),
        )
        for n, (role, speaker, text) in enumerate(SAID)
    ]


def capture_one_by_one(store: FactStore, session: str, messages: Sequence[ImportMessage]) -> None:
    """What the evaluation harness did before the import path: each message in turn."""
    ns = store.root(session)
    for m in messages:
        args: dict[str, Any] = {"message_id": m.message_id, "thread_id": m.thread_id, "valid_from": m.time}
        if m.role == "assistant":
            store.remember(ns, m.text, kind=Kind.CONCLUSION, source=Source.PASSIVE_CAPTURE, **args)
        else:
            store.capture_message(
                ns,
                m.text,
                source=Source.PASSIVE_CAPTURE if m.role == "user" else Source.TOOL_RESULT,
                speaker=m.speaker if m.role == "user" else None,
                **args,
            )


ROWS = {
    "facts": "SELECT id, session_id, namespace_id, kind, status, source, source_key, agent_id, "
    "acting_on_behalf_of, body, passage_id, thread_id, message_id, span_start, span_end, head_id, "
    "valid_from, valid_to, metadata FROM beads.facts ORDER BY id",
    "edges": "SELECT src, relation, dst, session_id, automatic, reason, cascade_of, settled FROM beads.edges ORDER BY 1, 2, 3",
    "passages": "SELECT id, body FROM beads.passages ORDER BY id",
    "vectors": "SELECT fact_id, embedding::text FROM beads.fact_vectors ORDER BY fact_id",
    "passage vectors": "SELECT passage_id, embedding::text FROM beads.passage_vectors ORDER BY passage_id",
    "pins": "SELECT fact_id, session_id, pinned_by, pinned_at FROM beads.pins ORDER BY fact_id",
}


def rows(url: str) -> dict[str, list[dict[str, Any]]]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return {name: conn.execute(query).fetchall() for name, query in ROWS.items()}


@pytest.fixture
def two_stores(db_url: str, another_db_url: str) -> Iterator[tuple[FactStore, FactStore, str, str]]:
    with open_pool(db_url) as one, open_pool(another_db_url) as other:
        a, b = (
            FactStore(one, FakeEmbedder(), index_in_background=False),
            FactStore(other, FakeEmbedder(), index_in_background=False),
        )
        a.setup()
        b.setup()
        yield a, b, db_url, another_db_url


def test_an_import_writes_exactly_the_rows_capture_writes(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    live, bulk, live_url, bulk_url = two_stores
    capture_one_by_one(live, "chat", conversation())
    report = bulk.import_messages("chat", conversation(), batch_messages=4)
    expected, got = rows(live_url), rows(bulk_url)
    assert got == expected
    # and the conversation exercised the rules: a correction, edges, a long message's chunks
    assert report.superseded >= 1 and expected["edges"] and report.written == len(expected["facts"])
    assert len(expected["pins"]) == 1
    assert report.messages == len(SAID) and report.skipped == 0


def test_an_import_leaves_the_planner_statistics_of_what_it_wrote(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    # a new database is planned as empty until autovacuum analyzes it, too late for an import: the
    # import analyzes the tables it fills itself (its first batch, then each time it doubles them)
    _, bulk, _, bulk_url = two_stores
    bulk.import_messages("chat", conversation(), batch_messages=4)
    with psycopg.connect(bulk_url) as conn:
        for table in ("facts", "fact_vectors", "passages"):
            planned, stored = conn.execute(
                f"SELECT (SELECT reltuples FROM pg_class WHERE oid = 'beads.{table}'::regclass),"
                f" (SELECT count(*) FROM beads.{table})"
            ).fetchone()
            assert 0 < planned <= stored, table
            if table == "facts":  # analyzed again whenever the import had doubled it
                assert planned >= stored / 2


def test_a_session_imported_beside_others_is_in_the_planner_statistics(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    # a second session, too small to double the table, was left out of the statistics until
    # autovacuum came: planned as one row, its first searches read every claim it has
    _, bulk, _, bulk_url = two_stores
    bulk.import_messages("chat", conversation(), batch_messages=4)
    bulk.import_messages("other", conversation()[:5], batch_messages=4)
    with psycopg.connect(bulk_url) as conn:
        planned, stored, other = conn.execute(
            "SELECT (SELECT reltuples FROM pg_class WHERE oid = 'beads.facts'::regclass),"
            " (SELECT count(*) FROM beads.facts),"
            " (SELECT count(*) FROM beads.facts WHERE session_id = 'other')"
        ).fetchone()
        assert other > 0 and planned == stored
        [estimate] = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT * FROM beads.facts WHERE session_id = 'other'"
        ).fetchone()
        assert estimate[0]["Plan"]["Plan Rows"] == other


def test_an_import_leaves_nothing_pending_in_the_keyword_indexes(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    # a GIN index's pending list is read whole by every lookup; after a bulk load the planner, costing
    # it, counted a search's words by reading the session's claims instead of the index
    _, bulk, _, bulk_url = two_stores
    bulk.import_messages("chat", conversation(), batch_messages=4)
    with psycopg.connect(bulk_url, autocommit=True) as conn:
        merged = conn.execute(
            "SELECT gin_clean_pending_list('beads.facts_body_tsv'::regclass)"
            " + gin_clean_pending_list('beads.passages_body_tsv'::regclass)"
        ).fetchone()
        assert merged == (0,)  # the import merged them already


class StopsAt(FakeEmbedder):
    """Fails on its `n`th call, as a process killed mid-import would stop."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.calls, self.n = 0, n

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return super().embed(texts)


def test_an_import_stopped_midway_resumes_to_the_same_rows(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    clean, stopped, clean_url, stopped_url = two_stores
    clean.import_messages("chat", conversation(), batch_messages=3)
    stopping = FactStore(stopped.pool, StopsAt(3), index_in_background=False)
    with pytest.raises(KeyboardInterrupt):
        stopping.import_messages("chat", conversation(), batch_messages=3)
    partial = len(rows(stopped_url)["facts"])
    assert 0 < partial < len(rows(clean_url)["facts"])  # two batches landed, whole
    resumed = stopped.import_messages("chat", conversation(), batch_messages=3)
    assert resumed.skipped == 6  # the two committed batches, skipped before anything was embedded
    assert rows(stopped_url) == rows(clean_url)


def test_a_message_said_twice_in_one_file_is_written_once(
    two_stores: tuple[FactStore, FactStore, str, str],
) -> None:
    # the next batch is read, checked against what is stored and embedded while this one is written:
    # a message that this one writes is not stored yet when the next is checked, and is still skipped
    said = conversation()
    once, twice, once_url, twice_url = two_stores
    once.import_messages("chat", said, batch_messages=2)
    # said[2] again in the batch right after its own, said[0] far from it
    again = [*said[:4], said[2], *said[4:], said[0]]
    report = twice.import_messages("chat", again, batch_messages=4)
    assert report.skipped == 2 and report.messages == len(said) + 2
    assert rows(twice_url) == rows(once_url)


def write_jsonl(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_jsonl_chat_imports_from_the_command_line(
    tmp_path: Path, db_url: str, pool: ConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as if the background indexer had not reached the last batch's vectors when the import ended
    monkeypatch.setattr(BackgroundIndexer, "poke", lambda self: None)
    chat = write_jsonl(
        tmp_path / "chat.jsonl",
        [
            json.dumps(
                {
                    "role": "user",
                    "text": "Our budget is $100k.",
                    "id": "1",
                    "time": "2026-01-05T09:00:00+00:00",
                }
            ),
            json.dumps({"role": "assistant", "content": "Noted, $100k.", "id": "2"}),
            json.dumps({"role": "user", "text": "Correction: the budget is now $120k.", "id": "3"}),
        ],
    )
    assert main(["import", str(chat), "alice", "--embedder", "fake", "--database-url", db_url]) == 0
    with pool.connection() as conn:  # the command waited for its vectors to reach the index
        assert vectors.pending_count(conn) == 0
    store = FactStore(pool, FakeEmbedder())
    bodies = {f.body: f.status.value for f in store.audit.session_facts("alice")}
    assert bodies == {
        "Our budget is $100k.": "superseded",
        "Noted, $100k.": "active",
        "Correction: the budget is now $120k.": "active",
    }
    # a second run writes nothing
    assert main(["import", str(chat), "alice", "--embedder", "fake", "--database-url", db_url]) == 0
    assert len(store.audit.session_facts("alice")) == 3


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "line 2: not JSON"),
        (json.dumps({"role": "robot", "text": "hi"}), "line 2: \"role\" is 'robot'"),
        (json.dumps({"role": "user"}), 'line 2: needs a non-empty "text"'),
        (
            json.dumps({"text": "x", "time": "yesterday"}),
            "line 2: \"time\" 'yesterday' is not an ISO 8601 time",
        ),
        (json.dumps({"text": "x", "time": "2026-01-05T09:00:00"}), "has no offset"),
        (json.dumps(["a", "list"]), "line 2: a message is a JSON object"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_written(
    tmp_path: Path, db_url: str, pool: ConnectionPool, line: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_jsonl(
        tmp_path / "bad.jsonl", [json.dumps({"role": "user", "text": "Our budget is $100k."}), line]
    )
    with pytest.raises(ImportError_, match="line 2"):
        read_jsonl(chat)
    assert main(["import", str(chat), "bob", "--embedder", "fake", "--database-url", db_url]) == 2
    assert why in capsys.readouterr().err.replace("\n", "")
    assert FactStore(pool, FakeEmbedder()).audit.session_facts("bob") == []


def test_the_benchmark_layouts_are_read_as_messages(tmp_path: Path) -> None:
    locomo = tmp_path / "locomo.json"
    locomo.write_text(
        json.dumps(
            [
                {
                    "sample_id": "c1",
                    "conversation": {
                        "speaker_a": "Ana",
                        "speaker_b": "Ben",
                        "session_1_date_time": "1:56 pm on 8 May, 2023",
                        "session_1": [
                            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
                            {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a cat"},
                        ],
                    },
                },
                {
                    "sample_id": "c2",
                    "conversation": {
                        "session_1": [{"speaker": "X", "dia_id": "D1:1", "text": "Hi there, I run."}]
                    },
                },
            ]
        )
    )
    read = read_transcripts(locomo, "auto", "loc")
    assert list(read) == ["loc-c1", "loc-c2"]
    first, second = read["loc-c1"]
    assert (first.speaker, first.message_id, first.time) == (
        "Ana",
        "D1:1",
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    )
    assert second.text == "Nice! [shares a photo: a cat]"
    beam = tmp_path / "7"
    beam.mkdir()
    (beam / "chat.json").write_text(
        json.dumps(
            [
                {
                    "batch_number": 1,
                    "time_anchor": "March-15-2024",
                    "turns": [
                        [
                            {"role": "user", "id": 1, "content": "My A1C is 6.1. ->-> 1,1"},
                            {"role": "assistant", "id": 2, "content": "Good."},
                        ]
                    ],
                }
            ]
        )
    )
    [(session, messages)] = read_transcripts(beam, "auto", "beam500k-7").items()
    assert session == "beam500k-7" and [(m.role, m.text) for m in messages] == [
        ("user", "My A1C is 6.1."),
        ("assistant", "Good."),
    ]
    with pytest.raises(ImportError_, match="not a layout"):
        read_transcripts(write_jsonl(tmp_path / "x.json", ['{"a": 1}']), "auto", "p")
