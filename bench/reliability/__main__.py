"""`python -m bench.reliability [--quick] [--only NAME ...]`: run the scenarios, print a progress
line per scenario and the table, write `results/reliability/reliability.json` and `results/reliability/README.md`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.reliability import report
from bench.reliability.bad_input import KEY as BAD_INPUT_KEY
from bench.reliability.bad_input import rig_oversized_tool, run_bad_inputs
from bench.reliability.crash import run_crash
from bench.reliability.isolation import (
    POISONING_EXAMPLES_PER_SEED,
    POISONING_SEEDS,
    run_isolation,
    run_poisoning,
)
from bench.reliability.load import run_load
from bench.reliability.multiprocess import run_multiprocess, run_throughput
from bench.reliability.outage import run_outage
from bench.reliability.servers import (
    app_in_thread,
    app_process,
    create_database,
    drop_database,
    server_or_own,
)
from bench.reliability.sse_reconnect import run_sse_reconnects
from memory.postgres.connection import open_pool
from playground.settings import PlaygroundSettings


@dataclass(frozen=True)
class Sizes:
    chats: int
    turns: int
    crash_turns: int
    kills: int
    outages: tuple[float, ...]
    reconnects: int
    isolation: int
    poisoning: int  # generated cases per seed
    poisoning_seeds: int
    processes: int = 3  # the multiprocess scenario's app processes (it uses chats and turns too)
    process_kills: int = 2
    throughput_processes: tuple[int, ...] = (1, 2, 4)


LONG = Sizes(
    chats=50,
    turns=10,
    crash_turns=20,
    kills=20,
    outages=(3.0, 10.0, 40.0),
    reconnects=100,
    isolation=1000,
    poisoning=POISONING_EXAMPLES_PER_SEED,
    poisoning_seeds=len(POISONING_SEEDS),
)
QUICK = Sizes(
    chats=5,
    turns=3,
    crash_turns=4,
    kills=3,
    outages=(3.0,),
    reconnects=10,
    isolation=50,
    poisoning=5,
    poisoning_seeds=3,
    processes=2,
    process_kills=1,
    throughput_processes=(1, 2),
)
SCENARIOS = (
    "load",
    "crash",
    "outage",
    "sse",
    "bad_input",
    "isolation",
    "poisoning",
    "multiprocess",
    "throughput",
)
#: pools of each process in the throughput runs: four processes of these fit the embedded server's
#: max_connections (100), four with the default pools (35 connections each) do not, and the startup
#: check refuses them
THROUGHPUT_POOLS = {"pool_size": 14, "facts_pool_size": 4, "stock_pool_size": 2}


@contextlib.contextmanager
def database_server() -> Iterator[str]:
    """DATABASE_URL's server if set, else an embedded Postgres of our own in a temporary directory."""
    with server_or_own(os.environ.get("DATABASE_URL")) as url:
        yield url


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    url = create_database(server_url)
    try:
        yield url
    finally:
        drop_database(server_url, url)


