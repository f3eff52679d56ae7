"""The keyword ranker switch: ts_rank_cd (built-in full-text search, the default) or BM25 (pg_textsearch).

CI's embedded server has no pg_textsearch: there, keyword_ranker="bm25" must fail with the library's
own error, saying what to do. The tests of BM25's ranking run only against a server that preloads
pg_textsearch (TEST_DATABASE_URL pointed at one); elsewhere they are skipped, saying why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eval_samples import write_locomo
from psycopg_pool import ConnectionPool

from bench.eval.runner import ROWS_FILE, Evaluation, RunConfig, changed_options, read_rows
from memory import retrieval
from memory.errors import BeadsMemoryError, Bm25UnavailableError, ConfigurationError
from memory.model import Namespace
from memory.retrieval import SearchOptions, ensure_bm25_indexes
from memory.store import FactStore


def test_the_default_ranker_is_ts_rank_cd_and_others_are_refused() -> None:
    assert SearchOptions().keyword_ranker == "ts_rank_cd"
    assert SearchOptions(keyword_ranker="bm25").keyword_ranker == "bm25"
    with pytest.raises(ValueError, match="keyword_ranker must be one of ts_rank_cd, bm25"):
        SearchOptions(keyword_ranker="okapi")  # type: ignore[arg-type]


def test_the_harness_reads_the_ranker_from_text() -> None:
    assert changed_options(SearchOptions(), "keyword_ranker=bm25").keyword_ranker == "bm25"
    assert (
        changed_options(SearchOptions(), "keyword_ranker=ts_rank_cd,rrf_k=10").keyword_ranker == "ts_rank_cd"
    )
    with pytest.raises(ValueError, match="keyword_ranker"):
        changed_options(SearchOptions(), "keyword_ranker=okapi")


def beads_run(tmp_path: Path, db_url: str, search: str) -> RunConfig:
    return RunConfig(
        datasets=[("locomo", write_locomo(tmp_path))],
        out_dir=tmp_path / "out",
        budgets=(200,),
        arms=("beads",),
        embedder="fake-64",
        database_url=db_url,
        exact_database=True,
        show_progress=False,
        search=search,
    )


def statement_text(store: FactStore, ns: Namespace, query: str, options: SearchOptions) -> str:
    [qvec] = store.embedder.embed([query])
    statement, _ = retrieval.candidate_query(ns, query, qvec, store.embedder_id, store.embedder.dims, options)
    with store.pool.connection() as conn:
        return statement.as_string(conn)


def test_each_ranker_sends_its_own_statement(store: FactStore) -> None:
    root = store.root("s1")
    default = statement_text(store, root, "Where did the zyxwq go?", SearchOptions())
    assert "ts_rank_cd" in default and "<@>" not in default and "bm25" not in default
    bm25 = statement_text(store, root, "Where did the zyxwq go?", SearchOptions(keyword_ranker="bm25"))
    assert "ts_rank_cd" not in bm25 and "to_bm25query" in bm25 and "beads.facts_body_bm25" in bm25
    # no content word: no keyword side, whichever the ranker
    assert statement_text(store, root, "what is it?", SearchOptions(keyword_ranker="bm25")) == statement_text(
        store, root, "what is it?", SearchOptions()
    )


def _has_pg_textsearch(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_textsearch') AS available,"
        " current_setting('shared_preload_libraries') AS preload"
    ).fetchone()
    assert row is not None
    return bool(row["available"]) and "pg_textsearch" in row["preload"]


def test_bm25_without_its_indexes_fails_with_the_librarys_error(store: FactStore) -> None:
    root = store.root("s1")
    store.remember(root, "Zyxwq shipped to the warehouse on Monday.")
    with pytest.raises(Bm25UnavailableError, match="ensure_bm25_indexes") as raised:
        store.search(root, "Where did the zyxwq go?", keyword_ranker="bm25")
    assert isinstance(raised.value, ConfigurationError) and isinstance(raised.value, BeadsMemoryError)
    assert isinstance(raised.value.__cause__, psycopg.Error)  # the server's own words, kept
    # inside a caller's transaction too, which stays usable: the search ran in a savepoint
    with store.pool.connection() as conn, conn.transaction():
        [qvec] = store.embedder.embed(["Where did the zyxwq go?"])
        with pytest.raises(Bm25UnavailableError):
            retrieval.search(
                conn, root, "Where did the zyxwq go?", qvec, store.embedder_id, store.embedder.dims,
                SearchOptions(keyword_ranker="bm25"),
            )  # fmt: skip
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    # the default ranker is untouched
    assert store.search(root, "Where did the zyxwq go?", relevance_floor=-1.0).hits


def test_ensure_bm25_indexes_without_the_extension_says_so(pool: ConnectionPool) -> None:
    with pool.connection() as conn:
        if _has_pg_textsearch(conn):
            pytest.skip("this server has pg_textsearch: the missing-extension error cannot happen here")
        with pytest.raises(Bm25UnavailableError, match="pg_textsearch") as raised:
            ensure_bm25_indexes(conn)
        assert "The server said:" in str(raised.value)
        # nothing was left behind, and the connection is usable
        assert conn.execute(
            "SELECT count(*) AS n FROM pg_indexes WHERE indexname LIKE '%bm25%'"
        ).fetchone() == {"n": 0}


def test_a_harness_run_with_bm25_fails_early_without_the_extension(tmp_path: Path, db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        if conn.execute(
            "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_textsearch')"
        ).fetchone()[0]:
            pytest.skip("this server has pg_textsearch: the missing-extension error cannot happen here")
    with pytest.raises(Bm25UnavailableError):
        Evaluation(beads_run(tmp_path, db_url, "keyword_ranker=bm25")).run()


@pytest.fixture
def bm25_store(store: FactStore) -> Iterator[FactStore]:
    """`store`, on a server with pg_textsearch preloaded and the bm25 indexes made; else skipped."""
    with store.pool.connection() as conn:
        if not _has_pg_textsearch(conn):
            pytest.skip(
                "needs a server with shared_preload_libraries='pg_textsearch' (TEST_DATABASE_URL); "
                "CI's embedded server has no pg_textsearch"
            )
        ensure_bm25_indexes(conn)
        ensure_bm25_indexes(conn)  # a second time is a no-op
    yield store


def keyword_ranks(store: FactStore, ns: Namespace, query: str, options: SearchOptions) -> dict[str, float]:
    """Body -> claim keyword rank of every keyword candidate the statement returns."""
    [qvec] = store.embedder.embed([query])
    statement, params = retrieval.candidate_query(
        ns, query, qvec, store.embedder_id, store.embedder.dims, options
    )
    with store.pool.connection() as conn:
        rows = conn.execute(statement, params).fetchall()
        bodies = {
            r["id"]: r["body"]
            for r in conn.execute(
                "SELECT id, body FROM beads.facts WHERE id = ANY(%s)", ([r["hit_id"] for r in rows],)
            )
        }
    return {
        bodies[r["hit_id"]]: float(r["claim_words_rank"]) for r in rows if r["claim_words_rank"] is not None
    }


def test_bm25_weighs_a_rare_word_above_a_frequent_one(bm25_store: FactStore) -> None:
    root = bm25_store.root("s1")
    for i in range(12):  # "crates" in a dozen claims (under keyword_common), "zyxwq" in one
        bm25_store.remember(root, f"Crates number {i} waited at the dock.")
    bm25_store.remember(root, "The zyxwq waited at the dock.")
    bm25_store.remember(root, "The crates waited at the dock.")
    query = "zyxwq crates"
    ts = keyword_ranks(bm25_store, root, query, SearchOptions())
    bm25 = keyword_ranks(bm25_store, root, query, SearchOptions(keyword_ranker="bm25"))
    # ts_rank_cd knows no rarity: one query word each, in claims of one length, rank alike
    assert ts["The zyxwq waited at the dock."] == pytest.approx(ts["The crates waited at the dock."])
    # BM25's IDF puts the claim with the rare word first, and every rank is positive (higher: better)
    assert bm25["The zyxwq waited at the dock."] > bm25["The crates waited at the dock."] > 0
    assert max(bm25, key=bm25.__getitem__) == "The zyxwq waited at the dock."
    assert set(bm25) == set(ts)  # the same matches, ranked otherwise


def test_bm25_finds_a_sessions_match_however_many_better_ones_other_sessions_hold(
    bm25_store: FactStore,
) -> None:
    mine, other = bm25_store.root("s1"), bm25_store.root("s2")
    for i in range(60):  # the whole table's best matches are all another session's
        bm25_store.remember(other, f"Zyxwq zyxwq zyxwq, crate {i}.")
    target = bm25_store.remember(
        mine, "A long note that mentions the zyxwq once, among many other words here."
    )
    ranks = keyword_ranks(
        bm25_store, mine, "zyxwq", SearchOptions(keyword_ranker="bm25", keyword_candidates=8)
    )
    assert list(ranks) == [target.body]
    result = bm25_store.search(mine, "Where is the zyxwq?", keyword_ranker="bm25", relevance_floor=-1.0)
    assert target.id in {h.fact.id for h in result.hits}


@pytest.mark.parametrize(
    "query",
    [
        "it's 25:50 o'clock & | ! \\ (now) 'quoted' \"double\" :* <-> a:b",
        "what is it?",
        "facts_body_bm25:zyxwq",
    ],
)
def test_bm25_takes_queries_with_tsquery_or_bm25query_syntax(bm25_store: FactStore, query: str) -> None:
    root = bm25_store.root("s1")
    bm25_store.remember(root, "It's 25:50 o'clock now, quoted and double.")
    bm25_store.remember(root, "Zyxwq shipped to the warehouse on Monday.")
    ts = bm25_store.search(root, query, relevance_floor=-1.0)
    bm25 = bm25_store.search(root, query, keyword_ranker="bm25", relevance_floor=-1.0)
    assert len(bm25) == len(ts)


def test_a_harness_run_ranks_by_bm25_once_its_indexes_are_made(
    bm25_store: FactStore, tmp_path: Path, db_url: str
) -> None:
    Evaluation(beads_run(tmp_path, db_url, "keyword_ranker=bm25")).run()
    rows = read_rows(tmp_path / "out" / ROWS_FILE)
    assert rows and {r["arm"] for r in rows} == {"beads"}
