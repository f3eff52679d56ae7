"""The foundation: migrations, the connection layer and the embedded server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psycopg
import pytest

from memory.errors import BeadsMemoryError, NoDatabaseError
from memory.postgres.connection import open_async_pool, open_pool
from memory.postgres.embedded_postgres import resolve_database_url, start_embedded
from memory.postgres.migrate import migrations, setup
from memory.settings import MemorySettings

SCHEMA_QUERY = """
SELECT 'column' AS what, table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
       || ' ' || coalesce(column_default, '') AS detail
  FROM information_schema.columns WHERE table_schema = 'beads'
UNION ALL
SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = 'beads'
UNION ALL
SELECT 'constraint', conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'beads'::regnamespace
ORDER BY 1, 2
"""


def schema_of(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(SCHEMA_QUERY).fetchall()]


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [m.version for m in migrations()]
    assert versions == list(range(1, len(versions) + 1))
    assert all(m.sql.strip() for m in migrations())


def test_setup_twice_gives_the_same_schema(empty_db_url: str) -> None:
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert setup(conn) == [m.version for m in migrations()]
    first = schema_of(empty_db_url)
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        assert setup(conn) == []
    assert schema_of(empty_db_url) == first
    assert any("facts" in detail for _, detail in first)


def test_migrated_schema_equals_the_template(empty_db_url: str, db_url: str) -> None:
    """Applying every migration from nothing yields the schema the rest of the suite runs on."""
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        setup(conn)
    assert schema_of(empty_db_url) == schema_of(db_url)


def test_two_concurrent_setups_both_succeed(empty_db_url: str) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        try:
            with psycopg.connect(empty_db_url, autocommit=True) as conn:
                barrier.wait()
                results.append(setup(conn))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    # exactly one of them applied the migrations; the other found them applied
    assert sorted(results, key=len) == [[], [m.version for m in migrations()]]
    with psycopg.connect(empty_db_url) as conn:
        count = conn.execute("SELECT count(*) FROM beads.schema_migrations").fetchone()[0]
    assert count == len(migrations())


@pytest.mark.slow
def test_database_url_is_honoured(
    tmp_path: Path, pg_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    second_url = start_embedded(tmp_path / "second")
    assert second_url != pg_server_url
    monkeypatch.setenv("DATABASE_URL", second_url)
    monkeypatch.setenv("BEADS_DATA_DIR", str(tmp_path / "never-used"))
    assert resolve_database_url(MemorySettings()) == second_url
    with open_pool() as pool, pool.connection() as conn:
        setup(conn)
        conn.execute("CREATE TABLE marker (x int)")
    assert not (tmp_path / "never-used").exists()
    with psycopg.connect(second_url) as conn:
        assert conn.execute("SELECT to_regclass('public.marker') IS NOT NULL").fetchone()[0]
    with psycopg.connect(pg_server_url) as conn:
        assert not conn.execute("SELECT to_regclass('public.marker') IS NOT NULL").fetchone()[0]


async def test_no_url_and_no_database_url_is_refused_without_starting_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection helper connects; starting the embedded server is the caller's explicit choice."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("BEADS_DATA_DIR", str(tmp_path / "never-used"))
    with pytest.raises(NoDatabaseError) as refused:
        open_pool()
    with pytest.raises(NoDatabaseError):
        await open_async_pool()
    message = str(refused.value)
    assert "DATABASE_URL" in message and "open_pool(start_embedded())" in message
    assert "langgraph-beads-memory[embedded]" in message
    assert isinstance(refused.value, BeadsMemoryError)
    assert not (tmp_path / "never-used").exists()


def test_bad_database_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://nope")
    with pytest.raises(ValueError, match="postgresql://"):
        MemorySettings()


WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from memory.postgres.connection import open_async_pool, open_pool
    from memory.postgres.embedded_postgres import start_embedded
    from memory.postgres.migrate import setup
    uri = start_embedded(Path(sys.argv[1]))
    with open_pool(uri) as pool, pool.connection() as conn:
        setup(conn)
        conn.execute("CREATE TABLE IF NOT EXISTS survivors (n int)")
        conn.execute("INSERT INTO survivors SELECT generate_series(1, 100)")
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)

READER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from memory.postgres.connection import open_async_pool, open_pool
    from memory.postgres.embedded_postgres import start_embedded
    uri = start_embedded(Path(sys.argv[1]))
    with open_pool(uri) as pool, pool.connection() as conn:
        print(conn.execute("SELECT count(*) AS n FROM survivors").fetchone()["n"], flush=True)
    """
)


def _postmaster_pid(pgdata: Path) -> int | None:
    pidfile = pgdata / "postmaster.pid"
    return int(pidfile.read_text().splitlines()[0]) if pidfile.exists() else None


@pytest.mark.slow
@pytest.mark.postgres
def test_restart_after_sigkill_reuses_the_server_and_keeps_rows(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    writer = subprocess.run(
        [sys.executable, "-c", WRITER, str(pgdata)], capture_output=True, text=True, env=env, timeout=120
    )
    assert writer.returncode == -signal.SIGKILL, writer.stderr
    assert "written" in writer.stdout
    # the killed process never detached: its postmaster is still up and its pid still listed
    orphan = _postmaster_pid(pgdata)
    assert orphan is not None

    reader = subprocess.run(
        [sys.executable, "-c", READER, str(pgdata)], capture_output=True, text=True, env=env, timeout=120
    )
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.strip() == "100"

    # the reader was the last live handle, so its exit stopped the server instead of leaking it
    deadline = time.monotonic() + 30
    while _postmaster_pid(pgdata) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster_pid(pgdata) is None


def test_the_embedded_server_computes_full_size_distances(db_url: str) -> None:
    """A CPU-specific pgvector build dies with SIGILL here; the portable rebuild must be in place."""
    with psycopg.connect(db_url) as conn:
        distance = conn.execute(
            "SELECT (SELECT array_agg(1.0)::vector(768) FROM generate_series(1, 768))"
            " <=> (SELECT array_agg(g::float)::vector(768) FROM generate_series(1, 768) g)"
        ).fetchone()[0]
    assert 0.0 < distance < 1.0


def test_a_native_avx512_build_is_detected_only_on_cpus_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import platform

    from memory.postgres import portable_pgvector

    so = tmp_path / "lib" / "postgresql" / "vector.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"native build")
    monkeypatch.setattr(
        portable_pgvector, "NATIVE_AVX512_BUILDS", frozenset({hashlib.sha256(b"native build").hexdigest()})
    )
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(portable_pgvector, "cpu_has_avx512", lambda: False)
    assert portable_pgvector.needs_portable_build(tmp_path)
    monkeypatch.setattr(portable_pgvector, "cpu_has_avx512", lambda: True)
    assert not portable_pgvector.needs_portable_build(tmp_path)
    monkeypatch.setattr(portable_pgvector, "cpu_has_avx512", lambda: False)
    so.write_bytes(b"portable build")
    assert not portable_pgvector.needs_portable_build(tmp_path)
