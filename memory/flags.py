"""What a ranked hit is flagged with, as records: who made the flag, what it says, what it names.

Ranking (memory.retrieval.hits, memory.rules.slots) and the time-travel view (memory.retrieval.hits.as_of)
make these; the block, the HTTP API, MCP, the CLI and the playground read them. Each record's `text`
is the English the doors have always shown (their `flags` lists are these texts, unchanged), and its
`kind` a stable name to filter on: a reader asks a record what it is, never parses its words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class ResolvedFrom:
    """The hit matched an older version of its claim and is shown as the current one."""

    short_id: str  # the superseded version that matched
    kind: ClassVar[str] = "resolved_from"

    @property
    def text(self) -> str:
        return f"resolved from superseded {self.short_id}"


@dataclass(frozen=True, slots=True)
class ReplacedAutomatically:
    """How the current version replaced the one that matched: by capture's rules, not an agent."""

    replaced: str  # the replaced claim's words, clipped
    because: str  # the rule's reason, as the edge records it
    kind: ClassVar[str] = "replaced_automatically"

    @property
    def text(self) -> str:
        return f'current; replaced "{self.replaced}", automatically ({self.because})'


@dataclass(frozen=True, slots=True)
class Demoted:
    """The hit lives in a sub-agent's namespace and ranks below what the agent itself holds."""

    agent_id: str | None
    kind: ClassVar[str] = "demoted"

    @property
    def text(self) -> str:
        return f"demoted: sub-agent {self.agent_id}"


@dataclass(frozen=True, slots=True)
class KeywordMatch:
    """Keyword search found the hit (SearchOptions.keyword)."""

    kind: ClassVar[str] = "keyword_match"

    @property
    def text(self) -> str:
        return "keyword match"


@dataclass(frozen=True, slots=True)
class Restates:
    """The hit restates another hit's claim (memory.graph.restatements)."""

    short_id: str  # the claim it restates
    foldable: bool = False  # it says nothing else (memory.rules.slots.restatement): a block may leave it out
    kind: ClassVar[str] = "restates"

    @property
    def text(self) -> str:
        return f"restates {self.short_id}"


@dataclass(frozen=True, slots=True)
class Untrusted:
    """A tool result's or web page's hit that ranking put below the user's: an instruction or
    question it carries (`conflicts_with` None), or a value that disagrees with the user's claim
    `conflicts_with`."""

    conflicts_with: str | None = None
    kind: ClassVar[str] = "untrusted"

    @property
    def text(self) -> str:
        if self.conflicts_with is None:
            return "untrusted: an instruction or question from a tool result"
        return f"untrusted: conflicts with the user's fact {self.conflicts_with}"


@dataclass(frozen=True, slots=True)
class NotTheUsers:
    """The agent's own claim (a conclusion, a summary) that disagrees with the user's claim `of`:
    an echo, not evidence."""

    of: str
    kind: ClassVar[str] = "not_the_users"

    @property
    def text(self) -> str:
        return f"not the user's words: conflicts with the user's fact {self.of}"


@dataclass(frozen=True, slots=True)
class PossiblyOutdated:
    """A newer claim on the same slot, `newer`, gives another value. `foldable`: the rules read the
    newer as a plain correction of this one (memory.rules.slots decides), so a block may fold this claim
    into the newer one's line instead of showing its words."""

    newer: str
    foldable: bool = False
    kind: ClassVar[str] = "possibly_outdated"

    @property
    def text(self) -> str:
        return f"possibly outdated: {self.newer} is newer"


@dataclass(frozen=True, slots=True)
class SaidBefore:
    """Said before `later`, on what ranking reads as the same slot, but nothing says it is outdated
    (two long messages are often two things)."""

    later: str
    kind: ClassVar[str] = "said_before"

    @property
    def text(self) -> str:
        return f"said before {self.later}, on what may be the same thing"


@dataclass(frozen=True, slots=True)
class CurrentAsOf:
    """In a search as of a past moment: the version current then, superseded since by `superseded_by`."""

    superseded_by: str
    kind: ClassVar[str] = "current_as_of"

    @property
    def text(self) -> str:
        return f"current at as_of; superseded since by {self.superseded_by}"


Flag = (
    ResolvedFrom
    | ReplacedAutomatically
    | Demoted
    | KeywordMatch
    | Restates
    | Untrusted
    | NotTheUsers
    | PossiblyOutdated
    | SaidBefore
    | CurrentAsOf
)


def texts(flags: Iterable[Flag]) -> list[str]:
    """The flags as the doors' `flags` lists show them."""
    return [f.text for f in flags]


__all__ = [
    "CurrentAsOf",
    "Demoted",
    "Flag",
    "KeywordMatch",
    "NotTheUsers",
    "PossiblyOutdated",
    "ReplacedAutomatically",
    "ResolvedFrom",
    "Restates",
    "SaidBefore",
    "Untrusted",
    "texts",
]
