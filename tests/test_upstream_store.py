"""LangGraph's own store tests, run against BeadsStore.

The sdists of `langgraph-checkpoint` and `langgraph-checkpoint-postgres` carry their `tests/`. This
module downloads the two at the versions uv.lock pins (the URL and sha256 the lock records; kept in
pytest's cache between runs, never in the repository), unpacks them, puts our conftest
(tests/upstream_conftest.py) in place of theirs, and runs their tests/test_store.py (checkpoint) and
tests/test_store.py + tests/test_async_store.py (checkpoint-postgres) with their own pytest settings,
on our embedded server. The test bodies are theirs, unchanged: only the names their stores are built
with mean BeadsStore. Any failure of theirs fails this test, naming it. Without PyPI this fails,
loudly: CI has PyPI, and a lane that skips itself proves nothing.

The three files run side by side in three processes (their TTL tests mostly sleep).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUR_CONFTEST = Path(__file__).resolve().parent / "upstream_conftest.py"
# (package, a test file of its sdist that exercises a store): one process each, all at once (the
# postgres files' fixtures create and drop a database per test, and their TTL tests sleep)
SUITES = [
    ("langgraph-checkpoint", "tests/test_store.py"),
    ("langgraph-checkpoint-postgres", "tests/test_store.py"),
    ("langgraph-checkpoint-postgres", "tests/test_async_store.py"),
]
# the whole lane, on a loaded 2-core machine
LANE_TIMEOUT_S = 1500


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    url: str
    sha256: str


def locked_sdist(name: str) -> Sdist:
    """The sdist uv.lock pins for `name`."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    [package] = [p for p in lock["package"] if p["name"] == name]
    sdist = package["sdist"]
    algorithm, digest = sdist["hash"].split(":", 1)
    assert algorithm == "sha256", sdist["hash"]
    return Sdist(name, package["version"], sdist["url"], digest)


def fetch(sdist: Sdist, cache: Path) -> Path:
    """The sdist's archive, from the cache or PyPI, checked against the lock's sha256."""
    archive = cache / Path(sdist.url).name
    if not archive.exists() or hashlib.sha256(archive.read_bytes()).hexdigest() != sdist.sha256:
        try:
            with urllib.request.urlopen(sdist.url, timeout=60) as response:
                data = response.read()
        except OSError as exc:
            pytest.fail(
                f"cannot download {sdist.name} {sdist.version} from {sdist.url} ({exc}): this test runs "
                "LangGraph's own store tests from its sdist and needs PyPI"
            )
        if hashlib.sha256(data).hexdigest() != sdist.sha256:
            pytest.fail(f"{sdist.url} does not match the sha256 uv.lock records for it")
        archive.write_bytes(data)
    return archive


def unpack(archive: Path, into: Path) -> Path:
    """The sdist's root folder under `into`, with our conftest in place of theirs."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    [root] = [p for p in into.iterdir() if p.is_dir()]
    shutil.copyfile(OUR_CONFTEST, root / "tests" / "conftest.py")
    return root


@dataclass(frozen=True)
class Outcome:
    passed: list[str]
    failed: list[str]
    skipped: list[str]
    xfailed: list[str]
    output: str


def outcome(report: Path, output: str) -> Outcome:
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    xfailed: list[str] = []
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(name)
            elif (skip := case.find("skipped")) is not None:
                (xfailed if skip.get("type") == "pytest.xfail" else skipped).append(name)
            else:
                passed.append(name)
    return Outcome(passed, failed, skipped, xfailed, output)


@pytest.mark.slow
@pytest.mark.timeout(LANE_TIMEOUT_S + 120)
def test_langgraphs_own_store_tests_pass_on_beads_store(
    pg_server_url: str, template_db: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cache = request.config.cache.mkdir("langgraph-sdists") if request.config.cache else tmp_path
    env = {
        **os.environ,
        "BEADS_UPSTREAM_SERVER_URL": pg_server_url,
        "BEADS_UPSTREAM_TEMPLATE": template_db,
        # this checkout's `memory` (their tests import `tests.*` from their own root, which pytest puts first)
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    runs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    roots = {name: unpack(fetch(locked_sdist(name), Path(cache)), tmp_path / name) for name in dict(SUITES)}
    for package, file in SUITES:
        name = f"{package} {file}"
        root = roots[package]
        report = tmp_path / f"{package}-{Path(file).stem}.xml"
        command = [
            sys.executable, "-m", "pytest", file,
            "-p", "no:cacheprovider", "-q", "--no-header", "-rfE", "--durations=0",
            f"--junitxml={report}", "-o", "timeout=300",
        ]  # fmt: skip
        # to a file as it goes, so a run that hangs still shows how far it got
        with report.with_suffix(".log").open("wb") as log:
            process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        runs[name] = (process, report)
    results: dict[str, Outcome] = {}
    deadline = time.monotonic() + LANE_TIMEOUT_S
    try:
        for name, (process, report) in runs.items():
            try:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
            finally:
                output = report.with_suffix(".log").read_text(errors="replace")
            print(f"--- {name}\n{output[-3000:]}")
            results[name] = outcome(report, output)
            assert process.returncode in (0, 1), (
                f"{name}: pytest exited {process.returncode}\n{output[-4000:]}"
            )
    finally:
        for process, _ in runs.values():  # a timeout or a failed assert leaves none running
            if process.poll() is None:
                process.kill()
                process.wait()
    summary = {
        name: (len(r.passed), len(r.failed), len(r.skipped), len(r.xfailed)) for name, r in results.items()
    }
    print("upstream store tests (passed, failed, skipped, expected to fail):", summary)
    failed = [f"{name}: {case}" for name, r in results.items() for case in r.failed]
    assert not failed, (
        "LangGraph's store tests failed on BeadsStore:\n"
        + "\n".join(failed)
        + "\n\n"
        + "\n".join(re.sub(r"\n{3,}", "\n\n", r.output[-6000:]) for r in results.values() if r.failed)
    )
    assert all(r.passed for r in results.values()), summary
    assert not any(r.skipped for r in results.values()), summary
    # the one test that reads PostgresStore's private pool helper (upstream_conftest.NOT_THE_STORE_API)
    xfailed = [case.rsplit("::", 1)[-1].split("[")[0] for r in results.values() for case in r.xfailed]
    assert xfailed == ["test_abatch_uses_single_pool_checkout"], xfailed
