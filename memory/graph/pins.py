"""Pinned facts: standing rules and profile facts that go into every prompt, whatever the query.

A pin is a row naming the version that was pinned. Reads resolve it to the head of its supersedes
chain, so correcting a pinned fact keeps the correction pinned: the pin is edited in place by
supersession. Untrusted content (tool results, web pages) can never be pinned, and a chain whose
current version came from such content is left out of the prompt even if an earlier version was
pinned.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import DictRow

from memory.errors import BeadsMemoryError, FactNotFoundError, UntrustedWriteError
from memory.graph.facts import get_fact
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Source, Status, fact_columns
from memory.rules.standing import is_standing_instruction

_H = fact_columns("h")


@dataclass(frozen=True, slots=True)
class PinnedFact:
    """A pinned claim as it reads now: its current version, and when and by whom it was pinned."""

    fact: Fact  # the head of the pinned chain (the current version)
    pinned_id: uuid.UUID  # the version the pin was placed on (differs from fact.id once superseded)
    pinned_by: str
    pinned_at: datetime

    @property
    def edited(self) -> bool:
        """The pinned version has since been superseded; the pin now shows its successor."""
        return self.pinned_id != self.fact.id

    @property
    def excluded_because(self) -> str | None:
        """Why this pin does not enter the prompt, or None when it does."""
        if self.fact.source in UNTRUSTED_SOURCES:
            return f"its current version came from {self.fact.source.value}"
        if self.fact.status is Status.ARCHIVED:
            return "its current version is archived"
        return None


def refuse_unpinnable(fact: Fact) -> None:
    """Raise unless `fact` may be pinned: never untrusted content, never a retired fact."""
    if fact.source in UNTRUSTED_SOURCES:
        raise UntrustedWriteError(f"content from {fact.source.value} cannot be pinned ({fact.short_id})")
    if fact.status is Status.ARCHIVED:
        raise BeadsMemoryError(f"fact {fact.short_id} is archived and cannot be pinned")


# every pin of the session whose chain head is visible to the reader, one row per chain (the earliest
# pin wins, so re-pinning a corrected fact does not move it down the list)
_PINNED = f"""
SELECT DISTINCT ON (h.id) {_H}, p.fact_id AS pinned_id, p.pinned_by, p.pinned_at
  FROM beads.pins p
  JOIN beads.facts f ON f.id = p.fact_id
  JOIN beads.facts h ON h.id = f.head_id
 WHERE p.session_id = %(session)s
   AND (%(lineage)s::uuid[] IS NULL OR h.namespace_id = ANY(%(lineage)s::uuid[]))
 ORDER BY h.id, p.pinned_at, p.fact_id
"""


def pinned_facts(
    conn: psycopg.Connection[DictRow], session_id: str, lineage: tuple[uuid.UUID, ...] | None = None
) -> list[PinnedFact]:
    """The session's pinned claims, oldest pin first; with `lineage`, only those a namespace with that
    lineage may read (its own and its ancestors': a sub-agent inherits its supervisor's standing rules)."""
    rows = conn.execute(
        _PINNED, {"session": session_id, "lineage": None if lineage is None else list(lineage)}
    ).fetchall()
    pins = [PinnedFact(Fact.from_row(r), r["pinned_id"], r["pinned_by"], r["pinned_at"]) for r in rows]
    return sorted(pins, key=lambda p: (p.pinned_at, p.pinned_id))


def _chain_pins(conn: psycopg.Connection[DictRow], head_id: uuid.UUID, session_id: str) -> list[uuid.UUID]:
    rows = conn.execute(
        "SELECT p.fact_id FROM beads.pins p"
        " JOIN beads.facts f ON f.id = p.fact_id AND f.session_id = p.session_id"
        " WHERE f.head_id = %s AND p.session_id = %s",
        (head_id, session_id),
    ).fetchall()
    return [r["fact_id"] for r in rows]


def pin(conn: psycopg.Connection[DictRow], fact_id: uuid.UUID, pinned_by: str) -> Fact:
    """Pin the claim `fact_id` belongs to (its current version); returns that version.

    Pinning an already pinned claim is a no-op, so a replayed tool call pins once.
    """
    with conn.transaction():
        fact = get_fact(conn, fact_id)
        head = fact if fact.head_id == fact.id else get_fact(conn, fact.head_id)
        refuse_unpinnable(head)
        # serialise pins of one chain: two concurrent pins of the same claim write one row
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('beads.pin:' || %s::text))", (head.id,))
        if not _chain_pins(conn, head.id, head.session_id):
            conn.execute(
                "INSERT INTO beads.pins (fact_id, session_id, pinned_by) VALUES (%s, %s, %s) "
                "ON CONFLICT (fact_id) DO NOTHING",
                (head.id, head.session_id, pinned_by),
            )
    return head


# Who pins a standing instruction when the user says it (pinned_by), as "user" names the inspector
CAPTURE = "capture"

# Capture's pins: each new standing instruction, pinned as of when it was said (so an import, which
# writes a day's messages in one transaction, orders them as capture did), unless a pin of the session
# already shows the same words: a user who says a rule again would see it listed twice.
_PIN_SAID = """
INSERT INTO beads.pins (fact_id, session_id, pinned_by, pinned_at)
SELECT DISTINCT ON (lower(f.body)) f.id, f.session_id, %(by)s, f.valid_from
  FROM beads.facts f
 WHERE f.id = ANY(%(ids)s)
   AND NOT EXISTS (SELECT FROM beads.pins p
                     JOIN beads.facts pf ON pf.id = p.fact_id
                     JOIN beads.facts h ON h.id = pf.head_id
                    WHERE p.session_id = f.session_id AND lower(h.body) = lower(f.body))
 ORDER BY lower(f.body), f.valid_from, f.id
ON CONFLICT (fact_id) DO NOTHING
"""


def pinned_when_said(fact: Fact) -> bool:
    """Whether capture pins `fact` as it is written: a standing instruction the user stated
    (memory.rules.standing), which no search could be trusted to find on the turns it applies to."""
    return (
        fact.source is Source.PASSIVE_CAPTURE
        and fact.kind is Kind.USER_INPUT
        and is_standing_instruction(fact.body)
    )


def pin_said(conn: psycopg.Connection[DictRow], facts: Sequence[Fact]) -> None:
    """Pin the standing instructions among `facts`, just written (`pinned_when_said`), in the caller's
    transaction."""
    if ids := [f.id for f in facts if pinned_when_said(f)]:
        conn.execute(_PIN_SAID, {"ids": ids, "by": CAPTURE})


def unpin(conn: psycopg.Connection[DictRow], fact_id: uuid.UUID) -> int:
    """Unpin the claim `fact_id` belongs to, whichever version the pin was placed on; returns the
    number of pins removed (0 when it was not pinned)."""
    with conn.transaction():
        row = conn.execute("SELECT head_id, session_id FROM beads.facts WHERE id = %s", (fact_id,)).fetchone()
        if row is None:
            raise FactNotFoundError(f"no fact {fact_id}")
        pins = _chain_pins(conn, row["head_id"], row["session_id"])
        if pins:
            conn.execute(
                "DELETE FROM beads.pins WHERE fact_id = ANY(%s) AND session_id = %s",
                (pins, row["session_id"]),
            )
    return len(pins)
