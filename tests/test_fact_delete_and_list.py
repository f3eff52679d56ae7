"""FactStore.delete (one fact, for good, its claim left whole) and FactStore.list_facts (a session's
facts a page at a time, newest first), on real Postgres."""

from __future__ import annotations

import pytest

from memory.errors import FactNotFoundError, InvalidCursorError
from memory.graph.store import FactStore
from memory.model import Fact, Kind, Source, Status


def count(store: FactStore, sql: str, *params: object) -> int:
    with store.pool.connection() as conn:
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(next(iter(row.values())))


def chain(store: FactStore, *bodies: str) -> list[Fact]:
    """A claim corrected in turn: each body supersedes the one before."""
    root = store.root("s")
    facts = [store.remember(root, body, kind=Kind.USER_INPUT) for body in bodies]
    for new, old in zip(facts[1:], facts, strict=False):
        store.supersede(new, old)
    return [store.get(f.id) for f in facts]


@pytest.fixture
def lenient(store: FactStore) -> FactStore:
    # the fake embedder's cosines mean nothing: any pair may supersede, and only when the test says so
    store.supersede_min_similarity = -1.0
    store.auto_supersede = False
    return store


def test_deleting_a_correction_makes_the_version_it_replaced_current_again(lenient: FactStore) -> None:
    first, second = chain(lenient, "Our budget is $100k.", "Our budget is $120k.")
    lenient.pin(first)  # the pin follows the claim to its current version
    assert lenient.get(first.id).head_id == second.id

    done = lenient.delete(second)

    assert done.fact.id == second.id
    assert done.current is not None and done.current.id == first.id
    assert [f.id for f in done.restored] == [first.id]
    now = lenient.get(first.id)
    assert now.status is Status.ACTIVE and now.head_id == first.id and now.valid_to is None
    with pytest.raises(FactNotFoundError):
        lenient.get(second.id)
    assert lenient.audit.edges(first) == []  # the supersedes edge went with the fact
    assert [p.fact.id for p in lenient.pinned("s")] == [first.id]
    assert [f.id for f in lenient.audit.history(first)] == [first.id]


def test_a_pin_on_the_deleted_version_moves_to_the_one_current_now(lenient: FactStore) -> None:
    first, second = chain(lenient, "We deploy on Kubernetes.", "We deploy on Nomad.")
    lenient.pin(second)
    lenient.delete(second)
    assert [p.fact.id for p in lenient.pinned("s")] == [first.id]


def test_deleting_a_middle_version_bridges_its_chain(lenient: FactStore) -> None:
    first, second, third = chain(lenient, "Launch is in May.", "Launch is in June.", "Launch is in July.")
    done = lenient.delete(second)
    assert done.current is not None and done.current.id == third.id and done.restored == ()
    assert [f.id for f in lenient.audit.history(third)] == [first.id, third.id]
    assert (third.id, "supersedes", first.id) in lenient.audit.edges(first)
    assert lenient.get(first.id).status is Status.SUPERSEDED


def test_a_fact_with_no_other_version_leaves_nothing_current_and_its_message_goes(store: FactStore) -> None:
    store.auto_supersede = False  # Denver would replace Austin as it is captured
    root = store.root("s")
    [only] = store.capture_message(root, "I live in Austin.", message_id="m1").facts
    two = store.capture_message(root, "I live in Denver. My cat is called Miso.", message_id="m2").facts
    assert len(two) == 2 and two[0].passage_id is not None

    assert store.delete(only).current is None
    store.delete(two[0])  # its message's text stays: the other claim was cut from it too
    assert count(store, "SELECT count(*) FROM beads.passages WHERE id = %s", two[0].passage_id) == 1
    store.delete(two[1])
    assert count(store, "SELECT count(*) FROM beads.passages WHERE id = %s", two[0].passage_id) == 0
    assert count(store, "SELECT count(*) FROM beads.fact_vectors") == 0
    assert store.audit.session_facts("s") == []
    with pytest.raises(FactNotFoundError):
        store.delete(only)


def test_a_listing_is_newest_first_filtered_and_paged(lenient: FactStore) -> None:
    root = lenient.root("s")
    said = [lenient.remember(root, f"Fact number {i}.", kind=Kind.USER_INPUT) for i in range(5)]
    note = lenient.remember(root, "The agent concluded this.", kind=Kind.CONCLUSION)
    old, new = chain(lenient, "The office is in Leeds.", "The office is in York.")
    lenient.pin(said[0])
    lenient.capture_message(root, "Search result: ten blue links.", source=Source.TOOL_RESULT)

    everything = lenient.audit.list_facts("s", limit=200).facts
    assert [i.fact.recorded_at for i in everything] == sorted(
        (i.fact.recorded_at for i in everything), reverse=True
    )
    assert everything[0].fact.source is Source.TOOL_RESULT
    current = lenient.audit.list_facts("s", status=Status.ACTIVE).facts
    assert old.id not in {i.fact.id for i in current} and new.id in {i.fact.id for i in current}
    assert [i.fact.id for i in lenient.audit.list_facts("s", status="superseded").facts] == [old.id]
    assert [
        i.fact.id for i in lenient.audit.list_facts("s", kind="conclusion", source="remember_tool").facts
    ] == [note.id]
    [pinned] = lenient.audit.list_facts("s", pinned=True).facts
    assert pinned.fact.id == said[0].id and pinned.pinned
    assert said[0].id not in {i.fact.id for i in lenient.audit.list_facts("s", pinned=False).facts}

    seen, cursor = [], None
    while True:
        page = lenient.audit.list_facts("s", limit=3, cursor=cursor)
        seen += [i.fact.id for i in page.facts]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [i.fact.id for i in everything]  # every fact once, in order
    assert lenient.audit.list_facts("nobody").facts == ()


def test_a_cursor_the_store_did_not_hand_out_is_refused(store: FactStore) -> None:
    for bad in ("nonsense", "e30", ""):
        with pytest.raises(InvalidCursorError, match="start again"):
            store.audit.list_facts("s", cursor=bad)
    with pytest.raises(ValueError, match="limit"):
        store.audit.list_facts("s", limit=0)
