"""Real Postgres for every test, fast.

One embedded server per test run (or `TEST_DATABASE_URL`), one template database with every migration
applied, and a fresh database cloned from the template for each test that asks for one. Cloning a
template is a file copy inside Postgres: tens of milliseconds, however large the schema grows.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory.embedders import FakeEmbedder, MiniLMEmbedder
from memory.graph.store import FactStore
from memory.postgres.connection import ensure_vector_extension, open_async_pool, open_pool
from memory.postgres.embedded_postgres import start_embedded
from memory.postgres.migrate import setup


def database_url(server_url: str, dbname: str) -> str:
    return make_conninfo(server_url, dbname=dbname)


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The maintenance URL of the server the tests use."""
    external = os.environ.get("TEST_DATABASE_URL")
    if external:
        return external
    # not under pytest's basetemp: every pytest session resets that tree to 0700, which would lock
    # the server's own system user out of a concurrently running session's data directory
    return start_embedded(Path(tempfile.mkdtemp(prefix="beads-test-pg-")) / "pgdata")


@pytest.fixture(scope="session")
def template_db(pg_server_url: str) -> str:
    name = f"beads_tpl_{os.getpid()}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = database_url(pg_server_url, name)
    ensure_vector_extension(url)
    with psycopg.connect(url, autocommit=True) as conn:
        setup(conn)
    return name


def _create_database(pg_server_url: str, template: str | None) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        if template:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
        else:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def _drop_database(pg_server_url: str, name: str) -> None:
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def db_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    """A fresh database with every migration applied, dropped after the test."""
    name = _create_database(pg_server_url, template_db)
    yield database_url(pg_server_url, name)
    _drop_database(pg_server_url, name)


@pytest.fixture
def another_db_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    """A second fresh migrated database, for replay tests."""
    name = _create_database(pg_server_url, template_db)
    yield database_url(pg_server_url, name)
    _drop_database(pg_server_url, name)


@pytest.fixture
def empty_db_url(pg_server_url: str) -> Iterator[str]:
    """A fresh database with nothing in it (not even pgvector)."""
    name = _create_database(pg_server_url, None)
    yield database_url(pg_server_url, name)
    _drop_database(pg_server_url, name)


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    with open_pool(db_url, min_size=1, max_size=4) as p:
        yield p


@pytest.fixture
def store(pool: ConnectionPool) -> FactStore:
    """A fact store on the test's database, with the seeded 64-d fake embedder."""
    s = FactStore(pool, FakeEmbedder(64))
    s.setup()
    return s


@pytest.fixture
async def apool(db_url: str) -> AsyncIterator[AsyncConnectionPool]:
    p = await open_async_pool(db_url, min_size=1, max_size=4)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The offline default embedder, loaded once: tests that need its real similarities share it."""
    return MiniLMEmbedder()


# --- lanes ------------------------------------------------------------------------------------------
# Every test runs in exactly one lane, so that `-m` can pick a fast subset for a change's inner loop
# (docs/internals/development.md). A file whose tests need what their fixtures do not show (a browser, a
# real model, a benchmark run, a Postgres server of their own) names its lane in `pytestmark`; every
# other test gets its lane here, from the fixtures it uses.

LANES = ("unit", "postgres", "app", "browser", "model", "bench")
#: the playground's template database: only the app's tests ask for it (they all run on Postgres too)
APP_FIXTURES = frozenset({"play_db", "playground_template"})
#: every database fixture above asks for the server, so one name covers them all
POSTGRES_FIXTURES = frozenset({"pg_server_url"})


def lanes_of(item: pytest.Item) -> set[str]:
    return {mark.name for mark in item.iter_markers() if mark.name in LANES}


def lane_from_fixtures(fixturenames: set[str]) -> str:
    if fixturenames & APP_FIXTURES:
        return "app"
    if fixturenames & POSTGRES_FIXTURES:
        return "postgres"
    return "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = []
    for item in items:
        from_fixtures = lane_from_fixtures(set(getattr(item, "fixturenames", ())))
        named = lanes_of(item)
        if not named:
            item.add_marker(from_fixtures)
        elif len(named) > 1:
            wrong.append(f"{item.nodeid}: in {sorted(named)}, not one lane")
        elif named == {"unit"} and from_fixtures != "unit":
            wrong.append(f"{item.nodeid}: marked unit, but its fixtures run on Postgres ({from_fixtures})")
    if wrong:
        raise pytest.UsageError("each test runs in exactly one lane:\n" + "\n".join(wrong))
