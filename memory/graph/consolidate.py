"""Background consolidation: merge near-duplicate facts, expire facts nobody retrieves.

Runs off the hot path (a CLI command, a periodic task), never inside a turn. It computes nothing with a
model: duplicates are found from the claim vectors already stored, so no lock is ever held while a
model runs. Each merge group and each batch of expiries is its own short transaction that re-checks,
under row locks, what the unlocked read saw, so running it while turns write and supersede is safe,
and running it twice does nothing the second time.

Merge. Two facts are the same claim when they live in the same namespace, have the same kind and the
same trust class, are both current and outside every supersede chain, their text has the same
content words in the same order (case, punctuation, articles and present "to be" aside), and their
claim vectors are at least `merge_threshold` cosine-similar. The text rule does the real work: on the
bundled MiniLM, "Use Postgres 16." and "Use Postgres 15." are 0.96 similar, while "...last weekend."
and "...last weekend!" are only 0.947, so no cosine threshold separates a restatement from a changed
value; the cosine check is a conservative guard on top (0.9 by default; the pairs measured are in
tests/test_consolidate_minilm.py). The earliest fact survives with its id (supersede chains, edges
and provenance keep pointing at it); each duplicate is archived with a `derived_from` edge from the
survivor and a note in its metadata saying what it was merged into, when, and why.

Expire. A current fact neither created nor retrieved within `horizon` is archived (not deleted) with a
note saying when and why. Retrieval is recorded by `note_retrieved` (the middleware calls it after it
injects facts), in `beads.retrievals`. Directives are never expired or merged (they are held out of
retrieval, so "never retrieved" says nothing about them), nor are pinned claims (a pin must keep
pointing at a current fact), nor superseded versions (they are history, and a hit on them resolves
to their head).
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from memory.model import UNTRUSTED_SOURCES, Kind, Source

#: Measured on MiniLM: restatements differing in case or punctuation score 0.95-0.99, looser ones
#: ("Budget: $120k!") 0.85, and these are left alone on purpose: a missed merge costs a few tokens, a
#: wrong one loses a claim. The text rule, not this, keeps different values apart (module docstring).
DEFAULT_MERGE_THRESHOLD = 0.90
#: Kinds that are merged and expired. Directives are held out of retrieval (never "used"), and
#: summaries are rollups whose rollup_of edges the inspector shows per sub-agent.
CONSOLIDATED_KINDS = (Kind.USER_INPUT, Kind.CONCLUSION)
#: The metadata key under which consolidation explains what it did to a fact.
NOTE_KEY = "consolidation"
EXPIRE_BATCH = 500

# words whose presence or absence never changes what a claim says
# (present-tense "to be" only: "I was a teacher" and "I am a teacher" are different claims)
_FILLER = frozenset({"a", "an", "the", "is", "are", "am", "be"})
_TOKEN = re.compile(r"[$€£¥%]|\w+(?:['’.,:/-]\w+)*")


def content_words(text: str) -> tuple[str, ...]:
    """The words that carry a claim, in order: case, punctuation, articles and present "to be" dropped.

    Numbers, currency symbols and negations ("don't") are kept, so a changed value is a different key.
    """
    words = _TOKEN.findall(text.casefold().replace("’", "'"))
    kept = tuple(w for w in words if w not in _FILLER)
    return kept or tuple(words)


@dataclass(frozen=True, slots=True)
class Merge:
    survivor: uuid.UUID
    duplicates: tuple[uuid.UUID, ...]
    body: str
    min_similarity: float  # the lowest cosine between the survivor and one of its duplicates


@dataclass(frozen=True, slots=True)
class Expiry:
    fact: uuid.UUID
    body: str
    last_used: datetime  # the later of when it was recorded and when it was last retrieved


@dataclass
class ConsolidationReport:
    session_id: str
    now: datetime
    dry_run: bool
    horizon: timedelta | None
    merges: list[Merge] = field(default_factory=list)
    expired: list[Expiry] = field(default_factory=list)
    skipped_no_vector: int = 0  # candidates without a vector in this embedding space

    @property
    def archived(self) -> int:
        return sum(len(m.duplicates) for m in self.merges) + len(self.expired)


# Current facts of the consolidated kinds that no supersede edge touches, with their claim vectors.
_MERGE_CANDIDATES = """
SELECT f.id, f.namespace_id, f.kind, f.source, f.body, f.valid_from, f.recorded_at, v.embedding
  FROM beads.facts f
  LEFT JOIN beads.fact_vectors v ON v.fact_id = f.id AND v.embedder_id = %(eid)s
 WHERE f.session_id = %(session)s AND f.status = 'active' AND f.head_id = f.id
   AND f.kind = ANY(%(kinds)s)
   AND NOT EXISTS (SELECT 1 FROM beads.edges e
                    WHERE e.relation = 'supersedes' AND (e.src = f.id OR e.dst = f.id))
   -- never a pinned claim: a pin names a version and applies to the head of its chain
   AND NOT EXISTS (SELECT 1 FROM beads.pins p JOIN beads.facts pf ON pf.id = p.fact_id
                    WHERE pf.head_id = f.id)
