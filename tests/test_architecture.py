"""The layout is the architecture: the library never imports the app, neither imports the benchmarks,
the comparison never imports the web app, the library's layers (doors, context, graph, search,
Postgres and rules, embedders) only import downwards, the vocabulary imports no layer, and no package
has an import cycle among its modules (pyproject.toml's contracts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout
    for contract in (
        "never imports the playground",
        "imports the benchmarks",
        "never import the web app",
        "The library's layers",
        "imports no layer",
        "No import cycles",
    ):
        assert contract in result.stdout
