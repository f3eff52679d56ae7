"""Test doubles for an agent that uses this memory: a scripted chat model and a throwaway database.

    from memory.testing import ScriptedChatModel, calls, injections, throwaway_database, tool_call

`ScriptedChatModel` answers from a script (replies you enqueue, tool calls included, then a rule or
"OK."), binds tools like a real chat model (so `BeadsMemoryMiddleware` can offer it the memory tools,
which langchain-core's `GenericFakeChatModel` cannot take), streams token by token, and records every
prompt it was sent: `model.system_prompts[-1]` is the system prompt of the last call, with the block
the middleware injected into it. It is the model the library's own tests and the playground's
scripted mode run on (memory.scripted).

`injections(agent, input, config)` runs a turn and returns the middleware's `beads_injection` events,
one per model call: `block` is the text it put into the system prompt, `facts` the ranked facts
behind it, with their distances, kinds and sources.

`throwaway_database()` gives each test a fresh, empty database on one embedded Postgres per process
(the `embedded` extra), or on the server `TEST_DATABASE_URL` names, and drops it afterwards.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from memory.doors.middleware import INJECTION_EVENT
from memory.scripted import Reply, ScriptedChatModel, calls, tool_call

#: the variable naming a Postgres server for throwaway databases instead of the embedded one
SERVER_URL_VARIABLE = "TEST_DATABASE_URL"


def injections(agent: Any, input: Any, config: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
    """Run `agent` on `input` (streamed, so the run is the same as `invoke`'s) and return the
    `beads_injection` events of the turn, in order: one per model call."""
    chunks = agent.stream(input, config, stream_mode="custom", **kwargs)
    return [c for c in chunks if isinstance(c, dict) and c.get("type") == INJECTION_EVENT]


@functools.cache  # one server per process: starting one takes seconds, a database tens of milliseconds
def _embedded_server() -> str:
    from memory.postgres.embedded_postgres import start_embedded

    # outside pytest's tmp_path: pytest resets its tree to 0700, which would lock the server's own
    # user out of a second test session's data directory
    where = Path(tempfile.mkdtemp(prefix="beads-throwaway-pg-"))
    # registered before the server's own exit handler, so it runs after the server has stopped
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    return start_embedded(where / "pgdata")


@contextmanager
def throwaway_database(server_url: str | None = None) -> Iterator[str]:
    """The URL of a new, empty database, dropped (connections and all) when the block ends.

    On `server_url`, else on the server `TEST_DATABASE_URL` names, else on an embedded Postgres
    started once per process in a temporary directory (never your own data directory). Pass the URL
    to `open_pool(url)`; `FactStore(pool, embedder).setup()` applies the migrations.
    """
    server = server_url or os.environ.get(SERVER_URL_VARIABLE) or _embedded_server()
    name = f"beads_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


__all__ = [
    "INJECTION_EVENT",
    "SERVER_URL_VARIABLE",
    "Reply",
    "ScriptedChatModel",
    "calls",
    "injections",
    "throwaway_database",
    "tool_call",
]
