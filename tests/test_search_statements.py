"""What a search sends: the candidate statement, then the chosen few's rows, prepared where the pool
allows it and the plan will hold, and the same hits either way.

Timing lives in bench/search_latency.py and bench/session_search.py; these tests pin the shape that
the figures depend on: a search is two round trips (what ranking reads of every candidate, then the
winners' rows, how their versions were replaced and their restates edges), the candidate statement
is one text for queries of any number of words up to a slot size (so a connection settles on its
generic plans after a few searches), the library's pools prepare only the statements the library asks
for, and only once the tables have statistics (memory.postgres.prepared), and a pool without prepared
statements (for a pooler in transaction mode) answers alike.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import tuple_row

from memory import retrieval
from memory.embedders import FakeEmbedder
from memory.flags import PossiblyOutdated, SaidBefore
from memory.graph.importing import ImportMessage
from memory.graph.store import FactStore
from memory.model import Kind, Namespace, SearchResult, Source
from memory.postgres import prepared
from memory.postgres.connection import connection_kwargs, open_pool
from memory.retrieval import SearchOptions, pipeline
from memory.retrieval.hnsw import ef_search_for, set_hnsw_local
from memory.retrieval.keywords import MAX_KEYWORD_WORDS
from memory.retrieval.statement import WORD_SLOTS, candidate_query
from tests.plan_helpers import indexes_read
from tests.schema_helpers import migrate_to

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FACTS = [
    "Our budget is $100k per year.",
    "The deploy region of the billing api is eu-west-1.",
    "The billing api's owner is team atlas.",
    "Postgres 16 runs the billing api, behind a pooler.",
    "The retention window of the audit log is 30 days.",
]


class CountingCursor(psycopg.Cursor[Any]):
    """A cursor that counts the statements sent through it."""

    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        text = query.as_string(self.connection) if isinstance(query, sql.Composable) else str(query)
        CountingCursor.sent.append(text)
        return super().execute(query, params, **kwargs)


@pytest.fixture(autouse=True)
def small_tables_prepare(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tables hold a few facts: prepare once they have statistics at all."""
    monkeypatch.setattr(prepared, "MIN_ROWS", 1)


def analyzed(store: FactStore) -> None:
    with store.pool.connection() as conn:
        conn.execute("ANALYZE beads.fact_vectors")
    prepared._checked.clear()


def fill(store: FactStore) -> Any:
    ns = store.root("s1")
    for i, body in enumerate(FACTS):
        store.remember(ns, body, kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, source_key=f"k{i}")
    old = store.remember(
        ns, "The owner of the payments queue is team cobalt.", kind=Kind.USER_INPUT, source_key="o"
    )
    new = store.remember(
        ns, "The owner of the payments queue is team delta.", kind=Kind.USER_INPUT, source_key="n"
    )
    store.supersede(new, old)
    store.index_pending()
    analyzed(store)
    return ns


def answers(store: FactStore, ns: Any, queries: list[str]) -> list[Any]:
    return [
        [(h.fact.id, round(h.score, 9), h.resolved_from and h.resolved_from.id, h.flags) for h in r.hits]
        for r in (store.search(ns, q, relevance_floor=-1.0) for q in queries)
    ]


QUERIES = ["Who owns the payments queue?", "Where is the billing api deployed?", "budget", "audit log"]


def searched(store: FactStore, ns: Namespace, queries: list[str]) -> list[SearchResult]:
    """Each query searched on one connection (after a first search that sets it up), the statements
    sent for them kept in CountingCursor.sent."""
    with store.pool.connection() as conn:
        [qvec] = store.embedder.embed(queries[:1])
        retrieval.search(conn, ns, queries[0], qvec, store.embedder_id, store.embedder.dims)  # settings
        conn.cursor_factory = CountingCursor
        CountingCursor.sent.clear()
        try:
            return [
                retrieval.search(conn, ns, query, qvec, store.embedder_id, store.embedder.dims)
                for query, qvec in zip(queries, store.embedder.embed(queries), strict=True)
            ]
        finally:
            conn.cursor_factory = psycopg.Cursor


