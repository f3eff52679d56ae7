"""The memory inspector: what one chat's session holds in each lane.

Our lane: counts by kind, source and status; facts by kind; supersede chains (old values struck
through, the current one last, a link capture wrote by itself marked with its reason); the corrections
capture made automatically, each with an undo button while it stands; the replacements capture only
proposed (accept or dismiss) and the pairs of current claims ranking reads as one slot ("this replaces
that"); the namespace tree of the supervisor and its sub-agents, each with the
rollup it sent up; the pinned facts, with a pin / unpin button per fact. The stock lane: the items
under ("memories", session), which is all it has.
"""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memory.graph.consolidate import NOTE_KEY
from memory.graph.pins import PinnedFact
from memory.graph.reads import supersede_chains
from memory.model import UNTRUSTED_SOURCES, Fact, Kind, Namespace, Source, Status
from memory.rules.slots import may_outdate
from playground.chats import Chat
from playground.comparison.stock import STOCK_NAMESPACE_ROOT

ROLLUP_SOURCES = (Source.CONCLUDE_TASK, Source.FALLBACK_CONCLUDE)
STOCK_ITEM_LIMIT = 200


@dataclass
class NamespaceNode:
    id: uuid.UUID
    name: str
    agent_id: str
    facts: int
    active: int
    rollups: list[Fact] = field(default_factory=list)  # the summaries this sub-agent sent to its parent
    children: list[NamespaceNode] = field(default_factory=list)

    @property
    def short_id(self) -> str:
        return self.id.hex[:8]


@dataclass(frozen=True, slots=True)
class StockItem:
    key: str
    content: str
    created: str


@dataclass(frozen=True, slots=True)
class ConsolidationNote:
    """What background consolidation did to one fact: merged into another, or expired."""

    fact: Fact
    action: str  # "merged" or "expired"
    at: str
    reason: str
    into: Fact | None = None  # the survivor, for a merge


def consolidation_notes(facts: list[Fact]) -> list[ConsolidationNote]:
    by_id = {str(f.id): f for f in facts}
    notes = []
    for fact in facts:
        note = fact.metadata.get(NOTE_KEY)
        if isinstance(note, dict) and note.get("action"):
            at = str(note.get("at", ""))[:16].replace("T", " ")
            into = by_id.get(str(note.get("into", "")))
            notes.append(ConsolidationNote(fact, str(note["action"]), at, str(note.get("reason", "")), into))
    return sorted(notes, key=lambda n: (n.at, n.fact.id.hex), reverse=True)


@dataclass(frozen=True, slots=True)
class AutomaticCorrection:
    """A supersedes edge capture wrote by itself (memory.graph.supersession): `new` replaced `old`."""

    new_id: uuid.UUID
    old_id: uuid.UUID
    new_body: str
    old_body: str
    reason: str
    at: str
    undone_at: str | None  # when a person took it back; the edge stays as history

    @property
    def undone(self) -> bool:
        return self.undone_at is not None

    @property
    def new_short(self) -> str:
        return self.new_id.hex[:8]

    @property
    def old_short(self) -> str:
        return self.old_id.hex[:8]

    @property
    def key(self) -> str:
        """Names the edge in element ids."""
        return f"{self.new_short}-{self.old_short}"


@dataclass(frozen=True, slots=True)
class ProposedCorrection:
    """A replacement a rule of capture only proposes (one of memory.graph.supersession.PROPOSING_RULES), or a pair of
    current claims ranking reads as one slot with no edge between them (it folds the older into the
    newer line): a person says "this replaces that", or dismisses a proposal."""

    new_id: uuid.UUID
    old_id: uuid.UUID
    new_body: str
    old_body: str
    reason: str
    proposed: bool  # a rule's proposal (accept / dismiss); else a pair ranking folds (replaces)

    @property
    def key(self) -> str:
        return f"{self.new_id.hex[:8]}-{self.old_id.hex[:8]}"


#: the most recent user claims read for pairs ranking folds: the pairs grow as their square
FOLDED_PAIR_CLAIMS = 120


def proposed_corrections(proposals: list[dict[str, Any]], facts: list[Fact]) -> list[ProposedCorrection]:
    """Open proposals first, then the current user claims ranking would fold into a newer one."""
    shown = [
        ProposedCorrection(p["src"], p["dst"], p["new_body"], p["old_body"], p["reason"] or "", True)
        for p in proposals
    ]
    taken = {(p.new_id, p.old_id) for p in shown}
    claims = sorted(
        (
            f
            for f in facts
            if f.kind is Kind.USER_INPUT and f.status is Status.ACTIVE and f.source is Source.PASSIVE_CAPTURE
        ),
        key=lambda f: f.valid_from,
    )[-FOLDED_PAIR_CLAIMS:]
    for i, older in enumerate(claims):
        for newer in claims[i + 1 :]:
            if (newer.id, older.id) not in taken and may_outdate(newer.body, older.body):
                shown.append(
                    ProposedCorrection(
                        newer.id, older.id, newer.body, older.body, "ranking reads them as one slot", False
                    )
                )
    return shown