def scenario_load(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db, app_process(db) as app:
        return asyncio.run(run_load(app.base, db, chats=sizes.chats, turns=sizes.turns, rss=app.rss_bytes))


def scenario_crash(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db:
        return run_crash(db, turns=sizes.crash_turns, kills=sizes.kills)


def scenario_outage(server: str, sizes: Sizes) -> dict[str, Any]:
    return run_outage(down_seconds=sizes.outages)  # always on a Postgres of its own: it is stopped


def scenario_sse(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db, app_process(db, scripted_token_delay_ms=10) as app:
        return run_sse_reconnects(app.base, reconnects=sizes.reconnects)


def scenario_bad_input(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db:
        values: dict[str, Any] = {
            "database_url": db,
            "embedder": "fake",
            "model_backend": "scripted",
            "web_search": False,
            "poll_seconds": 0.2,
        }
        settings = PlaygroundSettings(**values)
        # the access cases that need a key go to a second app on the same database, with one
        keyed = PlaygroundSettings(**values, api_key=BAD_INPUT_KEY)
        with app_in_thread(settings) as (app, base), app_in_thread(keyed) as (keyed_app, keyed_base):
            for each in (app, keyed_app):  # either may run a turn: both workers claim from one queue
                rig_oversized_tool(each.state.runtime)
            return run_bad_inputs(
                base, db, max_message_chars=settings.max_message_chars, keyed_base=keyed_base
            )


def scenario_multiprocess(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db:
        return run_multiprocess(
            db, n_processes=sizes.processes, chats=sizes.chats, turns=sizes.turns, kills=sizes.process_kills
        )


def scenario_throughput(server: str, sizes: Sizes) -> dict[str, Any]:
    runs, failed = [], []
    for n in sizes.throughput_processes:
        with fresh_database(server) as db:
            try:
                runs.append(
                    run_throughput(
                        db,
                        n_processes=n,
                        chats=sizes.chats,
                        turns=sizes.turns,
                        processes=n,
                        **THROUGHPUT_POOLS,
                    )
                )
            except Exception as exc:  # one count that cannot run is a finding; the others still count
                failed.append(f"{n} processes: the run failed: {exc!r}")
    return {
        "runs": runs,
        "pools": THROUGHPUT_POOLS,
        "violations": failed + [f"{r['processes']} processes: {v}" for r in runs for v in r["violations"]],
    }


def scenario_isolation(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db, open_pool(db, min_size=1, max_size=4) as pool:
        return run_isolation(pool, examples=sizes.isolation)


def scenario_poisoning(server: str, sizes: Sizes) -> dict[str, Any]:
    with fresh_database(server) as db, open_pool(db, min_size=1, max_size=4) as pool:
        return run_poisoning(pool, examples=sizes.poisoning, seeds=tuple(range(sizes.poisoning_seeds)))


RUNNERS: dict[str, Callable[[str, Sizes], dict[str, Any]]] = {
    "load": scenario_load,
    "crash": scenario_crash,
    "outage": scenario_outage,
    "sse": scenario_sse,
    "bad_input": scenario_bad_input,
    "isolation": scenario_isolation,
    "poisoning": scenario_poisoning,
    "multiprocess": scenario_multiprocess,
    "throughput": scenario_throughput,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a minute or two")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, help="run only these scenarios")
    parser.add_argument("--no-write", action="store_true", help="print the table, write no files")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="render results/reliability/README.md again from the saved JSON",
    )
    args = parser.parse_args(argv)
    if args.report_only:
        saved = json.loads(report.JSON_PATH.read_text())
        report.write(saved["results"], saved["meta"])
        print(report.table(saved["results"]))
        return 0
    logging.basicConfig(level=logging.WARNING)
    sizes = QUICK if args.quick else LONG
    chosen = args.only or list(SCENARIOS)
    results: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    with database_server() as server:
        with psycopg.connect(server) as conn:
            postgres = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        for i, name in enumerate(chosen, 1):
            print(f"[{i}/{len(chosen)}] {name} ...", flush=True)
            began = time.monotonic()
            try:
                outcome = RUNNERS[name](server, sizes)
            except Exception as exc:  # a scenario that cannot finish is a finding, not a crash of the run
                outcome = {"violations": [f"the scenario failed: {exc!r}"]}
            outcome["seconds"] = outcome.get("seconds", round(time.monotonic() - began, 1))
            results[name] = outcome
            verdict = "held" if not outcome["violations"] else f"{len(outcome['violations'])} violations"
            print(f"      {name}: {verdict} ({round(time.monotonic() - began, 1)} s)", flush=True)
    meta = {
        "command": "uv run --extra dev python -m bench.reliability" + (" --quick" if args.quick else ""),
        "mode": "quick" if args.quick else "long",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.monotonic() - started),
        "machine": report.machine(),
        "postgres": f"PostgreSQL {postgres}",
    }
    if args.only and not args.no_write and report.JSON_PATH.exists():
        # a rerun of some scenarios keeps the saved figures of the others, and says which were rerun
        saved = json.loads(report.JSON_PATH.read_text())
        if saved["meta"].get("mode") == meta["mode"]:
            rerun = f"{', '.join(chosen)} rerun on {meta['date']} with --only"
            results = {**saved["results"], **results}
            meta = {**saved["meta"], "reruns": [*saved["meta"].get("reruns", []), rerun]}
    print()
    print(report.table(results))
    if results.get("throughput", {}).get("runs"):
        print(report.throughput_table(results["throughput"]))
    for name, result in results.items():
        for violation in result["violations"]:
            print(f"  {name}: {violation}")
    if not args.no_write:
        report.write(results, meta)
        print(
            f"\nwrote {report.JSON_PATH.relative_to(report.ROOT)} and {report.DOC_PATH.relative_to(report.ROOT)}"
        )
    return 0 if all(not r["violations"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
