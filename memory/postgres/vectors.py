"""Embedding spaces and the vectors stored in them.

Each embedder (name, dims) is registered once and gets its own partial HNSW index over the shared
claim vectors (passage vectors are read by primary key only, migration 0013); queries name the
embedder and cast to its dimension, so the planner uses that index and vectors of different spaces
are never compared. Embedding happens before a transaction opens, never
inside one: a slow model must not hold row locks.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import psycopg
from pgvector import Vector
from psycopg import sql
from psycopg.rows import DictRow

from memory.embedders.base import Embedder, mean_of_parts
from memory.errors import ConfigurationError

_INDEX_LOCK_KEY = 0x6265616474  # serialises index creation between processes

# The claim graph's build settings (pgvector's defaults are m = 16, ef_construction = 64). A message
# writes about three claim vectors where a one-item store writes one, and each insert's cost grows
# with m: neighbour lists of 2m entries are re-pruned as a vector joins them. On a 500K tier's real
# claim vectors (26,545 of 10 chats), m = 12 makes an insert 30% cheaper (2.08 -> 1.45 ms) and the
# session-filtered walk returns 99.1% of each question's 32 nearest claims against 99.4%
# (bench.graph_settings, results/long-sessions-39). Migration 0014 rebuilt older indexes so.
HNSW_M = 12
HNSW_EF_CONSTRUCTION = 64


def register_embedder(conn: psycopg.Connection[DictRow], name: str, dims: int) -> int:
    """The id of the embedding space `name`, creating it and its indexes on first use."""
    if not 1 <= int(dims) <= 2000:
        # pgvector's HNSW index stops at 2,000 dimensions for `vector`
        raise ConfigurationError(f"embedder {name!r} has {dims} dimensions; 1 to 2000 are supported")
    row = conn.execute("SELECT id, dims FROM beads.embedders WHERE name = %s", (name,)).fetchone()
    if row is not None:
        if row["dims"] != dims:
            raise ConfigurationError(
                f"embedder {name!r} was registered with {row['dims']} dimensions, now reports {dims}"
            )
        return int(row["id"])
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INDEX_LOCK_KEY,))
        row = conn.execute(
            "INSERT INTO beads.embedders (name, dims) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING RETURNING id",
            (name, dims),
        ).fetchone()
        if row is None:
            row = conn.execute("SELECT id FROM beads.embedders WHERE name = %s", (name,)).fetchone()
            # it conflicted, so it is there: embedders are never deleted
            assert row is not None
        embedder_id = int(row["id"])
        # ids and dims are integers we produced: safe to place in DDL as literals. Claims only:
        # passage vectors are read by primary key, never by nearness (migration 0013)
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {index} ON beads.fact_vectors "
                "USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
                "WITH (m = {m}, ef_construction = {efc}) "
                # new rows join the index later, off the write path (migration 0006, index_pending)
                "WHERE embedder_id = {eid} AND indexed"
            ).format(
                index=sql.Identifier(f"fact_vectors_hnsw_{embedder_id}"),
                dims=sql.Literal(int(dims)),
                m=sql.Literal(HNSW_M),
                efc=sql.Literal(HNSW_EF_CONSTRUCTION),
                eid=sql.Literal(embedder_id),
            )
        )
    return embedder_id


def as_vector(values: Sequence[float]) -> Vector:
    return Vector(list(values))


# A replay's vector rows conflict and are skipped, like its facts.
# only for a fact that was written: a repeated claim's insert wrote none (memory.graph.facts.INSERT_FACT)
INSERT_FACT_VECTOR = (
    "INSERT INTO beads.fact_vectors (embedder_id, fact_id, embedding)"
    " SELECT %s, f.id, %s FROM beads.facts f WHERE f.id = %s ON CONFLICT DO NOTHING"
)
INSERT_PASSAGE_VECTOR = (
    "INSERT INTO beads.passage_vectors (embedder_id, passage_id, embedding) VALUES (%s, %s, %s) "
    "ON CONFLICT DO NOTHING"
)
MARK_WRITTEN = "DELETE FROM beads.vector_coverage WHERE session_id = %s AND embedder_id <> %s"


def write_fact_vectors(
    conn: psycopg.Connection[DictRow], embedder_id: int, rows: Sequence[tuple[uuid.UUID, Sequence[float]]]
) -> None:
    if rows:
        with conn.cursor() as cur:
            cur.executemany(INSERT_FACT_VECTOR, [(embedder_id, as_vector(vec), fid) for fid, vec in rows])


def write_passage_vectors(
    conn: psycopg.Connection[DictRow], embedder_id: int, rows: Sequence[tuple[uuid.UUID, Sequence[float]]]
) -> None:
    if rows:
        with conn.cursor() as cur:
            cur.executemany(INSERT_PASSAGE_VECTOR, [(embedder_id, pid, as_vector(vec)) for pid, vec in rows])


def mark_written(conn: psycopg.Connection[DictRow], session_id: str, embedder_id: int) -> None:
    """After a write embedded with `embedder_id`, other spaces no longer cover the session."""
    conn.execute(MARK_WRITTEN, (session_id, embedder_id))


_MISSING_FACTS = """
SELECT f.id, f.body FROM beads.facts f
 WHERE f.session_id = %(session)s
   AND NOT EXISTS (SELECT 1 FROM beads.fact_vectors v WHERE v.fact_id = f.id AND v.embedder_id = %(eid)s)
 LIMIT %(batch)s
