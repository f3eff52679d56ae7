"""A database at an older version of the library's schema, to test what an upgrade does to it."""

from __future__ import annotations

from typing import Any

import psycopg

from memory.postgres.migrate import migrations


def migrate_to(conn: psycopg.Connection[Any], version: int) -> None:
    """The library's schema as it stood at `version`, recorded as applied, as `setup` would leave it."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute("CREATE SCHEMA beads")
    conn.execute(
        "CREATE TABLE beads.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for m in migrations():
        if m.version <= version:
            with conn.transaction():
                conn.execute(m.sql)  # type: ignore[arg-type]
                conn.execute("INSERT INTO beads.schema_migrations VALUES (%s, %s)", (m.version, m.name))
