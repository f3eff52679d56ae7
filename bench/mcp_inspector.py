"""Drive every tool of `beads-memory mcp` with the MCP Inspector's command line, a client we did not write.

    python -m bench.mcp_inspector [--database-url URL] [--npm-dir DIR]

It installs `@modelcontextprotocol/inspector` (INSPECTOR_VERSION, from the npm registry) with npm into
`--npm-dir` (default: a cache folder under the user's cache directory; never into the repository),
starts the server over streamable HTTP on a free loopback port with a fresh key, lists its tools (each
must carry its annotations and output schema) and calls every one of them in turn on a session of its
own, checking each answer's structured content. It needs node and npm (20 or later), and Postgres:
`--database-url`, else DATABASE_URL, else the embedded server. It prints one line per call and exits 1
on the first failure. The stdio transport is driven once too (tools/list). `tests/test_mcp_inspector.py`
runs it when node and npm are present.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import platformdirs

INSPECTOR_VERSION = "2.12.0"
PACKAGE = "@modelcontextprotocol/inspector"
ROOT = Path(__file__).resolve().parent.parent
TOOLS = (
    "capture",
    "search",
    "list",
    "get",
    "remember",
    "correct",
    "history",
    "pin",
    "unpin",
    "delete",
    "forget",
)


class InspectorFailed(Exception):
    """A call the inspector made failed, or answered what it should not have."""


def install(npm_dir: Path) -> Path:
    """The inspector's executable under `npm_dir`, installed there first if it is not."""
    binary = npm_dir / "node_modules" / ".bin" / "mcp-inspector"
    installed = npm_dir / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if not (binary.exists() and json.loads(installed.read_text()).get("version") == INSPECTOR_VERSION):
        npm_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(npm_dir),
                "--no-audit",
                "--no-fund",
                "--silent",
                f"{PACKAGE}@{INSPECTOR_VERSION}",
            ],
            check=True,
            timeout=600,
        )
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(database_url: str | None, *more: str) -> list[str]:
    db = ["--database-url", database_url] if database_url else []
    return [sys.executable, "-m", "memory", "mcp", "--embedder", "fake-64", *db, *more]


@contextlib.contextmanager
def http_server(database_url: str | None, key: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        server_command(database_url, "--transport", "http", "--port", str(port)),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "BEADS_MCP_KEY": key},
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise InspectorFailed(
                    f"the server did not start: {process.stderr.read() if process.stderr else ''}"
                )
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=60)
        if process.stderr is not None:
            process.stderr.close()


class Inspector:
    """`mcp-inspector --cli` against one server, one JSON answer per call."""

    def __init__(self, binary: Path, target: list[str]) -> None:
        self.binary = binary
        self.target = target

    def run(self, *args: str) -> dict[str, Any]:
        done = subprocess.run(
            # a stdio server loads its embedder and sets up the store before it answers
            [str(self.binary), "--cli", *self.target, "--connect-timeout", "120000", *args],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
        if done.returncode != 0:
            raise InspectorFailed(
                f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip() or done.stdout}"
            )
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def tools(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.run("--method", "tools/list")["tools"]
        return listed

    def call(self, tool: str, **arguments: object) -> dict[str, Any]:
        pairs = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in arguments.items()]
        answer = self.run(
            "--method", "tools/call", "--tool-name", tool, *(["--tool-arg", *pairs] if pairs else [])
        )
        if answer.get("isError"):
            raise InspectorFailed(f"{tool}: {answer.get('content')}")
        structured: dict[str, Any] | None = answer.get("structuredContent")
        if structured is None:
            raise InspectorFailed(f"{tool}: no structured content")
        return structured


def check(ok: bool, what: str) -> None:
    if not ok:
        raise InspectorFailed(what)


def check_tools(tools: list[dict[str, Any]]) -> None:
    names = {t["name"] for t in tools}
    check(names == set(TOOLS), f"tools: {sorted(names)}")
    for tool in tools:
        hints = tool.get("annotations") or {}
        check("readOnlyHint" in hints and "destructiveHint" in hints, f"{tool['name']}: no annotations")
        check(bool(tool.get("outputSchema")), f"{tool['name']}: no output schema")
        check(tool["inputSchema"].get("additionalProperties") is False, f"{tool['name']}: loose input schema")


