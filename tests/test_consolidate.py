"""Consolidation against real Postgres: merging restatements, expiring unused facts, recording retrievals."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg_pool import ConnectionPool

from memory.doors import cli
from memory.embedders import FakeEmbedder
from memory.graph.consolidate import NOTE_KEY, content_words, find_merges
from memory.graph.store import FactStore
from memory.model import Kind, Relation, Source, Status

LATER = datetime.now(UTC) + timedelta(days=60)  # a consolidation clock two months ahead


class ControlledEmbedder(FakeEmbedder):
    """The fake embedder, except for texts given a vector explicitly (to set cosines exactly)."""

    def __init__(self, fixed: dict[str, Sequence[float]], dims: int = 64) -> None:
        super().__init__(dims)
        self.fixed = dict(fixed)
        self.name = "controlled-64"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(self.fixed[t]) if t in self.fixed else super().embed([t])[0] for t in texts]


def status_of(store: FactStore, fid: uuid.UUID) -> Status:
    return store.get(fid).status


# -- the text rule ---------------------------------------------------------------------------------


def test_content_words_ignore_case_punctuation_and_filler_but_keep_values() -> None:
    assert content_words("The budget is $120k.") == content_words("budget: $120K")
    assert content_words("The budget is $120k.") != content_words("The budget is $150k.")
    assert content_words("I like coffee.") != content_words("I don't like coffee.")
    assert content_words("Dog bites man.") != content_words("Man bites dog.")
    assert content_words("The meeting is on Tuesday.") != content_words("The meeting is on Thursday.")


# -- merge -----------------------------------------------------------------------------------------


def test_a_restated_claim_is_merged_into_the_first_and_merging_again_changes_nothing(
    store: FactStore,
) -> None:
    root = store.root("s1")
    first = store.remember(
        root, "We deploy on Kubernetes.", kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE
    )
    again = store.remember(
        root, "we deploy on kubernetes!", kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, message_id="m2"
    )
    other = store.remember(
        root, "The office is in Lyon.", kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE
    )

    report = store.consolidate("s1")
    assert [(m.survivor, m.duplicates) for m in report.merges] == [(first.id, (again.id,))]
    archived = store.get(again.id)
    assert archived.status is Status.ARCHIVED and archived.valid_to is not None
    assert archived.metadata[NOTE_KEY]["action"] == "merged"
    assert archived.metadata[NOTE_KEY]["into"] == str(first.id)
    assert (first.id, "derived_from", again.id) in store.audit.edges(first.id)
    assert status_of(store, first.id) is Status.ACTIVE and status_of(store, other.id) is Status.ACTIVE

    # idempotent: nothing left to merge, nothing changes
    assert store.consolidate("s1").merges == []
    assert status_of(store, first.id) is Status.ACTIVE
    # search returns the survivor once, never the archived restatement
    hits = store.search(root, "Where do we deploy?").hits
    ids = [h.fact.id for h in hits]
    assert first.id in ids and again.id not in ids


def test_dry_run_reports_without_changing_anything(store: FactStore) -> None:
    root = store.root("s1")
    store.remember(root, "Use Postgres.", kind=Kind.USER_INPUT)
    dup = store.remember(root, "use postgres", kind=Kind.USER_INPUT, message_id="m2")
    report = store.consolidate("s1", dry_run=True)
    assert len(report.merges) == 1 and report.dry_run
    assert status_of(store, dup.id) is Status.ACTIVE


def test_different_values_are_never_merged_even_with_identical_vectors(pool: ConnectionPool) -> None:
    # the vectors say "the same" (cosine 1.0): the text rule alone must keep the two budgets apart
    same = [1.0] + [0.0] * 63
    store = FactStore(pool, ControlledEmbedder({"The budget is $120k.": same, "The budget is $150k.": same}))
    store.setup()
    root = store.root("s1")
    a = store.remember(root, "The budget is $120k.", kind=Kind.USER_INPUT)
    b = store.remember(root, "The budget is $150k.", kind=Kind.USER_INPUT)
    assert store.consolidate("s1").merges == []
    assert status_of(store, a.id) is Status.ACTIVE and status_of(store, b.id) is Status.ACTIVE


def test_the_cosine_threshold_guards_same_words_with_distant_vectors(pool: ConnectionPool) -> None:
    x, y = [1.0] + [0.0] * 63, [0.8, 0.6] + [0.0] * 62  # cosine 0.8
    store = FactStore(pool, ControlledEmbedder({"Ship it Friday.": x, "ship it friday": y}))
    store.setup()
    root = store.root("s1")
    store.remember(root, "Ship it Friday.", kind=Kind.USER_INPUT)
    store.remember(root, "ship it friday", kind=Kind.USER_INPUT, message_id="m2")
    assert store.consolidate("s1").merges == []
    assert len(store.consolidate("s1", merge_threshold=0.75).merges) == 1


def test_merging_never_crosses_namespaces_sessions_kinds_or_trust(store: FactStore) -> None:
    root, other_session = store.root("s1"), store.root("s2")
    child = store.fork(root, "research", "researcher")
    text = "Qdrant supports on-prem deployment."
    store.remember(root, text, kind=Kind.CONCLUSION)
    store.remember(child, text, kind=Kind.CONCLUSION)  # another namespace
    store.remember(other_session, text, kind=Kind.CONCLUSION)  # another session
    store.remember(root, text, kind=Kind.USER_INPUT, message_id="m9")  # another kind
    store.capture_message(root, text, source=Source.TOOL_RESULT, message_id="tool-1")  # untrusted
    store.remember(root, "Is " + text, kind=Kind.DIRECTIVE, message_id="q1")
    store.remember(root, "is " + text.lower(), kind=Kind.DIRECTIVE, message_id="q2")  # directives untouched
    assert store.consolidate("s1").merges == []
    assert store.consolidate("s2").merges == []


def test_supersede_chains_are_left_alone_and_still_resolve(store: FactStore) -> None:
    root = store.root("s1")
    old = store.remember(root, "The budget is $100k.", kind=Kind.USER_INPUT, message_id="m1")
    new = store.remember(root, "The budget is $120k.", kind=Kind.USER_INPUT, message_id="m2")
    store.supersede(new, old)
    # a later restatement of the current value: the chain head is not merged with it (chains stay whole)
    restated = store.remember(root, "the budget is $120k", kind=Kind.USER_INPUT, message_id="m3")
    # and a plain duplicate pair elsewhere is merged in the same run
    store.remember(root, "Deploy on Fridays.", kind=Kind.USER_INPUT, message_id="m4")
    store.remember(root, "deploy on fridays", kind=Kind.USER_INPUT, message_id="m5")
    report = store.consolidate("s1")
    assert len(report.merges) == 1 and report.merges[0].body == "Deploy on Fridays."
    assert [f.id for f in store.audit.history(old)] == [old.id, new.id]
    assert status_of(store, new.id) is Status.ACTIVE and status_of(store, restated.id) is Status.ACTIVE
    hit = next(h for h in store.search(root, "What is the budget?", k=8).hits if h.fact.id == new.id)
    assert hit.fact.status is Status.ACTIVE


def test_a_fact_superseded_before_the_merge_commits_is_not_archived(store: FactStore, db_url: str) -> None:
    # the merge re-checks under its locks what the unlocked read saw
    root = store.root("s1")
    a = store.remember(root, "Use Redis.", kind=Kind.USER_INPUT, message_id="m1")
    b = store.remember(root, "use redis", kind=Kind.USER_INPUT, message_id="m2")
    with psycopg.connect(db_url, autocommit=True) as conn:
        from psycopg.rows import dict_row

        conn.row_factory = dict_row
        rows = conn.execute(
            "SELECT f.id, f.namespace_id, f.kind, f.source, f.body, f.valid_from, f.recorded_at, "
            "v.embedding::real[] AS embedding FROM beads.facts f JOIN beads.fact_vectors v "
            "ON v.fact_id = f.id WHERE f.session_id = 's1'"
        ).fetchall()
    [planned], _ = find_merges(rows, 0.9)
    assert planned.survivor == a.id
    newer = store.remember(root, "use redis cluster", kind=Kind.USER_INPUT, message_id="m3")
    store.supersede(newer, b)  # b leaves the candidates between the read and the write
    from memory.graph.consolidate import _apply_merge

    with store.pool.connection() as conn:
        assert _apply_merge(conn, planned, datetime.now(UTC)) is None
    assert status_of(store, b.id) is Status.SUPERSEDED


# -- expiry ----------------------------------------------------------------------------------------


def test_expiry_archives_only_old_facts_nobody_retrieved(store: FactStore) -> None:
    root = store.root("s1")
    unused = store.remember(root, "The cafeteria closes at 3pm.", kind=Kind.USER_INPUT)
    used = store.remember(root, "The API key rotates monthly.", kind=Kind.USER_INPUT)
    question = store.remember(root, "When does the key rotate?", kind=Kind.DIRECTIVE)
    pinned = store.remember(root, "Never email the CEO.", kind=Kind.USER_INPUT)
    store.pin(pinned)
    store.note_retrieved([used.id], now=LATER - timedelta(days=5))  # retrieved recently (by LATER's clock)

    report = store.consolidate("s1", horizon=timedelta(days=30), now=LATER)
    assert [e.fact for e in report.expired] == [unused.id]
    expired = store.get(unused.id)
    assert expired.status is Status.ARCHIVED
    note = expired.metadata[NOTE_KEY]
    assert note["action"] == "expired" and note["reason"].startswith("not retrieved since ")
    assert "horizon 30 days" in note["reason"]
    for kept in (used, question, pinned):
        assert status_of(store, kept.id) is not Status.ARCHIVED
    # nothing was deleted, and a second run expires nothing more
    assert store.consolidate("s1", horizon=timedelta(days=30), now=LATER).expired == []
    assert store.search(root, "When does the cafeteria close?").hits == () or all(
        h.fact.id != unused.id for h in store.search(root, "When does the cafeteria close?").hits
    )


def test_fresh_facts_are_not_expired_and_without_a_horizon_nothing_expires(store: FactStore) -> None:
    root = store.root("s1")
    fact = store.remember(root, "Standup is at 9.", kind=Kind.USER_INPUT)
    assert store.consolidate("s1", horizon=timedelta(days=30)).expired == []  # created just now
    assert store.consolidate("s1", now=LATER).expired == []  # no horizon: expiry is off
    assert status_of(store, fact.id) is Status.ACTIVE


def test_pinned_claims_are_neither_expired_nor_merged_away(store: FactStore) -> None:
    root = store.root("s1")
    fact = store.remember(root, "Budget is firm.", kind=Kind.USER_INPUT, message_id="m1")
    pinned_dup = store.remember(root, "budget is firm", kind=Kind.USER_INPUT, message_id="m2")
    store.pin(pinned_dup)
    report = store.consolidate("s1", horizon=timedelta(days=1), now=LATER)
    assert report.merges == []
    assert [e.fact for e in report.expired] == [fact.id]  # the unpinned one, unused, expires
    assert status_of(store, pinned_dup.id) is Status.ACTIVE


def test_superseded_versions_are_not_expired_but_an_unused_head_is(store: FactStore) -> None:
    root = store.root("s1")
    old = store.remember(root, "The budget is $100k.", kind=Kind.USER_INPUT, message_id="m1")
    new = store.remember(root, "The budget is $120k.", kind=Kind.USER_INPUT, message_id="m2")
    store.supersede(new, old)
    report = store.consolidate("s1", horizon=timedelta(days=30), now=LATER)
    assert [e.fact for e in report.expired] == [new.id]
    assert status_of(store, old.id) is Status.SUPERSEDED


# -- recording retrievals --------------------------------------------------------------------------


def test_note_retrieved_counts_and_keeps_the_latest_time(store: FactStore, db_url: str) -> None:
    root = store.root("s1")
    fact = store.remember(root, "Tabs, not spaces.", kind=Kind.USER_INPUT)
    t1, t2 = datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 2, 1, tzinfo=UTC)
    assert store.note_retrieved([fact.id, fact.id], now=t2) == 1
    store.note_retrieved([fact.id], now=t1)  # an older report never moves the time back
    assert store.note_retrieved([uuid.uuid4()]) == 0  # an unknown (forgotten) fact is skipped
    assert store.note_retrieved([]) == 0
    with psycopg.connect(db_url) as conn:
        last, times = conn.execute(
            "SELECT last_retrieved_at, times FROM beads.retrievals WHERE fact_id = %s", (fact.id,)
        ).fetchone()
    assert (last, times) == (t2, 2)
    store.forget("s1")  # forgetting a session removes its retrieval records too
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM beads.retrievals").fetchone()[0] == 0


def test_relations_other_than_supersedes_do_not_block_a_merge(store: FactStore) -> None:
    root = store.root("s1")
    a = store.remember(root, "Latency under 50 ms.", kind=Kind.USER_INPUT, message_id="m1")
    b = store.remember(root, "latency under 50 ms", kind=Kind.USER_INPUT, message_id="m2")
    c = store.remember(root, "p99 is what counts.", kind=Kind.USER_INPUT, message_id="m3")
    store.relate(c, Relation.RELATES_TO, b)
    assert [m.duplicates for m in store.consolidate("s1").merges] == [(b.id,)]
    assert status_of(store, a.id) is Status.ACTIVE


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_consolidate_prints_what_it_merged(store: FactStore, db_url: str) -> None:
    from io import StringIO

    from rich.console import Console

    root = store.root("s1")
    store.remember(root, "Use Postgres.", kind=Kind.USER_INPUT, message_id="m1")
    store.remember(root, "use postgres!", kind=Kind.USER_INPUT, message_id="m2")
    out = StringIO()
    console = Console(file=out, width=200)
    args = ["consolidate", "s1", "--embedder", "fake-64", "--database-url", db_url, "--dry-run"]
    assert cli.main(args, console) == 0
    text = out.getvalue()
    assert "dry run" in text and "Use Postgres." in text and "merged" in text
    assert store.consolidate("s1").merges  # the dry run changed nothing
    out.truncate(0)
    assert cli.main(["consolidate", "s1", "--embedder", "fake-64", "--database-url", db_url], console) == 0
    assert "nothing to merge" in out.getvalue()
