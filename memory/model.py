"""The vocabulary of the fact graph: kinds, statuses, sources, relations, and the records we return."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from memory.flags import Flag


class Kind(StrEnum):
    USER_INPUT = "user_input"  # a claim the user stated
    DIRECTIVE = "directive"  # a question, instruction or goal: stored, held out of retrieval
    CONCLUSION = "conclusion"  # the agent concluded it
    SUMMARY = "summary"  # a sub-agent's rollup into its parent, or a compaction


class Status(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"  # replaced; a hit on it resolves to the head of its chain
    ARCHIVED = "archived"  # compacted: out of retrieval, kept for audit


class Source(StrEnum):
    PASSIVE_CAPTURE = "passive_capture"
    REMEMBER_TOOL = "remember_tool"
    TOOL_RESULT = "tool_result"
    CONCLUDE_TASK = "conclude_task"
    FALLBACK_CONCLUDE = "fallback_conclude"
    COMPACTION = "compaction"
    DELEGATION = "delegation"  # the task a delegating agent gave a sub-agent: the agent's words


# Content that did not come from the user or the agent's own reasoning: it may never write a directive
# nor retire a user's fact.
UNTRUSTED_SOURCES = frozenset({Source.TOOL_RESULT})


class Relation(StrEnum):
    SUPERSEDES = "supersedes"
    ROLLUP_OF = "rollup_of"
    CONTRADICTS = "contradicts"
    RELATES_TO = "relates_to"
    DERIVED_FROM = "derived_from"
    RESTATES = "restates"  # says again what a user's claim said: retired with it (memory.graph.restatements)
    MAY_SUPERSEDE = "may_supersede"  # a replacement a rule proposes for a person to accept or dismiss


@dataclass(frozen=True, slots=True)
class Namespace:
    id: uuid.UUID
    session_id: str
    parent_id: uuid.UUID | None
    lineage: tuple[uuid.UUID, ...]  # root .. self
    path: tuple[str, ...]
    agent_id: str

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Namespace:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            parent_id=row["parent_id"],
            lineage=tuple(row["lineage"]),
            path=tuple(row["path"]),
            agent_id=row["agent_id"],
        )


# the columns of beads.facts a Fact is read from (Fact.from_row), for the statements that read facts
FACT_COLUMNS = (
    "id, session_id, namespace_id, kind, status, source, source_key, agent_id, acting_on_behalf_of, body, "
    "passage_id, thread_id, message_id, span_start, span_end, head_id, valid_from, valid_to, recorded_at, metadata"
)


def fact_columns(alias: str) -> str:
    """FACT_COLUMNS qualified by a table alias, for queries that join facts to other tables."""
    return ", ".join(f"{alias}.{c.strip()}" for c in FACT_COLUMNS.split(","))


@dataclass(frozen=True, slots=True)
class Fact:
    id: uuid.UUID
    session_id: str
    namespace_id: uuid.UUID
    kind: Kind
    status: Status
    source: Source
    agent_id: str
    body: str
    head_id: uuid.UUID
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    acting_on_behalf_of: str | None = None
    thread_id: str | None = None
    message_id: str | None = None
    span: tuple[int, int] | None = None
    passage_id: uuid.UUID | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def short_id(self) -> str:
        """What agents use to refer to a fact: the first 8 hex digits of its id."""
        return self.id.hex[:8]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Fact:
        span = None if row.get("span_start") is None else (row["span_start"], row["span_end"])
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            namespace_id=row["namespace_id"],
            kind=Kind(row["kind"]),
            status=Status(row["status"]),
            source=Source(row["source"]),
            agent_id=row["agent_id"],
            body=row["body"],
            head_id=row["head_id"],
            valid_from=row["valid_from"],
            valid_to=row["valid_to"],
            recorded_at=row["recorded_at"],
            acting_on_behalf_of=row.get("acting_on_behalf_of"),
            thread_id=row.get("thread_id"),
            message_id=row.get("message_id"),
            span=span,
            passage_id=row.get("passage_id"),
            metadata=row.get("metadata") or {},
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked fact of a search, with why it ranks where it does."""

    fact: Fact
    score: float  # what hits are ordered by, higher first: blended similarity after penalties, or with
    # keyword search (SearchOptions.keyword) its reciprocal rank fusion with the keyword ranks
    distance: float  # 1 - blended cosine similarity, before penalties
    claim_similarity: float
    passage_similarity: float | None
    demoted: bool  # lives in a descendant namespace (a sub-agent's): rank penalty applied
    resolved_from: Fact | None  # the superseded fact that matched, when the hit was resolved to its head
    flags: tuple[Flag, ...] = ()  # memory.flags: what ranking found about it, as records

    @property
    def why(self) -> str:
        return ", ".join(f.text for f in self.flags) if self.flags else "direct match"


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: tuple[Hit, ...]
    query: str
    not_in_memory: bool  # nothing cleared the relevance floor: say so instead of returning noise
    best_score: float | None
    dropped: tuple[tuple[str, str], ...] = ()  # (short id, reason) for candidates left out

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


@dataclass(frozen=True, slots=True)
class AutoSupersession:
    """One edge capture wrote by itself: `new` replaced `old` (as it was retired), for `reason`; or,
    `proposed`, a replacement a rule below the precision capture may act on alone only proposes, for a
    person to accept or dismiss (`old` stays current until then). `kept`: the parts of `old` that
    `new` does not address, written as facts of their own (memory.rules.corrections.parts)."""

    new: Fact
    old: Fact
    reason: str
    proposed: bool = False
    kept: tuple[Fact, ...] = ()


@dataclass(frozen=True, slots=True)
class CaptureResult:
    facts: tuple[Fact, ...]  # every fact the input maps to, new or already stored
    written: int  # how many rows this call inserted (0 on a replay)
    # what the new facts replaced automatically (memory.graph.supersession), if anything
    superseded: tuple[AutoSupersession, ...] = ()
    # what they may replace, by rules that only propose (accepted or dismissed by a person)
    proposed: tuple[AutoSupersession, ...] = ()
    # the message's length when capture kept only its first part (FactStore.max_message_chars)
    clipped_from: int | None = None
    # what capture changed to store the text at all (memory.rules.clean_text), e.g. a NUL removed
    cleaned: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedFact:
    """A fact as a listing shows it: the fact, and whether its claim is pinned (on any version)."""

    fact: Fact
    pinned: bool


@dataclass(frozen=True, slots=True)
class FactPage:
    """One page of a session's facts, newest first; `next_cursor` fetches the next (None: the last)."""

    facts: tuple[ListedFact, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Deleted:
    """What deleting one fact did: the fact as it was, the version of its claim that is current now
    (None when the claim had no other version), and the versions the delete made current again."""

    fact: Fact
    current: Fact | None
    restored: tuple[Fact, ...] = ()
