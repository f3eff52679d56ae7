"""The sharding invariant (docs/internals/scaling.md): the fact graph could be distributed on `session_id`.

With Citus, every beads table would be distributed on `session_id`, so each statement the library
runs must say which session it touches: then it goes to one shard, and a join of two beads tables
stays on one shard. This test checks both halves against the real schema and the real SQL:

- every table in the `beads` schema has a `session_id` column, apart from the ones listed below;
- every statement the library sends while doing its work (capture, search, supersede, pin,
  retrieval notes, consolidation, compaction, forget, the background indexer) and that touches a
  beads table names `session_id` in a condition (WHERE, JOIN ... ON) or, for an INSERT, in its
  column list, apart from the ones listed below.

The statement check reads text, not a parse tree: `session_id` must appear after a WHERE, ON or
USING (or in an INSERT's column list). Each exception is listed with its reason; docs/internals/scaling.md lists them as the known work before
distribution. A new table or statement that breaks the invariant fails here until it is fixed or
listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool

from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore
from memory.postgres.connection import CONNECTION_KWARGS

#: beads tables without session_id, and why
TABLES_WITHOUT_SESSION = {
    "schema_migrations": "migration bookkeeping: a Citus local table on the coordinator",
    "embedders": "the registry of embedding spaces, a few rows shared by every session: a reference table",
    # known work (docs/internals/scaling.md): child rows reached through their fact's or passage's id
    "fact_vectors": "known work: keyed by fact_id; needs session_id to be co-located with facts",
    "item_vectors": "known work, as fact_vectors: BeadsStore's per-field vectors, keyed by fact_id",
    "passage_vectors": "known work: keyed by passage_id; needs session_id to be co-located with passages",
    "retrievals": "known work: keyed by fact_id; needs session_id to be co-located with facts",
}

_BY_ID = "known work: the public call takes a bare id (FactStore.get, history, pin, unpin, namespace, ...)"
#: statements that may touch beads tables without naming a session, each matched by a fragment of its
#: text, and why. Under Citus each of these is still correct, but goes to every shard.
STATEMENTS_WITHOUT_SESSION: dict[str, str] = {
    "SELECT pg_advisory_xact_lock(hashtext('beads.pin:'": "an advisory lock named after a fact: no table",
    # the tables without session_id (above)
    "INSERT INTO beads.fact_vectors (embedder_id, fact_id, embedding)": "known work: fact_vectors",
    "INSERT INTO beads.passage_vectors (embedder_id, passage_id, embedding)": "known work: passage_vectors",
    "INSERT INTO beads.retrievals AS r (fact_id,": "known work: retrievals",
    "FROM beads.fact_vectors va, beads.fact_vectors vb WHERE va.fact_id = %s": "known work: fact_vectors",
    'UPDATE beads."fact_vectors" v SET indexed = true': "the background indexer drains every session's"
    " pending vectors: under Citus a multi-shard UPDATE, or one per shard (known work, with fact_vectors)",
    'UPDATE beads."passage_vectors" v SET indexed = true': "the background indexer, as above",
    # lookups by a fact's or a namespace's id (uuids, unique across sessions)
    "FROM beads.facts WHERE id = ANY(%s)": _BY_ID
    + " (get_facts, and the row locks of supersede and compact)",
    "SELECT head_id, session_id FROM beads.facts WHERE id = %s": _BY_ID
    + " (unpin, which learns the session here)",
    "WHERE f.head_id = (SELECT head_id FROM beads.facts WHERE id = %s)": _BY_ID + " (history)",
    "FROM beads.facts f WHERE f.namespace_id = %s": _BY_ID + " (facts_in_namespace)",
    "FROM beads.namespaces WHERE id = %s": _BY_ID + " (namespace)",
    "FROM beads.namespaces WHERE parent_id = %s": _BY_ID + " (children)",
}

_BEADS_TABLE = re.compile(r'"?\bbeads"?\."?(\w+)"?')  # quoted or not (sql.Identifier quotes)
_CONDITION_ON_SESSION = re.compile(r"\b(WHERE|ON|USING)\b.*\bsession_id\b", re.I | re.S)
_INSERT_COLUMNS = re.compile(r'^\s*INSERT\s+INTO\s+"?beads"?\."?\w+"?\s*\(([^)]*)\)', re.I | re.S)


#: every statement a recording cursor sent
SENT: list[str] = []


class RecordingCursor(psycopg.Cursor[Any]):
    """A cursor that keeps the text of every statement it sends."""

    def _remember(self, query: Any) -> None:
        if isinstance(query, sql.Composable):
            query = query.as_string(self.connection)
        elif isinstance(query, bytes):
            query = query.decode()
        SENT.append(str(query))

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self._remember(query)
        return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        self._remember(query)
        return super().executemany(query, params_seq, **kwargs)


def _recording(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)
    conn.cursor_factory = RecordingCursor


@pytest.fixture
def recorded(db_url: str) -> Iterator[list[str]]:
    """The statements the library sent during a representative workload on two sessions."""
    with ConnectionPool(
        db_url, min_size=1, max_size=4, kwargs=CONNECTION_KWARGS, configure=_recording, open=True
    ) as pool:
        store = FactStore(pool, FakeEmbedder(64))
        store.setup()
        SENT.clear()  # the workload, not the migrations (they are exceptions by nature)
        for session in ("alpha", "beta"):
            ns = store.root(session)
            captured = store.capture_message(ns, "Our budget is $100k per year. It must be self-hostable.")
            child = store.fork(ns, "research")
            store.capture_message(child, "The vendor quoted $80k per year.")
            store.index_pending()
            correction = store.capture_message(ns, "Correction: our budget is $120k per year.")
            old, new = captured.facts[0], correction.facts[0]
            if store.get(old.id).status != "superseded":
                store.supersede(new, old)
            store.pin(new)
            found = store.search(ns, "What is our budget?")
            store.note_retrieved([hit.fact.id for hit in found.hits])
            store.pinned(session, ns)
            store.audit.history(new)
            store.audit.session_facts(session)
            store.namespace(child.id)
            store.children(ns.id)
            summary_of = [f.id for f in store.audit.facts_in_namespace(child.id)]
            store.compact(child, summary_of, "The vendor's quote, summarised.")
            store.consolidate(session)
            store.unpin(new)
            store.index_pending()
        store.forget("beta")
        yield list(SENT)
        store.aio.close()


def test_every_beads_table_carries_session_id(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        tables = {
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'beads'"
                " AND table_type = 'BASE TABLE'"
            )
        }
        with_session = {
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.columns WHERE table_schema = 'beads'"
                " AND column_name = 'session_id'"
            )
        }
    assert tables - with_session == set(TABLES_WITHOUT_SESSION)


def names_its_session(statement: str) -> bool:
    insert = _INSERT_COLUMNS.match(statement)
    if insert is not None and "session_id" in insert[1]:
        return True
    return bool(_CONDITION_ON_SESSION.search(statement))


def touches_only_exempt_tables(statement: str) -> bool:
    return set(_BEADS_TABLE.findall(statement)) <= {"schema_migrations", "embedders"}


def test_every_statement_on_the_fact_graph_names_its_session(recorded: list[str]) -> None:
    touching = [s for s in recorded if _BEADS_TABLE.search(s)]
    assert len(touching) > 30  # the workload did run through the store
    unscoped = {
        " ".join(s.split())
        for s in touching
        if not names_its_session(s)
        and not touches_only_exempt_tables(s)
        and not any(fragment in " ".join(s.split()) for fragment in STATEMENTS_WITHOUT_SESSION)
    }
    assert sorted(unscoped) == [], "\n".join(sorted(unscoped))
