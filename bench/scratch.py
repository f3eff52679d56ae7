"""A throwaway embedded Postgres for a bench: in a temporary directory, gone when the bench exits."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from memory.postgres.embedded_postgres import start_embedded


def scratch_server(prefix: str) -> str:
    """Start an embedded server in a new temporary directory; its URL."""
    data_dir = tempfile.mkdtemp(prefix=prefix)
    # registered before the server starts, so it runs after the server's own exit hook has stopped it
    atexit.register(shutil.rmtree, data_dir, True)
    return start_embedded(Path(data_dir) / "pgdata")


def scratch_database(prefix: str, name: str) -> str:
    """A fresh database `name` on a new scratch server; its URL."""
    server = scratch_server(prefix)
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server, dbname=name)
