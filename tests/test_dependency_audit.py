"""The dependency audit CI runs (.ci/audit-deps) against the advisory snapshot committed in
.ci/advisories, on a copy of the project: the lock as it is passes, a lock that pins a version with a
PYSEC record in the snapshot fails naming it, and a lock that pins a package the snapshot was not
filtered for fails asking for a rebuild. Nothing but the loopback snapshot service is asked:
`--no-index` keeps uv from looking each package up on the index, and the service runs on this
Python rather than one `uv run` would fetch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _uv_audit() -> str | None:
    uv = shutil.which("uv")
    if uv is None:
        return None
    found = subprocess.run([uv, "audit", "--help"], capture_output=True, text=True)
    return uv if found.returncode == 0 else None


pytestmark = [
    pytest.mark.slow,  # uv, the audit script and a loopback service, each in its own process, per test
    pytest.mark.skipif(
        _uv_audit() is None, reason="`uv audit` is missing (uv on PATH with the audit command)"
    ),
]


def project_copy(tmp_path: Path) -> Path:
    """The files the audit reads, in a folder of their own (the script audits the folder it sits in)."""
    shutil.copytree(ROOT / ".ci", tmp_path / ".ci")
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def set_locked_version(lock: Path, package: str, new: str) -> None:
    """Pin `package` at `new` in `lock`: its entry's version and its files' names (uv checks that
    they agree; the hashes it does not check without installing)."""
    [old] = [p["version"] for p in tomllib.loads(lock.read_text())["package"] if p["name"] == package]
    entries = lock.read_text().split("\n[[package]]\n")
    [i] = [n for n, entry in enumerate(entries) if entry.startswith(f'name = "{package}"\n')]
    entries[i] = entries[i].replace(f'"{old}"', f'"{new}"').replace(f"-{old}", f"-{new}")
    lock.write_text("\n[[package]]\n".join(entries))


def audit(project: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ADVISORIES": ".ci/advisories",  # the committed snapshot, without trying OSV first
        "SNAPSHOT_PYTHON": sys.executable,
    }
    return subprocess.run(
        [str(project / ".ci" / "audit-deps"), "--no-index"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_locked_versions_have_no_advisory_in_the_snapshot(tmp_path: Path) -> None:
    done = audit(project_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no known vulnerabilities" in done.stdout + done.stderr


def test_a_pin_with_an_advisory_in_the_snapshot_fails_the_audit(tmp_path: Path) -> None:
    project = project_copy(tmp_path)
    assert (project / ".ci/advisories/jinja2/PYSEC-2019-217.yaml").is_file()
    set_locked_version(project / "uv.lock", "jinja2", "2.10")
    done = audit(project)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "jinja2 2.10 has 2 known vulnerabilities" in out
    assert "PYSEC-2019-217" in out and "PYSEC-2021-66" in out


def test_a_package_the_snapshot_was_not_filtered_for_fails_asking_for_a_rebuild(tmp_path: Path) -> None:
    project = project_copy(tmp_path)
    lock = project / "uv.lock"
    lock.write_text(
        lock.read_text()
        + '\n[[package]]\nname = "Not_In.Snapshot"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n'
    )
    done = audit(project)
    assert done.returncode == 1
    assert "not filtered for 1 package(s)" in done.stderr and "not-in-snapshot" in done.stderr
    assert "rebuild it" in done.stderr