"""
_MISSING_PASSAGES = """
SELECT p.id, p.body FROM beads.passages p
 WHERE p.session_id = %(session)s
   AND NOT EXISTS (SELECT 1 FROM beads.passage_vectors v WHERE v.passage_id = p.id AND v.embedder_id = %(eid)s)
 LIMIT %(batch)s
"""
# the vectors, in this space, of the claims a passage was cut into (not the parts of a replaced claim
# kept later, memory.graph.supersession, which share its passage): what its own vector is made of
_CLAIMS_OF_PASSAGES = """
SELECT f.passage_id, f.body, v.embedding::float4[] AS embedding
  FROM beads.facts f
  JOIN beads.fact_vectors v ON v.fact_id = f.id AND v.embedder_id = %(eid)s
 WHERE f.passage_id = ANY(%(passages)s::uuid[]) AND NOT f.metadata ? 'kept_from'
 ORDER BY f.passage_id, f.span_start, f.id
"""


def ensure_coverage(
    conn: psycopg.Connection[DictRow], session_id: str, embedder: Embedder, embedder_id: int, batch: int = 256
) -> int:
    """Embed every fact and passage of the session that lacks a vector in this space; returns how many."""
    covered = conn.execute(
        "SELECT 1 FROM beads.vector_coverage WHERE session_id = %s AND embedder_id = %s",
        (session_id, embedder_id),
    ).fetchone()
    if covered:
        return 0
    done = 0
    params = {"session": session_id, "eid": embedder_id, "batch": batch}
    while rows := conn.execute(_MISSING_FACTS, params).fetchall():
        vectors = embedder.embed([r["body"] for r in rows])
        write_fact_vectors(conn, embedder_id, [(r["id"], v) for r, v in zip(rows, vectors, strict=True)])
        done += len(rows)
    # a passage's vector is its claims' mean, as capture writes it; one whose claims are all gone is
    # embedded itself
    while rows := conn.execute(_MISSING_PASSAGES, params).fetchall():
        claims: dict[uuid.UUID, tuple[list[str], list[Sequence[float]]]] = {}
        for c in conn.execute(_CLAIMS_OF_PASSAGES, {"eid": embedder_id, "passages": [r["id"] for r in rows]}):
            texts, vecs = claims.setdefault(c["passage_id"], ([], []))
            texts.append(c["body"])
            vecs.append(c["embedding"])
        alone = [r for r in rows if r["id"] not in claims]
        embedded = embedder.embed([r["body"] for r in alone]) if alone else []
        write_passage_vectors(
            conn,
            embedder_id,
            [(pid, mean_of_parts(texts, vecs)) for pid, (texts, vecs) in claims.items()]
            + [(r["id"], v) for r, v in zip(alone, embedded, strict=True)],
        )
        done += len(rows)
    conn.execute(
        "INSERT INTO beads.vector_coverage (session_id, embedder_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (session_id, embedder_id),
    )
    return done


_INDEX_PENDING = """
UPDATE beads.{table} v SET indexed = true
  FROM (SELECT embedder_id, {key} FROM beads.{table} WHERE NOT indexed
         LIMIT %s FOR UPDATE SKIP LOCKED) pending
 WHERE v.embedder_id = pending.embedder_id AND v.{key} = pending.{key}
"""


def index_pending(conn: psycopg.Connection[DictRow], batch: int = 128) -> int:
    """Move up to `batch` vectors per table written since the last call into the HNSW index (the
    UPDATE makes a claim's row match the index's predicate; a passage's is marked alike, though no
    index reads it since migration 0013); returns how many. Short transactions, and
    SKIP LOCKED, so two indexers, or an indexer and a forget, never wait on each other."""
    moved = 0
    for table, key in (("fact_vectors", "fact_id"), ("passage_vectors", "passage_id")):
        with conn.transaction():
            statement = sql.SQL(_INDEX_PENDING).format(table=sql.Identifier(table), key=sql.Identifier(key))
            moved += conn.execute(statement, (batch,)).rowcount
    return moved


def pending_count(conn: psycopg.Connection[DictRow]) -> int:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM beads.fact_vectors WHERE NOT indexed) "
        "+ (SELECT count(*) FROM beads.passage_vectors WHERE NOT indexed) AS n"
    ).fetchone()
    assert row is not None  # a query of aggregates always returns its one row
    return int(row["n"])
