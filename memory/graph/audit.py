"""The store's reads for looking back, apart from its verbs: `store.audit` (a claim's versions and
edges, a session's facts then and now, its counts, a page of its facts) and `store.review` (what
capture decided alone, and what it only proposed). They write nothing; the decisions a person makes
on them (`supersede`, `undo_supersede`, `settle_proposal`) are the store's own verbs."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import DictRow

from memory.errors import InvalidCursorError
from memory.graph import facts as fact_sql
from memory.graph import reads, supersession
from memory.graph.refs import FactRef, SessionRef, fact_id_of, session_of
from memory.model import Fact, FactPage, Kind, ListedFact, Source, Status

Connect = Callable[[], AbstractContextManager[psycopg.Connection[DictRow]]]

MAX_PAGE = 200


class Audit:
    """What the memory holds and held: `store.audit`."""

    def __init__(self, connection: Connect) -> None:
        self._connection = connection

    def facts_in_namespace(self, ns_id: uuid.UUID) -> list[Fact]:
        with self._connection() as conn:
            return reads.facts_in_namespace(conn, ns_id)

    def subtree_facts(self, ns_id: uuid.UUID, agent_id: str | None = None) -> list[Fact]:
        with self._connection() as conn:
            return reads.subtree_facts(conn, ns_id, agent_id)

    def session_facts(self, session: SessionRef) -> list[Fact]:
        with self._connection() as conn:
            return reads.session_facts(conn, session_of(session))

    def facts_as_of(self, session: SessionRef, at: datetime, include_directives: bool = False) -> list[Fact]:
        with self._connection() as conn:
            return reads.facts_as_of(conn, session_of(session), at, include_directives)

    def history(self, ref: FactRef) -> list[Fact]:
        with self._connection() as conn:
            return reads.supersede_history(conn, fact_id_of(ref))

    def edges(self, ref: FactRef) -> list[tuple[uuid.UUID, str, uuid.UUID]]:
        with self._connection() as conn:
            return fact_sql.edges_of(conn, fact_id_of(ref))

    def stats(self, session: SessionRef) -> list[dict[str, object]]:
        with self._connection() as conn:
            return reads.session_stats(conn, session_of(session))

    def edge_counts(self, session: SessionRef) -> dict[str, int]:
        """The session's edges by relation (undone supersedes edges apart)."""
        with self._connection() as conn:
            return reads.edge_counts(conn, session_of(session))

    def list_facts(
        self,
        session: SessionRef,
        *,
        kind: Kind | str | None = None,
        source: Source | str | None = None,
        status: Status | str | None = None,
        pinned: bool | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> FactPage:
        """A page of the session's facts, newest first (retired ones too unless `status` says), each
        with whether its claim is pinned; `FactPage.next_cursor` is the `cursor` of the next page.
        Every filter left None matches everything."""
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
        filters = {
            "kind": None if kind is None else Kind(kind).value,
            "source": None if source is None else Source(source).value,
            "status": None if status is None else Status(status).value,
        }
        with self._connection() as conn:
            rows = reads.fact_page(
                conn,
                session_of(session),
                **filters,
                pinned=pinned,
                after=read_cursor(cursor),
                limit=limit + 1,
            )
        page = tuple(ListedFact(fact, is_pinned) for fact, is_pinned in rows[:limit])
        more = len(rows) > limit
        return FactPage(page, page_cursor(page[-1].fact) if more else None)

    def sessions(self) -> list[str]:
        """Every session id the store holds, in order."""
        with self._connection() as conn:
            return reads.session_ids(conn)


class Review:
    """What capture decided about corrections, for a person to check: `store.review`."""

    def __init__(self, connection: Connect) -> None:
        self._connection = connection

    def proposals(self, session: SessionRef) -> list[dict[str, Any]]:
        """The replacements capture proposed (a rule below the precision it may act on alone) and no
        one has accepted or dismissed yet, newest first."""
        with self._connection() as conn:
            return supersession.proposals(conn, session_of(session))

    def automatic_edges(self, session: SessionRef) -> list[dict[str, Any]]:
        """The supersedes edges capture wrote by itself, with their reasons (undone ones too)."""
        with self._connection() as conn:
            return supersession.automatic_edges(conn, session_of(session))


def page_cursor(last: Fact) -> str:
    """The cursor of the page after `last`: opaque to callers, (recorded_at, id) inside."""
    raw = json.dumps([last.recorded_at.isoformat(), str(last.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    if cursor is None:
        return None
    try:
        at, fid = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("no offset")
        return moment, uuid.UUID(fid)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise InvalidCursorError() from None