"""

# What the merge re-checks under the row locks: still current and still outside every chain.
_STILL_MERGEABLE = """
SELECT f.id FROM beads.facts f
 WHERE f.id = ANY(%(ids)s) AND f.status = 'active' AND f.head_id = f.id
   AND NOT EXISTS (SELECT 1 FROM beads.edges e
                    WHERE e.relation = 'supersedes' AND (e.src = f.id OR e.dst = f.id))
 ORDER BY f.id FOR UPDATE
"""

# Unused current facts: neither recorded nor retrieved since the cutoff. The same predicate guards
# the UPDATE, so a fact retrieved or superseded between the read and the write is left alone.
_UNUSED = """
  FROM beads.facts f
  LEFT JOIN beads.retrievals r ON r.fact_id = f.id
 WHERE f.session_id = %(session)s AND f.status = 'active' AND f.head_id = f.id
   AND f.kind = ANY(%(kinds)s)
   AND f.recorded_at < %(cutoff)s
   AND (r.last_retrieved_at IS NULL OR r.last_retrieved_at < %(cutoff)s)
   -- never a pinned claim: a pin names a version and applies to the head of its chain
   AND NOT EXISTS (SELECT 1 FROM beads.pins p JOIN beads.facts pf ON pf.id = p.fact_id
                    WHERE pf.head_id = f.id)
"""


def _trust(source: str) -> bool:
    return Source(source) not in UNTRUSTED_SOURCES


def _as_array(embedding: Any) -> np.ndarray:
    values = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
    vector = np.asarray(values, dtype=np.float64)
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


def find_merges(rows: Sequence[dict[str, Any]], threshold: float) -> tuple[list[Merge], int]:
    """Group candidate rows into merges (pure: no database); returns them and the rows without a vector."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    no_vector = 0
    for row in rows:
        if row["embedding"] is None:
            no_vector += 1
            continue
        key = (row["namespace_id"], row["kind"], _trust(row["source"]), content_words(row["body"]))
        groups[key].append(row)
    merges: list[Merge] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        # the earliest statement survives: stable across runs, and the claim's original provenance
        members.sort(key=lambda r: (r["valid_from"], r["recorded_at"], r["id"].hex))
        survivor, *rest = members
        anchor = _as_array(survivor["embedding"])
        similar = [(r["id"], float(anchor @ _as_array(r["embedding"]))) for r in rest]
        duplicates = [(fid, sim) for fid, sim in similar if sim >= threshold]
        if duplicates:
            merges.append(
                Merge(
                    survivor=survivor["id"],
                    duplicates=tuple(fid for fid, _ in duplicates),
                    body=survivor["body"],
                    min_similarity=min(sim for _, sim in duplicates),
                )
            )
    return merges, no_vector


