"""`BeadsStore`, LangGraph's BaseStore over the fact graph: the same calls run on LangGraph's own
InMemoryStore and PostgresStore (on the test's database) and answer alike, apart from the
differences docs/guide/integrations.md lists; similarity scores, TTLs and the async face; then what the
options add (history, our ranking), and LangMem's tools on it. LangGraph's own store tests run
against it in tests/test_upstream_store.py."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import HumanMessage
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from langmem import create_manage_memory_tool, create_search_memory_tool
from psycopg_pool import ConnectionPool

from memory.doors.langgraph_store import (
    AsyncBeadsStore,
    BeadsStore,
    escape_like,
    item_text,
    matches,
    session_of,
)
from memory.embedders import FakeEmbedder, MiniLMEmbedder
from memory.graph.store import FactStore
from memory.model import Kind, Source, Status
from memory.postgres.connection import open_pool
from memory.postgres.migrate import migrations, setup
from memory.scripted import ScriptedChatModel, calls, tool_call
from tests.schema_helpers import migrate_to

ALICE = ("users", "alice", "memories")
BOB = ("users", "bob", "memories")
# look-alike namespaces: LIKE's metacharacters, and names that share a beginning
LOOKALIKES = [("user_1",), ("userX1",), ("a%",), ("abc",), ("a",), ("ab",), ("a", "b"), ("ab", "c")]


@pytest.fixture
def beads(store: FactStore) -> BeadsStore:
    return BeadsStore(store)


@pytest.fixture
def postgres(db_url: str) -> Iterator[PostgresStore]:
    with PostgresStore.from_conn_string(db_url) as stock:
        stock.setup()
        yield stock


def seed(s: BaseStore) -> None:
    s.put(("users", "alice", "prefs"), "theme", {"theme": "dark", "n": 0})
    s.put(ALICE, "m1", {"content": "Alice likes tea.", "n": 1, "tags": ["drink"]})
    s.put(ALICE, "m2", {"content": "Alice lives in Austin.", "n": 5, "where": {"city": "Austin"}})
    s.put(BOB, "m1", {"content": "Bob likes coffee.", "n": 2})
    for ns in LOOKALIKES:
        s.put(ns, "k", {"content": f"in {ns}"})


def triples(items: list[Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    return [(i.namespace, i.key, i.value) for i in items]


def answers(s: BaseStore) -> dict[str, Any]:
    """The calls every store is asked, and what each answered (unordered where LangGraph's stores
    differ from each other in order: InMemoryStore lists in insertion order, PostgresStore newest first)."""
    seed(s)
    got: dict[str, Any] = {}
    got["get"] = [
        None if (i := s.get(ns, k)) is None else (i.namespace, i.key, i.value)
        for ns, k in [(ALICE, "m1"), (ALICE, "nope")]
    ]
    for name, prefix, flt in [
        ("all", (), None),
        ("users", ("users",), None),
        ("alice", ("users", "alice"), None),
        ("exact ns", ALICE, None),
        ("n > 2", ("users",), {"n": {"$gt": 2}}),
        ("n in 1..2", ("users",), {"n": {"$gte": 1, "$lte": 2}}),
        ("n != 1", ("users",), {"n": {"$ne": 1}}),
        ("equal", ("users",), {"content": "Bob likes coffee."}),
        ("nested", ("users",), {"where": {"city": "Austin"}}),
        ("list", ("users",), {"tags": ["drink"]}),
        ("no match", ("users",), {"n": 99}),
        ("user_1", ("user_1",), None),
        ("a%", ("a%",), None),
        ("a", ("a",), None),
        ("ab", ("ab",), None),
        ("nothing", ("u",), None),
    ]:
        try:
            got[f"search {name}"] = sorted(triples(s.search(prefix, filter=flt, limit=100)), key=repr)
        except ValueError as exc:  # PostgresStore reads a nested filter's keys as operators
            got[f"search {name}"] = f"refused: {exc}"
    got["namespaces"] = sorted(s.list_namespaces())
    for name, kwargs in [
        ("prefix users", {"prefix": ("users",)}),
        ("suffix", {"suffix": ("memories",)}),
        ("wildcard", {"prefix": ("users", "*", "memories")}),
        ("depth 2", {"prefix": ("users",), "max_depth": 2}),
        ("depth 1", {"max_depth": 1}),
        ("user_1", {"prefix": ("user_1",)}),
        ("a%", {"prefix": ("a%",)}),
        ("a", {"prefix": ("a",)}),
        ("a limit", {"max_depth": 1, "limit": 3, "offset": 2}),
    ]:
        got[f"namespaces {name}"] = sorted(s.list_namespaces(**kwargs))

    # a put to an existing key replaces its value; a delete removes it; reads see both at once
    s.put(ALICE, "m1", {"content": "Alice likes green tea now.", "n": 1})
    s.delete(ALICE, "m2")
    s.delete(ALICE, "never-there")
    got["after"] = sorted(triples(s.search(("users",), limit=100)), key=repr)
    got["after get"] = [None if (i := s.get(ALICE, k)) is None else i.value for k in ("m1", "m2")]
    got["after namespaces"] = sorted(s.list_namespaces(prefix=("users",)))
    # in one batch every read sees the store as it was before the batch's puts; the last put wins
    got["batch"] = [
        None if r is None else (triples(r) if isinstance(r, list) else (r.namespace, r.key, r.value))
        for r in s.batch(
            [
                PutOp(BOB, "b", {"content": "first"}),
                GetOp(BOB, "b"),
                PutOp(BOB, "b", {"content": "second"}),
                SearchOp(BOB, filter={"content": "second"}),
            ]
        )
    ]
    got["batch after"] = s.get(BOB, "b").value  # type: ignore[union-attr]
    # last: InMemoryStore's get creates the namespace it reads, which its listings then show
    got["get elsewhere"] = [s.get(("nobody",), "m1"), s.get(("users",), "m1")]
    return got


def test_the_same_calls_answer_as_langgraphs_own_stores(beads: BeadsStore, postgres: PostgresStore) -> None:
    ours, in_memory, stock = answers(beads), answers(InMemoryStore()), answers(postgres)
    for name in in_memory:
        assert ours[name] == in_memory[name], name
        if name != "search nested":
            assert ours[name] == stock[name], name
    assert stock["search nested"] == "refused: Unsupported operator: city"
    # the look-alikes each read only themselves
    assert [ns for ns, _, _ in ours["search user_1"]] == [("user_1",)]
    assert [ns for ns, _, _ in ours["search a%"]] == [("a%",)]
    assert {ns for ns, _, _ in ours["search a"]} == {("a",), ("a", "b")}


def test_listing_orders_pages_and_timestamps_as_postgres_store_does(
    beads: BeadsStore, postgres: PostgresStore
) -> None:
    for s in (beads, postgres):
        for n in range(5):
            s.put(ALICE, f"k{n}", {"content": f"memory {n}"})
        s.put(ALICE, "k1", {"content": "memory 1, updated"})
    pages = [
        [[i.key for i in s.search(ALICE, limit=2, offset=o)] for o in (0, 2, 4)] for s in (beads, postgres)
    ]
    assert pages[0] == pages[1] == [["k1", "k4"], ["k3", "k2"], ["k0"]]  # newest first
    item = beads.get(ALICE, "k1")
    assert item is not None and item.created_at < item.updated_at  # created stays, updated moves
    assert beads.list_namespaces(max_depth=2) == postgres.list_namespaces(max_depth=2) == [("users", "alice")]


def test_a_put_to_an_existing_key_keeps_the_old_value_as_history(store: FactStore) -> None:
    beads = BeadsStore(store, history=True)
    beads.put(ALICE, "budget", {"content": "The budget is $100k."})
    beads.put(ALICE, "budget", {"content": "The budget is $100k."})  # the same value: nothing written
    beads.put(ALICE, "budget", {"content": "The budget is $120k."})
    beads.put(ALICE, "budget", {"content": "The budget is $100k."})  # back again: a third version
    assert [i.value["content"] for i in beads.history(ALICE, "budget")] == [
        "The budget is $100k.",
        "The budget is $120k.",
        "The budget is $100k.",
    ]
    facts = store.audit.session_facts(session_of(ALICE))
    assert sorted(f.status.value for f in facts) == ["active", "superseded", "superseded"]
    assert {(f.kind, f.source) for f in facts} == {(Kind.CONCLUSION, Source.REMEMBER_TOOL)}
    [current] = [f for f in facts if f.status is Status.ACTIVE]
    assert beads.fact(ALICE, "budget") == current
    assert [v.body for v in store.audit.history(current)] == [
        i.value["content"] for i in beads.history(ALICE, "budget")
    ]
    beads.delete(ALICE, "budget")  # a real delete, every version
    assert beads.history(ALICE, "budget") == [] and store.audit.session_facts(session_of(ALICE)) == []
    beads.put(ALICE, "budget", {"content": "The budget is $100k."})  # the same text, stored anew
    assert [i.value for i in beads.history(ALICE, "budget")] == [{"content": "The budget is $100k."}]


@pytest.fixture
def ranked(pool: ConnectionPool, minilm: MiniLMEmbedder) -> BeadsStore:
    """The options that make it ours: old values kept as history, our ranking."""
    facts = FactStore(pool, minilm)
    facts.setup()
    return BeadsStore(facts, fields=["content"], history=True, ranking="beads")


def test_search_ranks_with_ours(ranked: BeadsStore) -> None:
    ranked.put(ALICE, "budget", {"content": "Our budget is $100k per year."})
    ranked.put(ALICE, "db", {"content": "We need a vector database we can self-host."})
    ranked.put(ALICE, "budget", {"content": "Our budget is $120k per year."})
    ranked.put(BOB, "budget", {"content": "Bob's budget is $5k."})
    hits = ranked.search(ALICE, query="What is our budget?")
    assert hits[0].key == "budget" and hits[0].value["content"] == "Our budget is $120k per year."
    assert [h.key for h in hits].count("budget") == 1  # one item per key, in its current value
    assert all(h.score is not None for h in hits)
    # a match on the old value finds the current one
    [old] = [h for h in ranked.search(ALICE, query="$100k per year") if h.key == "budget"]
    assert old.value["content"] == "Our budget is $120k per year."
    # under a prefix, the sessions below it are ranked together; filters and pages apply
    both = ranked.search(("users",), query="budget", limit=10)
    assert {(h.namespace, h.key) for h in both} >= {(ALICE, "budget"), (BOB, "budget")}
    assert [
        h.namespace
        for h in ranked.search(("users",), query="budget", filter={"content": "Bob's budget is $5k."})
    ] == [BOB]
    assert len(ranked.search(("users",), query="budget", limit=1, offset=1)) == 1
    # nothing relevant: nothing, where LangGraph's stores answer the nearest items anyway
    assert ranked.search(ALICE, query="What colour is the logo of the football club?") == []


def test_unindexed_items_are_listed_after_ranked_ones(ranked: BeadsStore) -> None:
    ranked.put(ALICE, "budget", {"content": "Our budget is $120k per year."})
    ranked.put(ALICE, "raw", {"content": "Our budget in the ledger."}, index=False)
    ranked.put(ALICE, "other", {"note": "no content field"})  # nothing at the index field
    hits = ranked.search(ALICE, query="What is our budget?", limit=10)
    assert hits[0].key == "budget" and hits[0].score is not None
    assert {h.key for h in hits[1:]} == {"raw", "other"} and all(h.score is None for h in hits[1:])
    assert ranked.get(ALICE, "raw") is not None


def test_what_langgraph_refuses_is_refused(beads: BeadsStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        beads.put(("a.b",), "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError):
        beads.batch([GetOp(("a.b",), "k")])  # ops sent straight to batch are checked too
    with pytest.raises(InvalidNamespaceError):
        beads.put(("langgraph", "x"), "k", {"content": "x"})
    beads.put(ALICE, "k", {"n": 1})
    with pytest.raises(ValueError, match="Unsupported operator"):
        beads.search(ALICE, filter={"n": {"$in": [1]}})
    with pytest.raises(ValueError, match="ranking"):
        BeadsStore(beads.facts, ranking="fused")  # type: ignore[arg-type]


def test_the_helpers() -> None:
    assert escape_like("a_b%c\\") == "a\\_b\\%c\\\\"
    assert item_text({"content": "x", "meta": {"t": ["y", 3]}}, ["$"]) == "x\ny"
    assert item_text({"content": "x", "meta": {"t": ["y"]}}, ["meta.t[*]"]) == "y"
    assert matches({"n": 3}, {"n": {"$gt": 2, "$lt": 4}}) and not matches({}, {"n": {"$gt": 2}})


async def test_the_async_face(beads: BeadsStore) -> None:
    await beads.aput(ALICE, "k", {"content": "Alice likes tea."})
    item = await beads.aget(ALICE, "k")
    assert isinstance(item, Item) and item.value == {"content": "Alice likes tea."}
    assert [i.key for i in await beads.asearch(("users",))] == ["k"]
    assert await beads.alist_namespaces() == [ALICE]
    await beads.adelete(ALICE, "k")
    assert await beads.aget(ALICE, "k") is None


def test_langmems_tools_and_runtime_store_run_on_it_unchanged(ranked: BeadsStore) -> None:
    namespace = ("memories", "{langgraph_user_id}")

    @tool
    def count_memories(runtime: ToolRuntime) -> str:
        """How many memories the user has."""
        assert runtime.store is ranked
        return str(len(runtime.store.search(("memories", "alice"))))

    def agent(*replies: Any) -> Any:
        model = ScriptedChatModel(replies=list(replies))
        tools = [
            create_manage_memory_tool(namespace=namespace),
            create_search_memory_tool(namespace=namespace),
            count_memories,
        ]
        return model, create_agent(model, tools=tools, store=ranked)

    def run(built: Any, text: str) -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4()), "langgraph_user_id": "alice"}}
        built.invoke({"messages": [HumanMessage(text)]}, config)

    model, built = agent(
        calls(tool_call("manage_memory", content="Budget is $100k per year.")),
        "Noted.",
        calls(tool_call("search_memory", query="budget"), tool_call("count_memories")),
        lambda messages: "Answered.",
    )
    run(built, "Our budget is $100k per year.")
    run(built, "What is our budget?")
    [item] = ranked.search(("memories", "alice"))
    assert item.value == {"content": "Budget is $100k per year."}
    said = [str(m.content) for m in model.prompts[-1] if m.type == "tool"]
    assert "Budget is $100k per year." in said[0] and said[1] == "1"

    # LangMem's update keeps the key: on this store the old value stays as the key's history
    model, built = agent(
        calls(tool_call("manage_memory", content="Budget is $120k per year.", action="update", id=item.key)),
        "Updated.",
    )
    run(built, "Correction: our budget is $120k per year.")
    assert [i.value["content"] for i in ranked.history(("memories", "alice"), item.key)] == [
        "Budget is $100k per year.",
        "Budget is $120k per year.",
    ]
    [hit] = ranked.search(("memories", "alice"), query="budget")
    assert hit.key == item.key and hit.value["content"] == "Budget is $120k per year."


async def test_the_playgrounds_stock_lane_runs_on_it(db_url: str, minilm: MiniLMEmbedder) -> None:
    """The stock lane as the playground runs it (async, replay-safe creates) with PLAYGROUND_STOCK_STORE=beads."""
    from playground.comparison.lanes import build_stock_agent
    from playground.comparison.stock import open_async_stock_store

    stock, handle = await open_async_stock_store(db_url, minilm, backend="beads")
    try:
        assert isinstance(stock, BeadsStore)
        model = ScriptedChatModel(
            replies=[
                calls(tool_call("manage_memory", content="Budget is $100k per year; must be self-hostable.")),
                "Noted.",
                calls(tool_call("manage_memory", content="Budget is $120k per year.")),
                "Updated.",
                calls(tool_call("search_memory", query="budget")),
                lambda messages: f"From memory: {messages[-1].content}",
            ]
        )
        agent = build_stock_agent(model, stock, research=False)
        for text in (
            "Our budget is $100k per year. It must be self-hostable.",
            "Correction: our budget is $120k per year.",
            "What is our budget?",
        ):
            config = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": "vecdb"}}
            await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        items = await stock.asearch(("memories", "vecdb"), query="budget")
        # LangMem created a second memory rather than updating the first: both stay current
        assert sorted(i.value["content"] for i in items) == [
            "Budget is $100k per year; must be self-hostable.",
            "Budget is $120k per year.",
        ]
        assert "$120k" in str(model.prompts[-1][-1].content)
        # the lane's memories are a session of their own, never our lane's "vecdb"
        assert stock.facts.audit.session_facts("vecdb") == []
        assert len(stock.facts.audit.session_facts("memories.vecdb")) == 2
    finally:
        await handle.close()


def test_by_default_scores_are_cosine_similarities_of_the_current_values(store: FactStore) -> None:
    """As PostgresStore: `score` is the cosine similarity of the item's best indexed text, no
    relevance floor drops a hit, and after an update the old value no longer matches as it did."""
    beads = BeadsStore(store, fields=["title", "body"])
    beads.put(ALICE, "doc", {"title": "zany zebra", "body": "Xerxes"})
    beads.put(ALICE, "other", {"title": "something about dogs"})
    embed = store.embedder.embed
    [query, zebra, xerxes] = (np.array(v) for v in embed(["zany zebra", "zany zebra", "Xerxes"]))
    hits = beads.search(ALICE, query="zany zebra", limit=10)
    assert [h.key for h in hits] == ["doc", "other"]  # nothing dropped, however unrelated
    cosine = float(query @ zebra / np.linalg.norm(query) / np.linalg.norm(zebra))
    assert hits[0].score == pytest.approx(cosine, abs=1e-6)  # the best of its two texts
    assert hits[0].score > float(query @ xerxes)
    before = hits[0].score
    beads.put(ALICE, "doc", {"title": "new text about dogs"})
    after = next(h.score for h in beads.search(ALICE, query="zany zebra") if h.key == "doc")
    assert after is not None and after < before
    assert beads.history(ALICE, "doc") == [beads.get(ALICE, "doc")]  # no history kept by default


def test_filters_in_sql_answer_as_the_python_test_does(store: FactStore) -> None:
    beads = BeadsStore(store)
    values = [
        {"n": 1, "s": "a", "tags": ["x"], "where": {"city": "Austin", "zip": 1}},
        {"n": 10, "s": "b", "tags": ["x", "y"], "where": {"city": "Boston"}},
        {"n": 9.5, "s": "10", "flag": True},
        {"n": "3", "s": None},
        {},
    ]
    for i, value in enumerate(values):
        beads.put(ALICE, f"k{i}", value)
    for wanted in [
        {"n": 1},
        {"n": {"$gt": 9}},
        {"n": {"$gte": 1, "$lt": 10}},
        {"n": {"$ne": 1}},
        {"n": {"$eq": "3"}},
        {"s": {"$gt": "a"}},
        {"tags": ["x"]},
        {"where": {"city": "Austin"}},
        {"where": {"city": {"$ne": "Austin"}}},
        {"flag": True},
        {"s": None},
        {"missing": {"$lt": 5}},
    ]:
        expected = sorted(f"k{i}" for i, v in enumerate(values) if matches(v, wanted))
        assert sorted(i.key for i in beads.search(ALICE, filter=wanted, limit=50)) == expected, wanted
        with_query = beads.search(ALICE, query="anything", filter=wanted, limit=50)
        assert sorted(i.key for i in with_query) == expected, wanted


def _expires_at(store: FactStore, namespace: tuple[str, ...], key: str) -> Any:
    with store.pool.connection() as conn:
        row = conn.execute(
            "SELECT expires_at FROM beads.store WHERE prefix = %s AND key = %s", (session_of(namespace), key)
        ).fetchone()
    return None if row is None else row["expires_at"]


def _expire_now(store: FactStore, namespace: tuple[str, ...], key: str) -> None:
    with store.pool.connection() as conn:
        conn.execute(
            "UPDATE beads.store SET expires_at = now() - interval '1 minute' WHERE prefix = %s AND key = %s",
            (session_of(namespace), key),
        )


def test_ttl_refresh_on_read_and_the_sweeper_archives(store: FactStore) -> None:
    beads = BeadsStore(store, ttl={"default_ttl": 30, "refresh_on_read": True})
    assert beads.supports_ttl
    beads.put(ALICE, "short", {"content": "goes"})  # the default TTL
    beads.put(ALICE, "kept", {"content": "stays"}, ttl=None)
    assert _expires_at(store, ALICE, "kept") is None
    first = _expires_at(store, ALICE, "short")
    assert beads.get(ALICE, "short", refresh_ttl=False) is not None
    assert _expires_at(store, ALICE, "short") == first
    beads.get(ALICE, "short")  # refresh_on_read: a read pushes the expiry on
    assert _expires_at(store, ALICE, "short") > first
    _expire_now(store, ALICE, "short")
    # expired but not swept: read as LangGraph's stores read it, unless omit_expired
    assert beads.get(ALICE, "short", refresh_ttl=False) is not None
    assert beads.ttl_config is not None
    beads.ttl_config["omit_expired"] = True
    assert beads.get(ALICE, "short") is None and [i.key for i in beads.search(ALICE)] == ["kept"]
    beads.ttl_config["omit_expired"] = False
    assert beads.sweep_ttl() == 1 and beads.sweep_ttl() == 0
    assert beads.get(ALICE, "short") is None and beads.list_namespaces() == [ALICE]
    # nothing lost: the expired item is an archived fact saying why
    [archived] = [f for f in store.audit.session_facts(session_of(ALICE)) if f.status is Status.ARCHIVED]
    assert archived.body == "goes" and archived.metadata["consolidation"]["action"] == "expired"
    assert beads.start_ttl_sweeper(sweep_interval_minutes=60) is not None
    assert beads.stop_ttl_sweeper(timeout=5)


def test_index_config_is_reported(store: FactStore) -> None:
    beads = BeadsStore(store, fields=["content"])
    config = beads.index_config
    assert config["dims"] == store.embedder.dims and config["fields"] == ["content"]
    assert config["embed"]("a vector") is not None  # type: ignore[operator]


async def test_the_async_store_batches_concurrent_calls(store: FactStore) -> None:
    beads = BeadsStore(store)
    async_store = AsyncBeadsStore(beads)
    batches: list[int] = []
    original = beads.batch

    def counting(ops: Any) -> Any:
        ops = list(ops)
        batches.append(len(ops))
        return original(ops)

    beads.batch = counting  # type: ignore[method-assign]
    await asyncio.gather(*(async_store.aput(ALICE, f"k{i}", {"n": i}) for i in range(20)))
    got = await asyncio.gather(*(async_store.aget(ALICE, f"k{i}") for i in range(20)))
    assert [i.value["n"] for i in got if i is not None] == list(range(20))
    assert batches == [20, 20]  # one batch for the puts, one for the gets
    with pytest.raises(asyncio.InvalidStateError):
        async_store.get(ALICE, "k1")  # a sync call from the event loop's own thread
    assert (await asyncio.to_thread(async_store.get, ALICE, "k1")) is not None


def test_items_stored_before_item_vectors_are_searchable_after_the_upgrade(empty_db_url: str) -> None:
    """Before migration 0010 an item was a fact with its item in the metadata and one vector, the
    fact's own; 0010 added beads.item_vectors, which search scores by. The upgrade copies the old
    vectors there: the old items are found by similarity, not listed unscored after the rest."""
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        migrate_to(conn, 9)
    old = {
        "tea": {"content": "Alice likes green tea in the morning."},
        "city": {"content": "Alice moved to Austin last spring."},
        "hidden": {"content": "Put with index=False."},
    }
    with open_pool(empty_db_url, min_size=1, max_size=2) as pool:
        facts = FactStore(pool, FakeEmbedder(64))
        root = facts.root(session_of(ALICE))
        for key, value in old.items():  # as BeadsStore's put wrote them then
            indexed = key != "hidden"
            facts.remember_result(
                root,
                item_text(value, ["$"]) if indexed else json.dumps(value, sort_keys=True),
                kind=Kind.CONCLUSION,
                source=Source.REMEMBER_TOOL,
                source_key=f"store:{key}:{uuid.uuid4().hex}",
                acting_on_behalf_of="user",
                metadata={
                    "store_item": {"key": key, "namespace": list(ALICE), "value": value, "indexed": indexed}
                },
            )
        with pool.connection() as conn:
            assert setup(conn) == [m.version for m in migrations() if m.version >= 10]
        beads = BeadsStore(facts)
        hits = beads.search(ALICE, query="Alice likes green tea in the morning.", limit=10)
        assert [h.key for h in hits][:2] == ["tea", "city"] and hits[2].key == "hidden"
        assert hits[0].score == pytest.approx(1.0, abs=1e-6)
        assert hits[1].score is not None and hits[2].score is None  # index=False stays unscored
        tea = beads.get(ALICE, "tea")
        assert tea is not None and tea.value == old["tea"]
        # an item put after the upgrade ranks among them in the same space
        beads.put(ALICE, "new", {"content": "Alice moved to Austin last spring!"})
        ranked = beads.search(ALICE, query="Alice moved to Austin last spring.", limit=2)
        assert {h.key for h in ranked} == {"city", "new"}


@pytest.mark.parametrize("in_background", [False, True], ids=["indexing-inline", "indexing-in-background"])
@pytest.mark.parametrize("history", [False, True], ids=["replace", "history"])
async def test_abatch_takes_one_connection_from_the_pool_whatever_its_ops(
    pool: ConnectionPool, in_background: bool, history: bool
) -> None:
    """What LangGraph's test_abatch_uses_single_pool_checkout asks of AsyncPostgresStore (counting its
    private pool helper, so it is an expected failure upstream), held here on a real pool: one
    checkout per batch, gets, searches, listings, puts and deletes together, the first batch (which
    registers the vector space) included. With indexing in the background the indexer's thread
    takes its own connection, off the batch; it is not counted."""
    facts = FactStore(pool, FakeEmbedder(64), index_in_background=in_background)
    beads = BeadsStore(facts, history=history)
    checkouts: list[str] = []
    getconn = pool.getconn

    def counting(timeout: float | None = None) -> Any:
        if threading.current_thread().name != "beads-indexer":
            checkouts.append(threading.current_thread().name)
        return getconn(timeout)

    pool.getconn = counting  # type: ignore[method-assign]
    try:
        batches: list[list[Any]] = [
            [PutOp(ALICE, "tea", {"content": "Alice likes tea."}), PutOp(BOB, "x", {"content": "Bob."})],
            [
                GetOp(ALICE, "tea"),
                SearchOp(("users",), query="tea", limit=5),
                SearchOp(("users",), filter={"content": "Bob."}),
                ListNamespacesOp(match_conditions=(), max_depth=2),
                PutOp(ALICE, "tea", {"content": "Alice likes green tea."}),  # replaces (or supersedes)
                PutOp(BOB, "x", None),  # a delete
            ],
            [GetOp(ALICE, "tea"), GetOp(BOB, "x")],
        ]
        results = []
        for ops in batches:
            before = len(checkouts)
            results.append(await beads.abatch(ops))
            assert len(checkouts) - before == 1, (ops, checkouts[before:])
    finally:
        pool.getconn = getconn  # type: ignore[method-assign]
        facts.close()
    got, bob = results[2]
    assert got is not None and got.value == {"content": "Alice likes green tea."} and bob is None
    assert [h.key for h in results[1][1]][:1] == ["tea"] and results[1][3] == [
        ("users", "alice"),
        ("users", "bob"),
    ]


@pytest.mark.parametrize(
    ("namespace", "key", "value", "where"),
    [
        (("docs",), "k", {"text": "hello\x00world"}, "a text in the value"),
        (("docs",), "k\x00", {"text": "hello"}, "key"),
        (("docs", "\ud800"), "k", {"text": "hello"}, "namespace[1]"),
    ],
)
def test_text_postgres_cannot_store_is_refused_with_where_it_is(
    store: FactStore, namespace: tuple[str, ...], key: str, value: dict[str, str], where: str
) -> None:
    from memory.errors import InvalidTextError

    beads = BeadsStore(store)
    with pytest.raises(InvalidTextError, match=where.replace("[", r"\[").replace("]", r"\]")):
        beads.put(namespace, key, value)
    beads.put(("docs",), "fine", {"text": "hello world"})  # the store goes on
    assert beads.get(("docs",), "fine") is not None