def _minute(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def automatic_corrections(edges: list[dict[str, Any]]) -> list[AutomaticCorrection]:
    """`FactStore.automatic_edges` rows (newest first), as the inspector shows them."""
    return [
        AutomaticCorrection(
            new_id=e["src"],
            old_id=e["dst"],
            new_body=e["new_body"],
            old_body=e["old_body"],
            reason=e["reason"] or "",
            at=_minute(e["created_at"]),
            undone_at=None if e["undone_at"] is None else _minute(e["undone_at"]),
        )
        for e in edges
    ]


@dataclass(frozen=True)
class InspectorView:
    counts: list[tuple[tuple[str, str], dict[str, int]]]
    by_kind: list[tuple[str, list[Fact]]]
    chains: list[list[Fact]]
    tree: list[NamespaceNode]
    stock_items: list[StockItem]
    statuses: tuple[str, ...] = tuple(s.value for s in Status)
    consolidation: list[ConsolidationNote] = field(default_factory=list)
    pinned: list[PinnedFact] = field(default_factory=list)  # current versions, oldest pin first
    chat_id: uuid.UUID | None = None  # where the pin and undo buttons post
    corrections: list[AutomaticCorrection] = field(default_factory=list)  # newest first, undone ones too
    proposed: list[ProposedCorrection] = field(default_factory=list)

    @functools.cached_property
    def standing_corrections(self) -> dict[uuid.UUID, AutomaticCorrection]:
        """The automatic edges not undone, by the fact each replaced (a fact has one successor at most)."""
        return {c.old_id: c for c in self.corrections if not c.undone}

    @functools.cached_property
    def pinned_heads(self) -> set[uuid.UUID]:
        return {p.fact.id for p in self.pinned}

    def pinnable(self, fact: Fact) -> bool:
        """Whether the inspector offers a pin button (the store refuses the rest anyway)."""
        return fact.source not in UNTRUSTED_SOURCES and fact.status is Status.ACTIVE


def count_table(stats: list[dict[str, object]]) -> list[tuple[tuple[str, str], dict[str, int]]]:
    cells: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for row in stats:
        cells[(str(row["kind"]), str(row["source"]))][str(row["status"])] = int(row["facts"])  # type: ignore[call-overload]
    return sorted(cells.items())


def namespace_tree(namespaces: list[Namespace], facts: list[Fact]) -> list[NamespaceNode]:
    held: dict[uuid.UUID, list[Fact]] = defaultdict(list)
    rollups: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        held[fact.namespace_id].append(fact)
        if fact.source in ROLLUP_SOURCES and fact.metadata.get("from_namespace"):
            rollups[str(fact.metadata["from_namespace"])].append(fact)
    nodes: dict[uuid.UUID, NamespaceNode] = {}
    roots: list[NamespaceNode] = []
    for ns in namespaces:  # parents come before their children
        node = NamespaceNode(
            ns.id,
            "root (supervisor)" if ns.is_root else ns.path[-1],
            ns.agent_id,
            len(held[ns.id]),
            sum(f.status is Status.ACTIVE for f in held[ns.id]),
            rollups.get(str(ns.id), []),
        )
        nodes[ns.id] = node
        parent = nodes.get(ns.parent_id) if ns.parent_id else None
        (parent.children if parent else roots).append(node)
    return roots


def facts_by_kind(facts: list[Fact]) -> list[tuple[str, list[Fact]]]:
    order = [k.value for k in Kind]
    grouped: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        grouped[fact.kind.value].append(fact)
    return [(kind, sorted(grouped[kind], key=lambda f: f.source.value)) for kind in order if grouped[kind]]


async def stock_items(store: Any, session_id: str) -> list[StockItem]:
    items = await store.asearch((STOCK_NAMESPACE_ROOT, session_id), limit=STOCK_ITEM_LIMIT)
    return [
        StockItem(
            item.key,
            str((item.value or {}).get("content", item.value)),
            item.created_at.isoformat(sep=" ", timespec="seconds"),
        )
        for item in sorted(items, key=lambda i: i.created_at)
    ]


async def load_inspector(facts_store: Any, stock_store: Any, chat: Chat) -> InspectorView:
    """`facts_store` is the FactStore's async face (`FactStore.aio`)."""
    facts = await facts_store.audit.session_facts(chat.session_id)
    namespaces = await facts_store.session_namespaces(chat.session_id)
    stats = await facts_store.audit.stats(chat.session_id)
    return InspectorView(
        counts=count_table(stats),
        by_kind=facts_by_kind(facts),
        chains=supersede_chains(facts),
        tree=namespace_tree(namespaces, facts),
        stock_items=await stock_items(stock_store, chat.session_id),
        consolidation=consolidation_notes(facts),
        pinned=await facts_store.pinned(chat.session_id),
        chat_id=chat.id,
        corrections=automatic_corrections(await facts_store.review.automatic_edges(chat.session_id)),
        proposed=proposed_corrections(await facts_store.review.proposals(chat.session_id), facts),
    )