def _apply_merge(conn: psycopg.Connection[DictRow], merge: Merge, now: datetime) -> Merge | None:
    """Archive the duplicates behind the survivor, if all of them are still mergeable; one transaction."""
    ids = [merge.survivor, *merge.duplicates]
    with conn.transaction():
        locked = {r["id"] for r in conn.execute(_STILL_MERGEABLE, {"ids": ids}).fetchall()}
        if merge.survivor not in locked:
            return None  # superseded or archived since the read: next run decides afresh
        duplicates = tuple(d for d in merge.duplicates if d in locked)
        if not duplicates:
            return None
        for dup in duplicates:
            note = {
                "action": "merged",
                "into": str(merge.survivor),
                "at": now.isoformat(),
                "reason": f"restates {merge.survivor.hex[:8]} (same words, cosine >= {merge.min_similarity:.3f})",
            }
            conn.execute(
                "INSERT INTO beads.edges (src, relation, dst, session_id) "
                "SELECT %s, 'derived_from', id, session_id FROM beads.facts WHERE id = %s "
                "ON CONFLICT DO NOTHING",
                (merge.survivor, dup),
            )
            conn.execute(
                "UPDATE beads.facts SET status = 'archived', valid_to = greatest(valid_from, %s), "
                "metadata = metadata || jsonb_build_object(%s::text, %s::jsonb) WHERE id = %s",
                (now, NOTE_KEY, Jsonb(note), dup),
            )
    return Merge(merge.survivor, duplicates, merge.body, merge.min_similarity)


def _expire(
    conn: psycopg.Connection[DictRow],
    session_id: str,
    cutoff: datetime,
    now: datetime,
    horizon: timedelta,
    dry_run: bool,
) -> list[Expiry]:
    params: dict[str, Any] = {
        "session": session_id,
        "kinds": [k.value for k in CONSOLIDATED_KINDS],
        "cutoff": cutoff,
    }
    query = (
        "SELECT f.id, f.body, greatest(f.recorded_at, r.last_retrieved_at) AS last_used"
        + _UNUSED
        + " ORDER BY f.recorded_at, f.id"
    )
    found = [Expiry(r["id"], r["body"], r["last_used"]) for r in conn.execute(query, params).fetchall()]
    if dry_run:
        return found
    done: list[Expiry] = []
    days = horizon.total_seconds() / 86_400
    for start in range(0, len(found), EXPIRE_BATCH):
        batch = {e.fact: e for e in found[start : start + EXPIRE_BATCH]}
        with conn.transaction():
            rows = conn.execute(
                "UPDATE beads.facts f SET status = 'archived', valid_to = greatest(f.valid_from, %(now)s), "
                "metadata = f.metadata || jsonb_build_object(%(note_key)s::text, jsonb_build_object("
                "'action', 'expired', 'at', %(now_text)s::text, 'reason', "
                "'not retrieved since ' || to_char(greatest(f.recorded_at, r.last_retrieved_at) AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD') || %(horizon_text)s::text)) "
                "FROM (SELECT f.id, r.last_retrieved_at"
                + _UNUSED
                + " AND f.id = ANY(%(ids)s) FOR UPDATE OF f) AS r "
                "WHERE f.id = r.id RETURNING f.id",
                {
                    **params,
                    "ids": list(batch),
                    "now": now,
                    "now_text": now.isoformat(),
                    "horizon_text": f" (horizon {days:g} days)",
                    "note_key": NOTE_KEY,
                },
            ).fetchall()
        done.extend(batch[r["id"]] for r in rows)
    return done


def expire_due(conn: psycopg.Connection[DictRow], now: datetime | None = None) -> int:
    """Archive every current fact whose own expiry time (`expires_at`, a LangGraph store item's TTL)
    has passed, with the same note `consolidate`'s expiry leaves; returns how many.

    Archived, not deleted, like every expiry here: reads leave archived facts out, and the value
    stays for the audit. One statement, so two sweepers running at once archive each fact once."""
    return conn.execute(
        "UPDATE beads.facts SET status = 'archived', valid_to = greatest(valid_from, coalesce(%(now)s, now())), "
        "metadata = metadata || jsonb_build_object(%(note_key)s::text, jsonb_build_object("
        "'action', 'expired', 'at', coalesce(%(now)s, now())::text, "
        "'reason', 'time to live of ' || ttl_minutes::text || ' minutes ran out')) "
        "WHERE expires_at IS NOT NULL AND status = 'active' AND expires_at <= coalesce(%(now)s, now())",
        {"now": now, "note_key": NOTE_KEY},
    ).rowcount


class PooledSpace(Protocol):
    """What consolidation needs of a FactStore: its pool and its embedding space (the store is one;
    naming the two here keeps this module from importing the store that calls it)."""

    @property
    def pool(self) -> ConnectionPool[psycopg.Connection[DictRow]]: ...

    @property
    def embedder_id(self) -> int: ...


