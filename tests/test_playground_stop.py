"""Stopping like a service: the app on the embedded Postgres, as real uvicorn processes.

SIGTERM (what systemd, Docker and Kubernetes send) and SIGINT (Ctrl+C) both shut the app down
gracefully: a turn in flight is handed back to the queue, and the embedded server is left running
while another process still uses its data directory; the last process out stops it, whichever
signal it got, even when another process that used it was SIGKILLed.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from bench.reliability import checks
from bench.reliability.servers import AppProcess
from playground.jobs import LIVENESS_LOCK_CLASS
from playground.turn_worker import STOPPED_MESSAGE

pytestmark = pytest.mark.app


STOP_SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


def postmaster(pgdata: Path) -> tuple[int, str] | None:
    """The running server's pid and URI, read from its data directory (never attaching to it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    return info.pid, info.get_uri()


def running_pid(pid: int) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    return False


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory of its own; whatever a failed test left running there is stopped."""
    parent = Path(tempfile.mkdtemp(prefix="beads-stop-"))
    try:
        yield parent
    finally:
        found = postmaster(parent / "pgdata")
        if found is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(found[0]).terminate()
        shutil.rmtree(parent, ignore_errors=True)


@contextlib.contextmanager
def apps(data_dir: Path, n: int, **settings: object) -> Iterator[list[AppProcess]]:
    started = [AppProcess(None, data_dir=data_dir, start_timeout=180, **settings) for _ in range(n)]
    try:
        yield started
    finally:
        for app in started:
            app.kill()
            app.close()


def wait_for(condition: object, what: str, timeout: float = 60.0) -> None:
    try:
        checks.wait_for(condition, timeout, what, interval=0.1)  # type: ignore[arg-type]
    except TimeoutError as exc:
        raise AssertionError(str(exc)) from None


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_the_last_process_stops_the_embedded_server(data_dir: Path, sig: signal.Signals) -> None:
    with apps(data_dir, 1) as (app,):
        app.start()
        found = postmaster(data_dir / "pgdata")
        assert found is not None
        pid, _ = found
        app.signal(sig)
        wait_for(lambda: not running_pid(pid), "the embedded server to stop")
        assert postmaster(data_dir / "pgdata") is None


# the OS pid of the app process whose worker holds a turn: its liveness lock's session says so
HOLDER = """
SELECT split_part(a.application_name, ' ', 2)::int FROM playground.turn_worker t
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.classid = %s::oid
                 AND l.objid = t.lease_key::oid AND l.objsubid = 2
  JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE t.id = %s AND t.status = 'running'
"""


def holder(uri: str, turn: str) -> int | None:
    found = checks.query(uri, HOLDER, (LIVENESS_LOCK_CLASS, turn))
    return int(found[0][0]) if found else None


def test_a_stopping_process_hands_its_turn_back_and_leaves_the_server_to_the_others(data_dir: Path) -> None:
    pgdata = data_dir / "pgdata"
    with apps(data_dir, 3, scripted_token_delay_ms=2000, lease_seconds=120) as three:
        for app in three:
            app.start()
        found = postmaster(pgdata)
        assert found is not None
        pid, uri = found
        base = three[0].base
        chat = httpx.post(f"{base}/chats", headers={"origin": base}, follow_redirects=False).headers[
            "location"
        ]
        sent = httpx.post(
            f"{base}{chat}/messages",
            data={"text": "What is our budget?"},
            headers={"origin": base, "hx-request": "true"},
        )
        turn = sent.headers["x-turn-id"]
        token = "SELECT count(*) FROM playground.events WHERE turn_id = %s AND kind = 'token'"
        wait_for(lambda: checks.query(uri, token, (turn,))[0][0] > 0, "the turn to stream")
        [running] = [app for app in three if app.pid == holder(uri, turn)]
        killed, last = [app for app in three if app is not running]

        killed.kill()  # a process SIGKILLed on the way must not keep the server up forever after
        running.signal(signal.SIGTERM)  # mid-turn: its turn goes back to the queue, the server stays up
        assert running_pid(pid)
        ledger = "SELECT status, attempts FROM playground.turn_worker WHERE id = %s"
        # handed back, not left to its lease: the lease (120 s) is longer than the wait
        wait_for(lambda: checks.query(uri, ledger, (turn,))[0] == ("done", 2), "another process to finish it")
        done = (
            "SELECT lane, count(*) FROM playground.events WHERE turn_id = %s AND kind = 'done' GROUP BY lane"
        )
        assert sorted(checks.query(uri, done, (turn,))) == [("beads", 1), ("stock", 1)]
        why = "SELECT payload->>'message' FROM playground.events WHERE turn_id = %s AND kind = 'interrupted'"
        assert checks.query(uri, why, (turn,)) == [(STOPPED_MESSAGE,)]

        last.signal(signal.SIGINT)  # the last one out stops the server
        wait_for(lambda: not running_pid(pid), "the embedded server to stop")


def test_uvicorn_workers_share_one_embedded_server_and_stop_it_together(data_dir: Path) -> None:
    with apps(data_dir, 1, uvicorn_args=("--workers", "2")) as (app,):
        app.start()
        found = postmaster(data_dir / "pgdata")
        assert found is not None
        pid, uri = found
        processes = "SELECT count(DISTINCT application_name) FROM pg_stat_activity WHERE application_name LIKE 'playground %%'"
        wait_for(lambda: checks.query(uri, processes)[0][0] == 2, "both workers to start on the one server")
        app.signal(
            signal.SIGTERM
        )  # the supervisor passes it to each worker; the last one out stops the server
        wait_for(lambda: not running_pid(pid), "the embedded server to stop")
