"""Several app processes on one database: one deployment, whichever process a request reaches.

`run_multiprocess`: N `uvicorn playground.app:app` processes on one database. Every chat's messages
are queued at once, each through a different process than the one before (so the turns of one chat
are submitted, claimed and run all over the deployment); one process is SIGKILLed and started again
`kills` times while they run. Checked: every turn done exactly once; in each chat, each turn started
after the one before it finished; a turn's stream read live through two different processes is the
same; the turns ran in more than one process; and what each chat stored equals a control chat that
sent the same messages afterwards, with nobody killed.

`run_throughput`: the load scenario (`bench.reliability.load`) against N processes: chat i posts to
process i mod N and reads its turns' streams from the next process, so every reply a client sees
crossed processes through the event log and LISTEN/NOTIFY. Sampled meanwhile: the database
connections the app processes hold (pg_stat_activity, by application_name).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench.reliability import checks
from bench.reliability.client import TIMEOUT, new_chat, read_turn, send
from bench.reliability.conversation import code_for, conversation
from bench.reliability.load import run_load
from bench.reliability.servers import AppProcess
from playground.jobs import LIVENESS_LOCK_CLASS

#: the longest wait for every queued turn to finish once the processes are left running
SETTLE_SECONDS = 600.0

# the OS pids of the app processes whose workers hold a running turn (their liveness locks' sessions)
_HOLDERS = """
SELECT DISTINCT split_part(a.application_name, ' ', 2)::int FROM playground.turn_worker t
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.classid = %s::oid
                 AND l.objid = t.lease_key::oid AND l.objsubid = 2
  JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE t.status = 'running'
"""
_CONNECTIONS = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'playground %%'"
# in each chat, a turn that started before the one before it finished
_OUT_OF_ORDER = """
SELECT t.chat_id, t.turn_no FROM playground.turn_worker t
  JOIN playground.turn_worker p ON p.chat_id = t.chat_id AND p.turn_no = t.turn_no - 1
 WHERE t.started_at < p.finished_at