def consolidate(
    target: PooledSpace | psycopg.Connection[DictRow],
    session_id: str,
    *,
    embedder_id: int | None = None,
    merge: bool = True,
    merge_threshold: float = DEFAULT_MERGE_THRESHOLD,
    horizon: timedelta | None = None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> ConsolidationReport:
    """Merge near-duplicates (when `merge`) and expire facts unused for `horizon` (when given).

    `target` is a FactStore (its pool and embedding space) or an autocommit connection with dict rows
    (as the library's pools open them) and `embedder_id`. `now` is the consolidation's clock.
    """
    if not 0.0 < merge_threshold <= 1.0:
        raise ValueError("merge_threshold must be in (0, 1]")
    if horizon is not None and horizon <= timedelta(0):
        raise ValueError("horizon must be positive")
    now = now or datetime.now(UTC)
    report = ConsolidationReport(session_id, now, dry_run, horizon)
    if isinstance(target, psycopg.Connection):
        if embedder_id is None and merge:
            raise ValueError("pass embedder_id with a connection: merging compares stored vectors")
        _run(target, report, embedder_id, merge, merge_threshold)
        return report
    eid = embedder_id if embedder_id is not None else target.embedder_id
    with target.pool.connection() as conn:
        _run(conn, report, eid, merge, merge_threshold)
    return report


def _run(
    conn: psycopg.Connection[DictRow],
    report: ConsolidationReport,
    embedder_id: int | None,
    merge: bool,
    threshold: float,
) -> None:
    if merge:
        rows = conn.execute(
            _MERGE_CANDIDATES,
            {
                "session": report.session_id,
                "eid": embedder_id,
                "kinds": [k.value for k in CONSOLIDATED_KINDS],
            },
        ).fetchall()
        merges, report.skipped_no_vector = find_merges(rows, threshold)
        if report.dry_run:
            report.merges = merges
        else:
            applied = (_apply_merge(conn, m, report.now) for m in merges)
            report.merges = [m for m in applied if m is not None]
    if report.horizon is not None:
        cutoff = report.now - report.horizon
        report.expired = _expire(conn, report.session_id, cutoff, report.now, report.horizon, report.dry_run)


def note_retrieved(
    conn: psycopg.Connection[DictRow], ids: Iterable[uuid.UUID], now: datetime | None = None
) -> int:
    """Record that these facts reached a model; returns how many rows were written.

    One statement, rows upserted in id order (two turns noting overlapping facts cannot deadlock);
    ids of facts deleted meanwhile (a forgotten session) are skipped, not an error.
    """
    wanted = sorted(set(ids), key=lambda i: i.hex)
    if not wanted:
        return 0
    return conn.execute(
        """
        INSERT INTO beads.retrievals AS r (fact_id, first_retrieved_at, last_retrieved_at)
        SELECT f.id, coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now())
          FROM beads.facts f WHERE f.id = ANY(%(ids)s) ORDER BY f.id
        ON CONFLICT (fact_id) DO UPDATE
           SET last_retrieved_at = greatest(r.last_retrieved_at, excluded.last_retrieved_at),
               times = r.times + 1
        """,
        {"ids": wanted, "now": now},
    ).rowcount


def retrieval_stats(
    conn: psycopg.Connection[DictRow], session_id: str
) -> dict[uuid.UUID, tuple[datetime, int]]:
    """When each of the session's facts was last retrieved, and how often (facts never retrieved absent)."""
    rows = conn.execute(
        "SELECT r.fact_id, r.last_retrieved_at, r.times FROM beads.retrievals r "
        "JOIN beads.facts f ON f.id = r.fact_id WHERE f.session_id = %s",
        (session_id,),
    ).fetchall()
    return {r["fact_id"]: (r["last_retrieved_at"], r["times"]) for r in rows}


__all__ = [
    "CONSOLIDATED_KINDS",
    "DEFAULT_MERGE_THRESHOLD",
    "NOTE_KEY",
    "ConsolidationReport",
    "Expiry",
    "Merge",
    "PooledSpace",
    "consolidate",
    "content_words",
    "expire_due",
    "find_merges",
    "note_retrieved",
    "retrieval_stats",
]