def test_a_search_is_the_candidate_statement_then_the_chosen_rows(store: FactStore) -> None:
    assert all(result.hits for result in searched(store, fill(store), QUERIES))
    # per search: the settings of the candidate statement's transaction and the statement (one
    # pipeline, one round trip), then the chosen facts and, where a hit was resolved from an older
    # version, the edge that replaced it, sent together (one pipeline, one round trip)
    searches = (
        " ".join(map(shape, CountingCursor.sent)).replace("settings candidates facts", "search").split()
    )
    assert searches.count("search") == len(QUERIES)
    assert set(searches) == {"search", "replaced"}  # the payments queue's owner: resolved from cobalt
    assert all(a == "search" for a, b in itertools.pairwise(searches) if b == "replaced")


SHAPES = (
    ("settings", "set_config"),
    ("candidates", "claim_hits"),
    ("facts", "AS restates"),
    ("replaced", "chosen.hit_id"),
)


def shape(text: str) -> str:
    """Which of a search's statements `text` is."""
    return next((name for name, part in SHAPES if part in text), f"another statement: {text[:60]}")


def test_the_starts_of_the_hits_messages_come_with_their_rows(store: FactStore) -> None:
    """Same-slot order asks whether two hits were said in long messages (then they are only ordered,
    memory.rules.slots): the start of each hit's message is read with the chosen rows, not in a
    third round trip."""
    around = " We went through the house room by room and agreed to keep the hallway as it is." * 3
    root = store.root("rooms")
    for day, text in enumerate(
        ("The living room walls are painted Agreeable Gray.", "Just finished painting the bedroom Sea Salt.")
    ):
        store.capture_message(root, text + around, message_id=f"m{day}", valid_from=T0 + timedelta(days=day))
    [result] = searched(store, root, ["Which colors are the living room and the bedroom painted?"])
    # (not prepared: these tables have no statistics yet, so no settings are sent either)
    assert [shape(text) for text in CountingCursor.sent] == ["candidates", "facts"]
    flags = [f for h in result.hits for f in h.flags]
    # read as claims of long messages: ordered, the older one said before, neither marked outdated
    assert any(isinstance(f, SaidBefore) for f in flags)
    assert not any(isinstance(f, PossiblyOutdated) for f in flags)


def test_the_candidate_statement_keeps_its_generic_plan(store: FactStore) -> None:
    """Left to choose, Postgres planned the statement of five or more words afresh on every search
    (its generic plan's estimate never beat the custom plans'): a prepared candidate statement is told
    to keep its generic plan."""
    ns = fill(store)
    query = "owner payments queue billing deploy region retention audit"  # eight content words
    [qvec] = store.embedder.embed([query])
    with store.pool.connection() as conn:
        for _ in range(8):
            retrieval.search(conn, ns, query, qvec, store.embedder_id, store.embedder.dims)
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%claim_hits%'"
        ).fetchall()
    assert plans
    assert all(p["custom_plans"] == 0 and p["generic_plans"] >= 8 for p in plans)


def test_a_search_inside_a_callers_transaction_leaves_its_plans_to_postgres(store: FactStore) -> None:
    """A forced generic plan is set for the search's own transaction only. Inside a caller's, a
    setting made for the search would last to the caller's commit and plan its one-off statements
    without their values."""
    ns = fill(store)
    query = "owner payments queue billing deploy region retention audit"
    [qvec] = store.embedder.embed([query])
    with store.pool.connection() as conn, conn.transaction():
        retrieval.search(conn, ns, query, qvec, store.embedder_id, store.embedder.dims)
        row = conn.execute("SELECT current_setting('plan_cache_mode') AS mode").fetchone()
    assert row is not None and row["mode"] == "auto"


