"""The MCP Inspector's command line (from the npm registry, installed at test time into a temporary
folder, never into the repository) drives every tool of `beads-memory mcp`: bench.mcp_inspector, run
against the test's Postgres. It needs node and npm; without them there is no inspector to run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import mcp_inspector

pytestmark = pytest.mark.bench


def test_the_inspector_drives_every_tool(
    db_url: str, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed here")
    npm_dir: Path = tmp_path_factory.mktemp("inspector")
    assert mcp_inspector.main(["--database-url", db_url, "--npm-dir", str(npm_dir)]) == 0, (
        capsys.readouterr().err
    )
    out = capsys.readouterr().out
    assert "stdio tools/list: ok" in out and "every tool: ok" in out
    for tool in mcp_inspector.TOOLS:
        assert f"http {tool}" in out, out
