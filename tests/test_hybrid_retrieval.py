"""Hybrid retrieval against real Postgres: keyword candidates (migration 0008) fused with the nearest.

The fake embedder makes texts close when they share words, stop words included, while the english
full-text configuration drops stop words: a claim made of the question's stop words is near it by
vector and no keyword match, and a claim sharing one rare word with a wordy question is far from it
by vector and a keyword match. That is how each case below separates the two sides.
"""

from __future__ import annotations

import psycopg
import pytest

from memory import retrieval
from memory.flags import KeywordMatch
from memory.graph.store import FactStore
from memory.model import SearchResult
from memory.postgres.migrate import migrations, setup
from memory.retrieval import SearchOptions

# near the question by vector (they share its stop words), no keyword match (no content word shared)
NEAR = [
    f"It is what they were doing about the {place}."
    for place in ("weather", "garden", "kitchen", "harbour", "orchard", "library", "station", "bakery",
                  "market", "theatre", "chapel", "bridge")
]  # fmt: skip
QUESTION = "What is it that they were doing about the zyxwq?"  # one content word: zyxwq


def fill(store: FactStore, ns, texts: list[str]) -> None:  # type: ignore[no-untyped-def]
    for text in texts:
        store.remember(ns, text)


def bodies(result: SearchResult) -> list[str]:
    return [h.fact.body for h in result.hits]