"""


class Sampler:
    """Polls the database in a thread while a run goes on: which processes hold turns, how many
    connections the app processes have open."""

    def __init__(self, db_url: str, interval: float = 0.25) -> None:
        self.db_url, self.interval = db_url, interval
        self.holders: set[int] = set()
        self.connections: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self.holders.update(
                    int(r[0]) for r in checks.query(self.db_url, _HOLDERS, (LIVENESS_LOCK_CLASS,))
                )
                self.connections.append(int(checks.query(self.db_url, _CONNECTIONS)[0][0]))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


@contextlib.contextmanager
def processes(db_url: str, n: int, **settings: Any) -> Iterator[list[AppProcess]]:
    apps = [AppProcess(db_url, start_timeout=180, **settings) for _ in range(n)]
    try:
        with ThreadPoolExecutor(n) as pool:  # they start side by side, as uvicorn --workers would
            list(pool.map(lambda app: app.start(), apps))
        yield apps
    finally:
        for app in apps:
            app.close()


def _queue(apps: list[AppProcess], chats: list[str], messages: dict[str, list[str]], prefix: str) -> None:
    with httpx.Client(timeout=TIMEOUT) as client:
        for t in range(max(len(m) for m in messages.values())):
            for i, chat_id in enumerate(chats):
                if t < len(messages[chat_id]):
                    base = apps[(i + t) % len(apps)].base  # each turn of a chat through another process
                    send(client, base, chat_id, messages[chat_id][t], key=f"{prefix}-{t}")


def _done_turns(db_url: str) -> int:
    return int(
        checks.query(db_url, "SELECT count(*) FROM playground.turn_worker WHERE status = 'done'")[0][0]
    )


def run_multiprocess(
    db_url: str,
    *,
    n_processes: int = 3,
    chats: int = 50,
    turns: int = 10,
    kills: int = 2,
    token_delay_ms: int = 20,
) -> dict[str, Any]:
    """SIGKILL process 0 and start it again after each `1 / (kills + 1)` of the turns are done."""
    settings = {"scripted_token_delay_ms": token_delay_ms, "max_attempts": 10, "lease_seconds": 30}
    total = chats * turns
    violations: list[str] = []
    kill_points: list[int] = []
    started = time.monotonic()
    with processes(db_url, n_processes, **settings) as apps, Sampler(db_url) as sampler:
        with httpx.Client(timeout=TIMEOUT) as client:
            chat_ids = [new_chat(client, apps[i % n_processes].base) for i in range(chats)]
        messages = {chat_id: conversation(code_for(i), turns) for i, chat_id in enumerate(chat_ids)}
        _queue(apps, chat_ids, messages, "run")

        # the first turn of the first chat, read live through two processes at once
        first_turn = checks.query(
            db_url, "SELECT id FROM playground.turn_worker WHERE chat_id = %s AND turn_no = 1", (chat_ids[0],)
        )[0][0]
        bases = [apps[0].base, apps[1 % n_processes].base]
        with ThreadPoolExecutor(2) as pool, httpx.Client(timeout=TIMEOUT) as client:
            reads = list(pool.map(lambda b: read_turn(client, b, chat_ids[0], str(first_turn)), bases))
        if [[(e.id, e.data) for e in r.events] for r in reads] != [
            [(e.id, e.data) for e in reads[0].events]
        ] * 2:
            violations.append("one turn's stream differs between two processes")
        if not all(r.ended and r.events and r.events[-1].turn_done for r in reads):
            violations.append("a turn's stream read through a process did not end with the turn")

        for k in range(kills):
            target = total * (k + 1) // (kills + 1)
            try:
                checks.wait_for(
                    lambda t=target: _done_turns(db_url) >= t, SETTLE_SECONDS, f"{target} turns done"
                )
            except TimeoutError as exc:
                violations.append(str(exc))
                break
            apps[0].kill()  # SIGKILL: its running turns are claimed by the others at once (its lock died)
            kill_points.append(_done_turns(db_url))
            apps[0].start()
        try:
            checks.wait_idle(db_url, timeout=SETTLE_SECONDS)
        except TimeoutError as exc:
            violations.append(str(exc))
        seconds = time.monotonic() - started

        # the control: the same messages in fresh chats, nobody killed
        with httpx.Client(timeout=TIMEOUT) as client:
            controls = [new_chat(client, apps[i % n_processes].base) for i in range(chats)]
        _queue(apps, controls, dict(zip(controls, messages.values(), strict=True)), "control")
        try:
            checks.wait_idle(db_url, timeout=SETTLE_SECONDS)
        except TimeoutError as exc:
            violations.append(f"control: {exc}")

    for chat_id, control_id in zip(chat_ids, controls, strict=True):
        violations += checks.exactly_once(db_url, chat_id, turns)
        violations += checks.exactly_once(db_url, control_id, turns)
        violations += checks.differences_from_control(db_url, chat_id, control_id, "with kills")
    violations += [
        f"chat {c} turn {n} started before the one before it finished"
        for c, n in checks.query(db_url, _OUT_OF_ORDER)
    ]
    if n_processes > 1 and len(sampler.holders) < 2:
        violations.append(f"the turns ran in {len(sampler.holders)} process(es), not spread")
    attempts = [r["attempts"] for c in chat_ids for r in checks.ledger(db_url, c)]
    facts = [checks.fact_counts(db_url, c) for c in chat_ids]
    control_facts = [checks.fact_counts(db_url, c) for c in controls]
    return {
        "processes": n_processes,
        "chats": chats,
        "turns_per_chat": turns,
        "turns_sent": total,
        "kills": len(kill_points),
        "turns_done_at_kills": kill_points,
        "turns_interrupted": sum(a > 1 for a in attempts),
        "processes_that_ran_turns": len(sampler.holders),
        "facts_total": _sum_counts(facts),
        "control_facts_total": _sum_counts(control_facts),
        "max_app_connections": max(sampler.connections, default=0),
        "seconds": round(seconds, 1),
        "violations": violations,
    }


def _sum_counts(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def run_throughput(
    db_url: str, *, n_processes: int, chats: int = 50, turns: int = 10, workers: int = 4, **settings: Any
) -> dict[str, Any]:
    """The load scenario against `n_processes` processes on one database (`workers` each)."""
    apps_running = processes(db_url, n_processes, workers=workers, **settings)
    with apps_running as apps, Sampler(db_url, interval=0.5) as sampler:
        result = asyncio.run(run_load([a.base for a in apps], db_url, chats=chats, turns=turns))
    connections = sampler.connections or [0]
    return {
        **result,
        "processes": n_processes,
        "workers_per_process": workers,
        "app_connections_max": max(connections),
        "app_connections_mean": round(sum(connections) / len(connections), 1),
    }
