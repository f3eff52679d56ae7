"""The README's examples run as they stand there: "Using the library" on a fresh embedded Postgres, and
the pytest module of "Testing your agent with this memory" under pytest."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.first_run import RECALLED, ROOT, example_env, library_example, readme_test_module

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def scratch() -> Iterator[Path]:
    # outside pytest's tmp_path, which is 0700: the embedded server runs as its own system user
    where = Path(tempfile.mkdtemp(prefix="beads-readme-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def run(argv: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    env = example_env(where / "data")
    env["PYTHONPATH"] = str(ROOT)  # the clone's library, as `uv run` gives it
    return subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True, timeout=300)


def test_the_library_example_runs_as_pasted_and_recalls_the_budget(scratch: Path) -> None:
    code = library_example()
    assert "start_embedded()" in code and "from memory.testing import ScriptedChatModel" in code
    script = scratch / "example.py"
    script.write_text(code)
    ran = run([sys.executable, str(script)], scratch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.strip().splitlines()
    assert lines[-1] == RECALLED  # the search
    block = "\n".join(lines[:-1])  # what the model read in the second conversation
    assert RECALLED in block, ran.stdout
    assert (scratch / "data" / "pgdata").is_dir()  # on the embedded server, in the data dir it was given


def test_the_testing_example_passes_under_pytest(scratch: Path) -> None:
    module = scratch / "test_readme_example.py"
    module.write_text(readme_test_module())
    ran = run([sys.executable, "-m", "pytest", str(module), "-q", "-p", "no:cacheprovider"], scratch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_the_production_example_runs_as_pasted(scratch: Path) -> None:
    import re

    page = (ROOT / "docs" / "guide" / "production.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[-1]
    assert "FactStore.connect(start_embedded()" in code and "PostgresSaver(store.pool)" in code
    script = scratch / "production.py"
    script.write_text(code)
    ran = run([sys.executable, str(script)], scratch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    printed = ran.stdout.strip().splitlines()
    assert "summary Qdrant can be self-hosted with Docker." in printed
    assert "user_input it must be self-hostable." in printed
    # the delegate tool's return (the summary again, with its id) is not a second line
    assert not any(line.startswith("conclusion [") for line in printed)