def test_a_fact_deleted_between_the_two_reads_is_left_out(
    store: FactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = fill(store)
    query = "Where is the billing api deployed?"
    before = store.search(ns, query, relevance_floor=-1.0)
    gone = before.hits[0].fact
    read = pipeline.read_chosen

    def delete_first(conn: Any, session_id: str, pairs: Any, **kwargs: Any) -> Any:
        conn.execute("DELETE FROM beads.facts WHERE id = %s", (gone.id,))
        return read(conn, session_id, pairs, **kwargs)

    monkeypatch.setattr(pipeline, "read_chosen", delete_first)
    after = store.search(ns, query, relevance_floor=-1.0)
    assert [h.fact.id for h in after.hits] == [h.fact.id for h in before.hits[1:]]


def test_the_candidate_statement_is_one_text_for_queries_of_up_to_a_slot_of_words(store: FactStore) -> None:
    ns = store.root("s1")
    words = [f"word{n}" for n in range(MAX_KEYWORD_WORDS)]
    texts = set()
    with store.pool.connection() as conn:
        for n in range(1, MAX_KEYWORD_WORDS + 1):
            statement, _ = candidate_query(ns, " ".join(words[:n]), [0.0] * 8, 1, 8, SearchOptions())
            texts.add(statement.as_string(conn))
    assert len(texts) == len(WORD_SLOTS)


def test_only_the_statements_asked_for_are_prepared(db_url: str) -> None:
    with open_pool(db_url, min_size=1, max_size=1) as pool:
        store = FactStore(pool, FakeEmbedder(64))
        store.setup()
        ns = fill(store)
        for query in QUERIES:
            store.search(ns, query)
        with pool.connection() as conn:
            prepared = [r["statement"] for r in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert any("claim_hits" in text for text in prepared), "the candidate statement is prepared"
    # besides the statements the library asks to prepare (search's candidates and chosen rows, capture's nearest
    # earlier claims, supersede's echo lookup), only what psycopg's executemany prepares by itself
    # (the vector inserts); nothing of the migrations, the other writes or the coverage check
    asked = ("claim_hits", "AS restates", "chosen.hit_id", "nearest.scan", "WITH said AS")
    for text in prepared:
        assert any(part in text for part in asked) or text.startswith("INSERT INTO beads."), text


def test_nothing_is_prepared_before_the_tables_have_statistics(store: FactStore) -> None:
    # a plan made now, from no statistics, would be kept while the tables grow: a nested loop over
    # every row of both (memory.postgres.prepared)
    ns = store.root("s1")
    for i, body in enumerate(FACTS):
        store.remember(ns, body, kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, source_key=f"k{i}")
    prepared._checked.clear()
    for query in QUERIES:
        store.search(ns, query)
    with store.pool.connection() as conn:
        assert not prepared.worth_preparing(conn)
        statements = [r["statement"] for r in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert not any("claim_hits" in text or "nearest.scan" in text for text in statements)
    analyzed(store)
    for query in QUERIES:
        store.search(ns, query)
    with store.pool.connection() as conn:
        assert prepared.worth_preparing(conn)


def test_a_callers_own_connection_prepares_nothing_before_the_tables_have_statistics(
    store: FactStore, db_url: str
) -> None:
    # a connection of the caller's, with psycopg's own prepare_threshold (5): the search must not let
    # psycopg prepare its statement by counting while memory.postgres.prepared says not yet
    ns = store.root("s1")
    for i, body in enumerate(FACTS):
        store.remember(ns, body, kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, source_key=f"k{i}")
    with psycopg.connect(db_url, **{**connection_kwargs(), "prepare_threshold": 5}) as conn:
        register_vector(conn)
        assert not prepared.worth_preparing(conn)
        for query, qvec in zip(QUERIES * 3, store.embedder.embed(QUERIES * 3), strict=True):
            retrieval.search(conn, ns, query, qvec, store.embedder_id, store.embedder.dims)
        statements = [r["statement"] for r in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert not any("claim_hits" in text for text in statements)


def test_a_pool_without_prepared_statements_prepares_nothing_and_answers_alike(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert connection_kwargs(False)["prepare_threshold"] is None
    monkeypatch.setenv("BEADS_PREPARED_STATEMENTS", "false")
    assert connection_kwargs()["prepare_threshold"] is None
    with open_pool(db_url, min_size=1, max_size=1) as unprepared:
        store = FactStore(unprepared, FakeEmbedder(64))
        store.setup()
        ns = fill(store)
        without = answers(store, ns, QUERIES * 3)  # past psycopg's and the server's first executions
        with unprepared.connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()["n"] == 0
    monkeypatch.delenv("BEADS_PREPARED_STATEMENTS")
    with open_pool(db_url, min_size=1, max_size=1) as prepared:
        store = FactStore(prepared, FakeEmbedder(64))
        store.setup()
        with_prepared = answers(store, ns, QUERIES * 3)
    assert with_prepared == without
    assert any(resolved for hits in without for _, _, resolved, _ in hits), "a resolved hit is compared"


def test_a_large_session_walks_the_index_and_a_small_one_reads_its_claims(store: FactStore) -> None:
    # A session that is a large share of every claim finds its nearest claims by walking the HNSW
    # index; joined plainly, the planner read all its claims instead once it was a quarter of the
    # table. A small one among many reads its claims: a walk would pass thousands of others' claims
    # and stop (hnsw.max_scan_tuples) short of its own.
    said = [
        ImportMessage(f"Service {n} runs on node {n % 17} in rack {n % 5}.", message_id=f"m{n}")
        for n in range(300)
    ]
    store.import_messages("large", said)
    store.import_messages("small", said[:3])  # 1% of the claims
    store.index_pending()
    ran = {}
    for session in ("large", "small"):
        root = store.root(session)
        query = "Which node does service 7 run on?"
        statement, params = candidate_query(
            root,
            query,
            store.embedder.embed([query])[0],
            store.embedder_id,
            store.embedder.dims,
            SearchOptions(),
        )
        with store.pool.connection() as conn, conn.transaction():
            set_hnsw_local(conn, ef_search_for(SearchOptions()))
            [explained] = conn.execute(
                sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement, params
            ).fetchone()["QUERY PLAN"]
        ran[session] = indexes_read(explained["Plan"])
    assert any(name.startswith("fact_vectors_hnsw") for name in ran["large"])
    assert not any(name.startswith("fact_vectors_hnsw") for name in ran["small"])
    assert store.search(store.root("small"), "Which node does service 1 run on?").hits  # and it finds them


def _claim_graphs(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'beads' AND c.relname LIKE 'fact_vectors_hnsw_%'"
        )
        .fetchall()
    )
    return {row[0]: sorted(row[1] or []) for row in rows}


def test_the_claim_graph_is_built_with_m_12_before_and_after_the_upgrade(empty_db_url: str) -> None:
    # A message writes about three claim vectors and each insert re-prunes neighbour lists of 2m
    # entries: m = 12 cuts an insert by about a third (migration 0014). A space registered before
    # the upgrade had pgvector's default graph, which the upgrade builds again; one registered
    # after gets the same settings, and search still walks it.
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        migrate_to(conn, 13)
        row = conn.execute(
            "INSERT INTO beads.embedders (name, dims) VALUES ('old', 8) RETURNING id"
        ).fetchone()
        assert row is not None
        old = row[0]
        conn.execute(  # as registration made them before 0014
            sql.SQL(
                "CREATE INDEX {} ON beads.fact_vectors USING hnsw ((embedding::vector(8)) vector_cosine_ops) "
                "WHERE embedder_id = {} AND indexed"
            ).format(sql.Identifier(f"fact_vectors_hnsw_{old}"), sql.Literal(old))
        )
        assert _claim_graphs(conn) == {f"fact_vectors_hnsw_{old}": []}
    leaner = ["ef_construction=64", "m=12"]
    with open_pool(empty_db_url, min_size=1, max_size=2) as pool:
        store = FactStore(pool, FakeEmbedder(64))
        store.setup()
        with pool.connection() as conn:
            assert _claim_graphs(conn) == {
                f"fact_vectors_hnsw_{old}": leaner,
                f"fact_vectors_hnsw_{store.embedder_id}": leaner,
            }
        said = [ImportMessage(f"Service {n} runs on node {n % 17}.", message_id=f"m{n}") for n in range(200)]
        store.import_messages("s", said)
        store.index_pending()
        hits = store.search(store.root("s"), "Which node does service 7 run on?").hits
        assert any("Service 7 runs" in h.fact.body for h in hits)


def test_keyword_matches_of_equal_rank_are_kept_in_id_order(store: FactStore) -> None:
    # 24 messages that each name the word once rank equally on it, their claims and their passages
    # (two sentences: a message that is one claim is its own passage), and a side keeps 16: which 16
    # is the ids' call, not the order the rows were written in (two ingestions of one chat wrote
    # them in different orders and gave different windows). 24 stays under keyword_common (30), so
    # the word is searched, not left out as common.
    said = [
        ImportMessage(f"Zebra sighting number {n} was logged at dawn. The herd moved on.", message_id=f"m{n}")
        for n in range(24)
    ]
    store.import_messages("s", list(reversed(said)))
    store.index_pending()
    ns = store.root("s")
    options = SearchOptions(k=8)
    with store.pool.connection() as conn:
        [qvec] = store.embedder.embed(["zebra"])
        statement, params = candidate_query(
            ns, "zebra", qvec, store.embedder_id, store.embedder.dims, options
        )
        with conn.transaction():
            set_hnsw_local(conn, ef_search_for(options))
            rows = conn.execute(statement, params).fetchall()
        claims = conn.execute(
            "SELECT id, passage_id FROM beads.facts WHERE session_id = 's' AND body ILIKE '%%zebra%%'"
        ).fetchall()
    assert len(claims) == 24
    ranks = {row["hit_id"]: row["claim_words_rank"] for row in rows if row["claim_words_rank"] is not None}
    assert len(set(ranks.values())) == 1  # all tied
    assert set(ranks) == set(sorted(c["id"] for c in claims)[:16])
    passages = {row["hit_id"]: row["passage_words_rank"] for row in rows}
    by_passage = {c["passage_id"]: c["id"] for c in claims}
    kept = {p for p, fact in by_passage.items() if passages.get(fact) is not None}
    assert kept == set(sorted(by_passage)[:16])


def test_a_keyword_matched_message_brings_no_claim_ranking_would_drop(store: FactStore) -> None:
    """Every side of the candidate statement leaves out what ranking drops (an archived claim, a
    question without a value), the claims of a message found by its words too: each candidate is a
    row to read and rank, and a long message's questions were a tenth of them at a 1M-token session."""
    root = store.root("garden")
    store.capture_message(
        root,
        "The greenhouse tomatoes get watered at dawn. Should the greenhouse vents stay open overnight? "
        "Which greenhouse shelf suits the basil?",
        message_id="m1",
    )
    query = "greenhouse"
    [qvec] = store.embedder.embed([query])
    with store.pool.connection() as conn:
        rows = pipeline.find_candidates(conn, root, query, qvec, store.embedder_id, store.embedder.dims).rows
        kinds = {r["hit_kind"] for r in rows}
        result = retrieval.search(conn, root, query, qvec, store.embedder_id, store.embedder.dims)
    assert kinds == {Kind.USER_INPUT}
    assert [h.fact.body for h in result.hits] == ["The greenhouse tomatoes get watered at dawn."]
