"""The namespace tree of a session: a root per session, a forked child per sub-agent.

Visibility rule, enforced in SQL by array containment on ids (never by string prefix):
a namespace reads itself and its ancestors (its `lineage`), never a sibling; a parent also reads its
whole subtree, demoted in ranking; sessions never see each other.
"""

from __future__ import annotations

import uuid

import psycopg
from psycopg.rows import DictRow

from memory.errors import NamespaceNotFoundError
from memory.ids import child_segment, namespace_id
from memory.model import Namespace

_COLUMNS = "id, session_id, parent_id, lineage, path, agent_id"


def root_namespace(conn: psycopg.Connection[DictRow], session_id: str, agent_id: str = "root") -> Namespace:
    """The session's root namespace, created on first use with a derived (replayable) id."""
    if not session_id:
        raise ValueError("session_id must be a non-empty string")
    ns_id = namespace_id(session_id, ())
    # read first: the middleware resolves the session's root on every model call, and after the
    # first one it exists; the insert is for the first call only
    found = _find(conn, ns_id)
    if found is not None:
        return found
    conn.execute(
        "INSERT INTO beads.namespaces (id, session_id, parent_id, lineage, path, agent_id) "
        "VALUES (%s, %s, NULL, ARRAY[%s]::uuid[], '{}', %s) ON CONFLICT (id) DO NOTHING",
        (ns_id, session_id, ns_id, agent_id),
    )
    return get_namespace(conn, ns_id)


def fork_namespace(
    conn: psycopg.Connection[DictRow], parent: Namespace, label: str, agent_id: str
) -> Namespace:
    """A new child namespace of `parent` for a sub-agent; its path segment ends in a random suffix."""
    if not label:
        raise ValueError("a forked namespace needs a label")
    path = (*parent.path, child_segment(label))
    ns_id = namespace_id(parent.session_id, path)
    row = conn.execute(
        f"INSERT INTO beads.namespaces (id, session_id, parent_id, lineage, path, agent_id) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (ns_id, parent.session_id, parent.id, [*parent.lineage, ns_id], list(path), agent_id),
    ).fetchone()
    assert row is not None
    return Namespace.from_row(row)


def _find(conn: psycopg.Connection[DictRow], ns_id: uuid.UUID) -> Namespace | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM beads.namespaces WHERE id = %s", (ns_id,)).fetchone()
    return None if row is None else Namespace.from_row(row)


def get_namespace(conn: psycopg.Connection[DictRow], ns_id: uuid.UUID) -> Namespace:
    found = _find(conn, ns_id)
    if found is None:
        raise NamespaceNotFoundError(f"no namespace {ns_id}")
    return found


def children(conn: psycopg.Connection[DictRow], ns_id: uuid.UUID) -> list[Namespace]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM beads.namespaces WHERE parent_id = %s ORDER BY created_at, id", (ns_id,)
    ).fetchall()
    return [Namespace.from_row(r) for r in rows]


def subtree(conn: psycopg.Connection[DictRow], ns_id: uuid.UUID) -> list[Namespace]:
    """`ns_id` and every namespace below it, parents before children."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM beads.namespaces WHERE lineage @> ARRAY[%s]::uuid[] "
        "ORDER BY array_length(lineage, 1), created_at, id",
        (ns_id,),
    ).fetchall()
    return [Namespace.from_row(r) for r in rows]


def session_namespaces(conn: psycopg.Connection[DictRow], session_id: str) -> list[Namespace]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM beads.namespaces WHERE session_id = %s "
        "ORDER BY array_length(lineage, 1), created_at, id",
        (session_id,),
    ).fetchall()
    return [Namespace.from_row(r) for r in rows]