def test_a_claim_far_by_vector_is_found_by_its_rare_word(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    target = store.remember(root, "Zyxwq shipped to the warehouse on Monday.")
    # k=1 fetches the 4 nearest claims: the six near ones fill them
    vectors_only = store.search(root, QUESTION, k=1, candidates=1, keyword=False, relevance_floor=-1.0)
    assert target.id not in {h.fact.id for h in vectors_only.hits}
    assert target.short_id not in {short for short, _ in vectors_only.dropped}  # never a candidate

    hybrid = store.search(root, QUESTION, k=1, candidates=1, relevance_floor=-1.0)
    [hit] = hybrid.hits
    assert hit.fact.id == target.id and KeywordMatch() in hit.flags
    # the distance is still the cosine one, and farther than the nearest claims'
    assert hit.distance == pytest.approx(1 - hit.claim_similarity, abs=1e-6)  # no passage: claim alone
    assert hit.distance > 1 - max(h.claim_similarity for h in store.search(root, QUESTION, keyword=False))


def test_a_claim_found_by_both_sides_outranks_one_found_by_one(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    both = store.remember(root, "It is what they were doing about the zyxwq crates.")
    word_only = store.remember(root, "Zyxwq shipped to the warehouse on Monday.")
    nearest = store.search(root, QUESTION, keyword=False, relevance_floor=-1.0).hits[0]
    assert nearest.fact.id not in (both.id, word_only.id)  # by vector alone another claim is nearer...
    result = store.search(root, QUESTION, relevance_floor=-1.0)
    ids = [h.fact.id for h in result.hits]
    # ...but the claim both sides found comes first, then the nearest; the keyword-only one makes it too
    assert ids[0] == both.id and result.hits[0].distance > nearest.distance
    assert ids[1] == nearest.fact.id and word_only.id in ids
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_the_floor_still_says_not_in_memory_when_only_a_word_matches(store: FactStore) -> None:
    root = store.root("s1")
    fact = store.remember(
        root, "Quarterly reports from Lisbon arrived late because couriers rerouted every parcel twice."
    )
    query = "Which orchestra rehearses Brahms symphonies near Lisbon during autumn evenings?"
    result = store.search(root, query)
    assert result.not_in_memory and result.hits == ()
    assert (fact.short_id, "below the relevance floor") in result.dropped  # a keyword candidate
    assert result.best_score is not None and result.best_score < SearchOptions().relevance_floor


def test_a_passage_keyword_hit_brings_its_thin_claim(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    captured = store.capture_message(root, "I ran my 5K race on Sunday. My time was 25:50.", message_id="m1")
    thin = next(f for f in captured.facts if "25:50" in f.body)
    query = "What is it that they were doing about the 5K?"
    off = store.search(root, query, k=4, keyword=False, relevance_floor=-1.0)
    assert thin.id not in {h.fact.id for h in off.hits}
    on = store.search(root, query, k=4, relevance_floor=-1.0)
    # its own words do not match, its message's do
    assert {"I ran my 5K race on Sunday.", thin.body} <= {h.fact.body for h in on.hits}
    assert on.hits[0].fact.body == "I ran my 5K race on Sunday."  # both keyword sides and its vector


def test_a_sibling_namespaces_keyword_match_never_appears(store: FactStore) -> None:
    root = store.root("s1")
    mine = store.fork(root, "mine", "researcher")
    theirs = store.fork(root, "theirs", "coder")
    hidden = store.capture_message(theirs, "Zyxwq ships on Monday. Zyxwq is late.", message_id="t1").facts
    visible = store.remember(mine, "Zyxwq ships from the north dock.")
    result = store.search(mine, "When does zyxwq ship?", relevance_floor=-1.0)
    assert [h.fact.id for h in result.hits] == [visible.id]
    leaked = {f.short_id for f in hidden}
    assert not leaked & {short for short, _ in result.dropped}  # not even a candidate
    # the root reads its subtree, demoted: there the same words do find them
    assert {f.id for f in hidden} <= {h.fact.id for h in store.search(root, "When does zyxwq ship?")}


def test_a_keyword_hit_on_a_superseded_value_returns_the_current_one(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    old = store.remember(root, "The zyxwq budget is 100k per year.")
    new = store.remember(root, "The zyxwq budget is 120k per year.")
    store.supersede(new, old)
    query = "What is it that they were doing about the 100k?"  # only the stale value has the word
    result = store.search(root, query, k=1, candidates=1, relevance_floor=-1.0)
    [hit] = result.hits
    assert hit.fact.id == new.id
    assert hit.resolved_from is not None and hit.resolved_from.id == old.id
    assert KeywordMatch() in hit.flags


def test_keyword_off_is_the_vector_search(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    store.remember(root, "Zyxwq shipped to the warehouse on Monday.")
    off = store.search(root, QUESTION, keyword=False, relevance_floor=-1.0)
    assert off.hits and not any(KeywordMatch() in h.flags for h in off.hits)
    for h in off.hits:  # the score is the blended similarity again
        assert h.score == pytest.approx(1 - h.distance)
    assert [h.score for h in off.hits] == sorted((h.score for h in off.hits), reverse=True)
    [qvec] = store.embedder.embed([QUESTION])
    statement, params = retrieval.candidate_query(
        root, QUESTION, qvec, store.embedder_id, store.embedder.dims, SearchOptions(keyword=False)
    )
    with store.pool.connection() as conn:
        text = statement.as_string(conn)
    assert "tsvector" not in text and "text" not in params


@pytest.mark.parametrize(
    "query",
    [
        "what is it?",  # stop words only: no keyword side at all
        "it's 25:50 o'clock & | ! \\ (now) 'quoted' \"double\" :* <-> a:b",
        "",
    ],
)
def test_queries_without_content_words_or_with_tsquery_syntax_search_fine(
    store: FactStore, query: str
) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    store.remember(root, "It's 25:50 o'clock now, quoted and double.")
    on = store.search(root, query, relevance_floor=-1.0)
    off = store.search(root, query, keyword=False, relevance_floor=-1.0)
    if query.strip() and "'quoted'" not in query:
        assert bodies(on) == bodies(off)  # no content word: the vector search alone
    assert len(on) == len(off)


def test_rows_written_before_the_migration_are_keyword_searchable(empty_db_url: str) -> None:
    before = [m for m in migrations() if m.version < 8]
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE SCHEMA beads")
        conn.execute(
            "CREATE TABLE beads.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for m in before:
            with conn.transaction():
                conn.execute(m.sql)  # type: ignore[arg-type]
                conn.execute("INSERT INTO beads.schema_migrations VALUES (%s, %s)", (m.version, m.name))
        conn.execute(
            "INSERT INTO beads.namespaces (id, session_id, lineage, path, agent_id) "
            "VALUES ('00000000-0000-0000-0000-000000000001', 's', "
            "'{00000000-0000-0000-0000-000000000001}', '{root}', 'main')"
        )
        conn.execute(
            "INSERT INTO beads.passages (id, session_id, body) "
            "VALUES ('00000000-0000-0000-0000-000000000002', 's', 'I ran my 5K race. It took 25:50.')"
        )
        conn.execute(
            "INSERT INTO beads.facts (id, session_id, namespace_id, kind, source, agent_id, body, passage_id, "
            "head_id) VALUES ('00000000-0000-0000-0000-000000000003', 's', "
            "'00000000-0000-0000-0000-000000000001', 'user_input', 'passive_capture', 'main', "
            "'It took 25:50.', '00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000003')"
        )
        assert setup(conn) == [m.version for m in migrations() if m.version >= 8]
        found = conn.execute(
            "SELECT f.body FROM beads.facts f JOIN beads.passages p ON p.id = f.passage_id "
            "WHERE p.body_tsv @@ to_tsquery('english', '5k') AND f.body_tsv @@ to_tsquery('english', 'took')"
        ).fetchall()
    assert found == [("It took 25:50.",)]


def test_a_text_too_long_for_a_tsvector_is_still_written(db_url: str) -> None:
    # a tsvector holds at most 1 MB: only the first 200,000 characters of a body are indexed
    with psycopg.connect(db_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute(
                "SELECT to_tsvector('english', string_agg('w' || i || 'x', ' ')) "
                "FROM generate_series(1, 200000) i"
            )
        conn.execute(
            "INSERT INTO beads.passages (id, session_id, body) SELECT gen_random_uuid(), 's', "
            "'Zyxwq starts here. ' || string_agg('w' || i || 'x', ' ') FROM generate_series(1, 200000) i"
        )
        row = conn.execute(
            "SELECT length(body) AS n, body_tsv @@ to_tsquery('english', 'zyxwq') AS found FROM beads.passages"
        ).fetchone()
    assert row[0] > 1_000_000 and row[1]


def test_a_word_common_in_the_session_is_no_keyword(store: FactStore) -> None:
    root = store.root("s1")
    fill(store, root, NEAR)
    fill(store, root, [f"Zyxwq crate {n} went to the {place} dock." for n, place in enumerate("abc")])
    rare = store.search(root, QUESTION, relevance_floor=-1.0)
    assert any(KeywordMatch() in h.flags for h in rare.hits)
    # in 3 claims of the session, as many as keyword_common: a stop word here, so no keyword side
    common = store.search(root, QUESTION, relevance_floor=-1.0, keyword_common=3)
    assert not any(KeywordMatch() in h.flags for h in common.hits)
    assert bodies(common) == bodies(store.search(root, QUESTION, relevance_floor=-1.0, keyword=False))
    # remembered for the next searches of the session, at that threshold only: not counted again
    with store.pool.connection() as conn:
        assert retrieval.known_common_words(conn, "s1", QUESTION, SearchOptions(keyword_common=3)) == {
            "zyxwq"
        }
        assert not retrieval.known_common_words(conn, "s1", QUESTION, SearchOptions())
        assert not retrieval.known_common_words(conn, "s2", QUESTION, SearchOptions(keyword_common=3))
    again = store.search(root, QUESTION, relevance_floor=-1.0, keyword_common=3)
    assert bodies(again) == bodies(common)


def test_a_question_that_carries_a_value_is_recalled_and_a_bare_one_is_not(store: FactStore) -> None:
    from memory.model import Kind, Source

    root = store.root("s1")
    fill(store, root, NEAR)
    valued = store.remember(
        root, "How do I fit the new zyxwq quota of 1,200 calls a day?", kind=Kind.DIRECTIVE,
        source=Source.PASSIVE_CAPTURE,
    )  # fmt: skip
    bare = store.remember(
        root, "Can you help me with the zyxwq quota?", kind=Kind.DIRECTIVE, source=Source.PASSIVE_CAPTURE
    )
    for keyword in (True, False):  # found by its word and by its vector, the rule is the same
        held = store.search(
            root, QUESTION, relevance_floor=-1.0, k=20, keyword=keyword, directives_with_values=False
        )
        assert not {valued.id, bare.id} & {h.fact.id for h in held.hits}
        # held out by the candidate statement itself, on both sides (a question's nearest claims are
        # the same question asked before, which filled the vector side's places): never a candidate,
        # so never reported as a dropped one either
        assert not {valued.short_id, bare.short_id} & {short for short, _ in held.dropped}
        found = store.search(
            root, QUESTION, relevance_floor=-1.0, k=20, keyword=keyword, directives_with_values=True
        )
        ids = {h.fact.id for h in found.hits}
        assert valued.id in ids and bare.id not in ids
    everything = store.search(root, QUESTION, relevance_floor=-1.0, k=20, include_directives=True)
    assert {valued.id, bare.id} <= {h.fact.id for h in everything.hits}