def every_tool(inspector: Inspector, say: Callable[[str], None]) -> None:
    """Each tool once, on a session of its own, each answer checked."""
    session = f"inspector-{uuid.uuid4().hex[:8]}"
    check_tools(inspector.tools())
    say(f"tools/list: {len(TOOLS)} tools, each annotated, with an output schema and a strict input schema")
    first = inspector.call(
        "capture", session_id=session, text="Our budget is $100k per year.", message_id="m1"
    )
    check(first["written"] == 1, f"capture: {first}")
    # full ids: the inspector reads a short id such as 8e418746 as a number (8e418746 = 8 x 10^418746)
    budget = inspector.call("list", session_id=session)["facts"][0]["id"]
    say(f"capture: wrote {budget}")
    found = inspector.call("search", session_id=session, query="What is our budget?", k=3)
    check("$100k" in found["hits"][0]["text"] and "said_at" in found["hits"][0], f"search: {found}")
    say(f"search: {len(found['hits'])} hit(s), the first {found['hits'][0]['short_id']}")
    corrected = inspector.call(
        "correct", session_id=session, fact_id=budget, text="Our budget is $150k per year."
    )
    check(corrected["links"][0]["ok"], f"correct: {corrected}")
    new = corrected["fact"]["id"]
    say(f"correct: {new} replaces {budget}")
    noted = inspector.call("remember", session_id=session, text="The team prefers Postgres.")
    say(f"remember: {noted['fact']['short_id']}")
    versions = inspector.call("history", session_id=session, fact_id=budget)["versions"]
    check([v["current"] for v in versions] == [False, True], f"history: {versions}")
    say(f"history: {len(versions)} versions")
    pinned = inspector.call("pin", session_id=session, fact_id=new)
    check(pinned["pinned"]["pinned"], f"pin: {pinned}")
    say(f"pin: {new}")
    page = inspector.call("list", session_id=session, pinned=True)
    check([f["id"] for f in page["facts"]] == [new], f"list: {page}")
    say("list pinned=true: the pinned fact")
    one = inspector.call("get", session_id=session, fact_id=budget)["fact"]
    check(not one["current"], f"get: {one}")
    say(f"get: {budget}, superseded")
    unpinned = inspector.call("unpin", session_id=session, fact_id=new)
    check(unpinned["unpinned"] == 1, f"unpin: {unpinned}")
    say("unpin: 1 pin removed")
    deleted = inspector.call("delete", session_id=session, fact_id=new)
    check(deleted["current"] is not None and deleted["current"]["id"] == budget, f"delete: {deleted}")
    say(f"delete: {new}; {budget} is current again")
    gone = inspector.call("forget", session_id=session)
    check(gone["deleted_facts"] == 2, f"forget: {gone}")
    say(f"forget: {gone['deleted_facts']} facts")


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    args.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args.add_argument(
        "--npm-dir",
        type=Path,
        default=platformdirs.user_cache_path("langgraph-beads-memory") / "mcp-inspector",
        help="where npm installs the inspector (default: the user's cache directory)",
    )
    options = args.parse_args(argv)
    if shutil.which("node") is None or shutil.which("npm") is None:
        print("node and npm are needed (20 or later)", file=sys.stderr)
        return 2
    try:
        binary = install(options.npm_dir)
        stdio = Inspector(binary, server_command(options.database_url))
        check_tools(stdio.tools())
        print("stdio tools/list: ok", flush=True)
        key = secrets.token_urlsafe(32)
        with http_server(options.database_url, key) as url:
            http = Inspector(binary, [url, "--transport", "http", "--header", f"Authorization: Bearer {key}"])
            every_tool(http, lambda line: print(f"http {line}", flush=True))
    except (InspectorFailed, subprocess.SubprocessError, OSError) as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    print("every tool: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
