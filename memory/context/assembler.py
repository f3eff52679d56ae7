"""Budgeted context assembly: which pinned facts, retrieved facts and raw messages reach the model.

Pure: inputs are token counts per item, outputs are decisions with reasons. No database, no model, no
tokenizer (callers count with `memory.context.tokens`), so the middleware and the evaluation run the very same
code, and every decision can be tested in isolation.

Three tiers, each with its own token budget:
  pinned     standing rules and profile facts, in pin order; a prefix that fits the pinned budget
  retrieved  ranked facts for this request, best first, each that still fits the retrieved budget
             (a long line that does not fit leaves its room to shorter ones ranked below it)
  window     the raw messages of the thread. With a message budget (`window_tokens=None`) it is the
             last `recent_messages` messages, never starting on an orphaned tool result (the
             behaviour the middleware always had). With a token budget, the whole history is shown
             verbatim while it fits; when it does not, tool results older than the recent messages are
             replaced by a placeholder first, then the oldest messages go.

When the model's context is known, the window's share of it is what the fixed prompt, the reply's
reserve and the two fact tiers leave (`plan_window`), so the tiers share the context rather than
compete for it. With `retrieved_share` the retrieved tier gets that share of it, and what either side
cannot use goes to the other: a history shorter than the window's room leaves the rest to the tier
(`plan_window`), a tier that stops short of its budget leaves the rest to the window
(`lend_to_window`). Should the three together still exceed it (a long system prompt, a newest message
larger than its share), material goes in this order, lowest value first:
  1. old tool output in the view (never the results of the latest round of calls) becomes a placeholder;
  2. retrieved facts, lowest-ranked first;
  3. window messages, oldest first (a tool result never outlives its call; the newest message stays);
  4. pinned facts, most recently pinned first.
Pinned facts go last because the user asked for them in every prompt; the window before them because
a fact the user pinned is, by their own account, worth more than an old turn.

The injection gate (`should_inject`) decides whether the retrieved tier is filled at all: `gated`
injects only when the raw history does not fit the window (compared in tokens), since memory stops
paying once the transcript fits and then only costs tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Tier = Literal["pinned", "retrieved", "window"]
InjectionMode = Literal["always", "gated", "never"]
Role = Literal["human", "ai", "tool", "system", "other"]
INJECTION_MODES: tuple[InjectionMode, ...] = ("always", "gated", "never")


# -- the gate -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateDecision:
    mode: InjectionMode
    inject: bool
    reason: str
    history_tokens: int
    window_tokens: int

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "inject": self.inject,
            "reason": self.reason,
            "history_tokens": self.history_tokens,
            "window_tokens": self.window_tokens,
        }


def should_inject(history_tokens: int, window_tokens: int, mode: InjectionMode) -> GateDecision:
    """Whether retrieved facts are injected for this call, and why (pinned facts always are).

    `history_tokens` is the whole raw history of the thread; `window_tokens` what the window can hold
    (its token budget, or with a message budget the tokens of the messages it kept).
    """
    if mode not in INJECTION_MODES:
        raise ValueError(f"injection mode must be one of {INJECTION_MODES}, not {mode!r}")
    if mode == "never":
        inject, reason = False, "injection is off (mode never)"
    elif mode == "always":
        inject, reason = True, "injection is always on (mode always)"
    elif history_tokens > window_tokens:
        inject = True
        reason = f"history ({history_tokens} tokens) does not fit the window ({window_tokens} tokens)"
    else:
        inject = False
        reason = (
            f"history ({history_tokens} tokens) fits the window ({window_tokens} tokens): nothing to recall"
        )
    return GateDecision(mode, inject, reason, history_tokens, window_tokens)


# -- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """One fact line of the pinned or retrieved tier, in its tier's priority order."""

    key: str  # what the report calls it (a short fact id)
    tokens: int
    score: float | None = None


@dataclass(frozen=True, slots=True)
class MessageSlot:
    """One raw message of the thread, as the assembler sees it."""

    role: Role
    tokens: int
    cleared_tokens: int = 0  # what its placeholder costs (tool results only)
    name: str = ""  # the tool's name, for the report

    def label(self, index: int) -> str:
        what = f"tool {self.name}" if self.role == "tool" and self.name else self.role
        return f"message {index + 1} ({what})"


@dataclass(frozen=True, slots=True)
class Budgets:
    pinned: int | None = 400
    retrieved: int | None = 1200
    window: int | None = None  # tokens; None: the window is `recent_messages` messages
    recent_messages: int = 10
    context: int | None = None  # the model's context in tokens; None: unbounded
    reserve: int = 512  # kept free for the reply when `context` is set
    # replace old tool output by a placeholder before dropping anything (off: the evaluation's baseline)
    clear_tool_output: bool = True
    # with `context` set: the retrieved tier's share of what the context leaves once the reply's
    # reserve, the fixed prompt and the pinned tier are set aside, plus whatever of the rest the window
    # cannot use; `retrieved` is then ignored (None: `retrieved` tokens whatever the context)
    retrieved_share: float | None = None

    def __post_init__(self) -> None:
        if self.recent_messages < 1:
            raise ValueError("recent_messages must be at least 1")
        if self.retrieved_share is not None and not 0 <= self.retrieved_share <= 1:
            raise ValueError("retrieved_share must be between 0 and 1")
        for name in ("pinned", "retrieved", "window", "context"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"the {name} budget cannot be negative")
        if self.reserve < 0:
            raise ValueError("reserve cannot be negative")


# -- outputs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drop:
    tier: Tier
    key: str
    tokens: int
    reason: str
    # dropped because the model's context was full, not because its tier's budget was: the tiers
    # together asked for more than the context holds
    context_full: bool = False

    def describe(self) -> dict[str, Any]:
        return {"tier": self.tier, "item": self.key, "tokens": self.tokens, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Clearing:
    index: int
    key: str
    tokens_before: int
    tokens_after: int
    reason: str

    def describe(self) -> dict[str, Any]:
        return {
            "item": self.key,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class WindowFit:
    """The raw-message view before the context limit is applied."""

    kept: tuple[int, ...]  # history indexes in the view, oldest first
    cleared: frozenset[int]  # of those, the tool results shown as a placeholder
    dropped: tuple[Drop, ...]
    clearings: tuple[Clearing, ...]
    history_tokens: int
    capacity: int  # what the window holds, in tokens (what the gate compares the history with)


@dataclass(frozen=True, slots=True)
class TierReport:
    tier: Tier
    budget: int | None
    tokens: int
    kept: int
    dropped: int

    def describe(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "budget": self.budget,
            "tokens": self.tokens,
            "kept": self.kept,
            "dropped": self.dropped,
        }


@dataclass(frozen=True, slots=True)
class Assembly:
    pinned: tuple[str, ...]  # keys kept, in order
    retrieved: tuple[str, ...]
    window: tuple[int, ...]  # history indexes in the model's view, oldest first
    cleared: frozenset[int]  # of those, the tool results shown as a placeholder
    dropped: tuple[Drop, ...]
    clearings: tuple[Clearing, ...]
    tiers: tuple[TierReport, ...]
    fixed_tokens: int  # the system prompt the caller brought (not ours to drop)
    total_tokens: int
    context: int | None
    reserve: int
    overflow: int  # tokens still over the context after everything droppable went (0 normally)
    gate: GateDecision | None = None
    notes: tuple[str, ...] = field(default=())

    def tier(self, name: Tier) -> TierReport:
        return next(t for t in self.tiers if t.tier == name)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready account: tokens per tier, what was kept, dropped or cleared, and why."""
        return {
            "context": self.context,
            "reserve": self.reserve,
            "fixed_tokens": self.fixed_tokens,
            "total_tokens": self.total_tokens,
            "overflow": self.overflow,
            "tiers": [t.describe() for t in self.tiers],
            "kept": {
                "pinned": list(self.pinned),
                "retrieved": list(self.retrieved),
                "window": [i + 1 for i in self.window],  # 1-based, as the labels say
            },
            "dropped": [d.describe() for d in self.dropped],
            "cleared": [c.describe() for c in self.clearings],
            "gate": None if self.gate is None else self.gate.describe(),
            "notes": list(self.notes),
        }


# -- the window -----------------------------------------------------------------------------------


def cleared_text(tool: str, tokens: int) -> str:
    """What a cleared tool result shows in its place (the harness renders the same words)."""
    return f"[{tool} output cleared from this view to save context ({tokens} tokens)]"


def _cost(slot: MessageSlot, cleared: bool) -> int:
    return slot.cleared_tokens if cleared else slot.tokens


def fit_window(
    history: Sequence[MessageSlot],
    recent_messages: int = 10,
    window_tokens: int | None = None,
    clear_tool_output: bool = True,
) -> WindowFit:
    """Which raw messages the model sees, within the window's budget (see the module docstring)."""
    n = len(history)
    total = sum(s.tokens for s in history)
    if n == 0:
        return WindowFit((), frozenset(), (), (), 0, window_tokens or 0)
    recent_start = max(0, n - recent_messages)
    if window_tokens is None:
        start = recent_start
        while start < n and history[start].role == "tool":
            start += 1
        kept = tuple(range(start, n))
        dropped = tuple(
            Drop(
                "window",
                history[i].label(i),
                history[i].tokens,
                "its tool call is older than the window"
                if i >= recent_start
                else f"older than the window of {recent_messages} messages",
            )
            for i in range(start)
        )
        return WindowFit(kept, frozenset(), dropped, (), total, sum(history[i].tokens for i in kept))

    if total <= window_tokens:  # the whole history fits: nothing to clear, nothing to drop
        return WindowFit(tuple(range(n)), frozenset(), (), (), total, window_tokens)

    # tool output older than the recent messages is the first thing to go: a placeholder keeps the
    # call/result pairing valid for the provider at a few tokens
    clear = {i for i in range(recent_start) if history[i].role == "tool"} if clear_tool_output else set()
    used, start = 0, n
    for i in range(n - 1, -1, -1):
        cost = _cost(history[i], i in clear)
        if used + cost > window_tokens and i < n - 1:  # the newest message always stays
            break
        used += cost
        start = i
    cut = start
    while cut < n and history[cut].role == "tool":  # a result whose call did not fit goes with it
        cut += 1
    if cut == n:  # only tool results fitted: keep the call they answer, over budget, not an empty view
        cut = start
        while cut > 0 and history[cut].role == "tool":
            cut -= 1
    kept = tuple(range(cut, n))
    drops = []
    for i in range(cut):
        reason = (
            "its tool call did not fit the window"
            if i >= start
            else f"over the window budget of {window_tokens} tokens, oldest first"
        )
        drops.append(Drop("window", history[i].label(i), _cost(history[i], i in clear), reason))
    cleared = frozenset(i for i in kept if i in clear)
    clearings = tuple(
        Clearing(
            i,
            history[i].label(i),
            history[i].tokens,
            history[i].cleared_tokens,
            f"tool output older than the last {recent_messages} messages",
        )
        for i in sorted(cleared)
    )
    return WindowFit(kept, cleared, tuple(drops), clearings, total, window_tokens)


# -- the tiers ------------------------------------------------------------------------------------


def _fit(
    items: Sequence[Item], header: int, budget: int | None, tier: Tier, label: str, *, skip: bool = False
) -> tuple[list[Item], list[Drop]]:
    """`items` in priority order, kept while they fit (header included). Without `skip`, the longest
    prefix that fits; with it, a long item that does not fit is skipped and leaves its room to the
    shorter ones ranked after it."""
    kept: list[Item] = []
    drops: list[Drop] = []
    used = header
    for rank, item in enumerate(items, 1):
        if (drops and not skip) or (budget is not None and used + item.tokens > budget):
            drops.append(
                Drop(
                    tier,
                    label.format(rank=rank, key=item.key),
                    item.tokens,
                    f"over the {tier} budget of {budget} tokens",
                )
            )
            continue
        kept.append(item)
        used += item.tokens
    return kept, drops


def _fit_prefix(
    items: Sequence[Item], header: int, budget: int | None, tier: Tier, label: str
) -> tuple[list[Item], list[Drop]]:
    """The longest prefix of `items` (in priority order) whose tokens, header included, fit."""
    return _fit(items, header, budget, tier, label)


def _fit_ranked(
    items: Sequence[Item], header: int, budget: int | None, tier: Tier, label: str
) -> tuple[list[Item], list[Drop]]:
    """`items` in rank order, each kept if it still fits (header included) and skipped if not."""
    return _fit(items, header, budget, tier, label, skip=True)


def retrieved_fit(tokens: Sequence[int], header: int, budget: int | None) -> int:
    """What retrieved lines of these token counts (rank order) cost once fitted to `budget`."""
    kept, _ = _fit_ranked([Item(str(i), n) for i, n in enumerate(tokens)], header, budget, "retrieved", "")
    return _tier_tokens(kept, header)


def _tier_tokens(items: Sequence[Item], header: int) -> int:
    return header + sum(i.tokens for i in items) if items else 0


PINNED_LABEL = "pinned #{rank} [{key}]"
RETRIEVED_LABEL = "retrieved #{rank} [{key}]"


# -- the plan: the window's share of the context, and the gate -----------------------------------


@dataclass(frozen=True, slots=True)
class WindowPlan:
    window: WindowFit
    gate: GateDecision
    budget: int | None  # the window's token budget (None: the last `recent_messages` messages)
    # the budgets for `assemble`: `retrieved` is this call's retrieved tier (its share resolved)
    budgets: Budgets = field(default_factory=Budgets)

    @property
    def retrieved(self) -> int | None:
        return self.budgets.retrieved


def pinned_tokens(pinned: Sequence[Item], header: int, budget: int | None) -> int:
    """What the pinned tier costs once fitted to its budget."""
    kept, _ = _fit_prefix(pinned, header, budget, "pinned", PINNED_LABEL)
    return _tier_tokens(kept, header)


def plan_window(
    history: Sequence[MessageSlot],
    budgets: Budgets,
    mode: InjectionMode,
    *,
    pinned: Sequence[Item] = (),
    pinned_header_tokens: int = 0,
    fixed_tokens: int = 0,
) -> WindowPlan:
    """The raw-message view and the gate's decision, before retrieval (which must know the view).

    Without the model's context the window is as configured (`window` tokens, or the last
    `recent_messages` messages). With it, the window gets what the context leaves once the reply's
    reserve, the fixed prompt, the pinned tier as fitted and, when the gate injects, the retrieved
    tier's budget are set aside (and no more than `window`, when that is set too). The tiers then
    share the context instead of competing for it: the evaluation (`assembled` arm) showed that a
    window given the whole context pushed out every retrieved fact, although at 1,200 tokens a ranked
    fact finds the evidence several times as often as an old turn does.
    """
    resolved = replace(budgets, retrieved_share=None)
    if budgets.context is None:
        fit = fit_window(history, budgets.recent_messages, budgets.window, budgets.clear_tool_output)
        gate = should_inject(fit.history_tokens, fit.capacity, mode)
        return WindowPlan(fit, gate, budgets.window, resolved)
    left = budgets.context - budgets.reserve - fixed_tokens
    left -= pinned_tokens(pinned, pinned_header_tokens, budgets.pinned)

    def capped(room: int) -> int:
        return max(0, room if budgets.window is None else min(room, budgets.window))

    gate = should_inject(sum(s.tokens for s in history), capped(left), mode)
    retrieved = budgets.retrieved
    if gate.inject and budgets.retrieved_share is not None:
        retrieved = int(max(0, left) * budgets.retrieved_share)
    if gate.inject and retrieved is not None:
        left -= retrieved
    room = capped(left)
    fit = fit_window(history, budgets.recent_messages, room, budgets.clear_tool_output)
    if gate.inject and budgets.retrieved_share is not None:
        # what the window cannot use (a short history, or turns too long to fit whole) goes to the
        # retrieved tier rather than unused: a ranked fact is worth more than an empty token. The
        # window's budget becomes what it uses, so that the two still sum to what they had: a tier
        # that then stops short lends its rest back (`lend_to_window`) without lending these tokens
        # twice, which widened the window past the context and cost the tier its lines
        used = sum(_cost(history[i], i in fit.cleared) for i in fit.kept)
        if left > used:
            retrieved = (retrieved or 0) + left - used
            room = min(room, used)
    return WindowPlan(fit, gate, room, replace(resolved, retrieved=retrieved))


def lend_to_window(plan: WindowPlan, history: Sequence[MessageSlot], retrieved_used: int) -> WindowPlan:
    """The plan once the retrieved tier is filled: what it left of its budget (it stopped at the
    relevance floor, or ran out of facts) widens the window, when the context is known and the wider
    window shows more. The retrieved budget becomes what the tier used, so the two still sum to what
    they had."""
    budgets = plan.budgets
    spare = (budgets.retrieved or 0) - retrieved_used
    if budgets.context is None or plan.budget is None or budgets.retrieved is None or spare <= 0:
        return plan
    room = plan.budget + spare
    if budgets.window is not None:
        room = min(room, budgets.window)
    wider = fit_window(history, budgets.recent_messages, room, budgets.clear_tool_output)
    if wider.kept == plan.window.kept and wider.cleared == plan.window.cleared:
        return plan
    return WindowPlan(wider, plan.gate, room, replace(budgets, retrieved=retrieved_used))


def assemble(
    *,
    pinned: Sequence[Item],
    retrieved: Sequence[Item],
    history: Sequence[MessageSlot],
    window: WindowFit,
    budgets: Budgets,
    fixed_tokens: int = 0,
    pinned_header_tokens: int = 0,
    retrieved_header_tokens: int = 0,
    gate: GateDecision | None = None,
) -> Assembly:
    """Apply each tier's budget, then the model's context, lowest-value material first.

    `window` is `fit_window(history, ...)`; `retrieved` is what the gate let through (empty when it
    said no), ranked best first; `pinned` in pin order.
    """
    kept_pinned, drops = _fit_prefix(pinned, pinned_header_tokens, budgets.pinned, "pinned", PINNED_LABEL)
    kept_retrieved, retrieved_drops = _fit_ranked(
        retrieved, retrieved_header_tokens, budgets.retrieved, "retrieved", RETRIEVED_LABEL
    )
    drops = [*window.dropped, *drops, *retrieved_drops]
    view = list(window.kept)
    cleared = set(window.cleared)
    clearings = list(window.clearings)
    pinned_ranks = {id(item): rank for rank, item in enumerate(pinned, 1)}
    retrieved_ranks = {id(item): rank for rank, item in enumerate(retrieved, 1)}

    def window_tokens() -> int:
        return sum(_cost(history[i], i in cleared) for i in view)

    def total() -> int:
        return (
            fixed_tokens
            + _tier_tokens(kept_pinned, pinned_header_tokens)
            + _tier_tokens(kept_retrieved, retrieved_header_tokens)
            + window_tokens()
        )

    overflow = 0
    if budgets.context is not None:
        limit = budgets.context - budgets.reserve
        full = f"context full ({budgets.context} tokens, {budgets.reserve} reserved for the reply)"
        # 1. old tool output: every tool result in the view except the latest round's
        last_ai = max((i for i in view if history[i].role == "ai"), default=-1)
        old_output = [i for i in view if history[i].role == "tool" and i not in cleared and i < last_ai]
        for i in old_output if budgets.clear_tool_output else []:
            if total() <= limit:
                break
            cleared.add(i)
            clearings.append(
                Clearing(
                    i,
                    history[i].label(i),
                    history[i].tokens,
                    history[i].cleared_tokens,
                    f"{full}: old tool output goes first",
                )
            )
        # 2. retrieved facts, lowest-ranked first
        while kept_retrieved and total() > limit:
            item = kept_retrieved.pop()
            drops.append(
                Drop(
                    "retrieved",
                    RETRIEVED_LABEL.format(rank=retrieved_ranks[id(item)], key=item.key),
                    item.tokens,
                    f"{full}: lowest-ranked first",
                    context_full=True,
                )
            )
        # 3. window messages, oldest first, cutting only where no tool result loses its call
        for first in [i for i in view if history[i].role != "tool"][1:]:
            if total() <= limit:
                break
            pos = view.index(first)
            for i in view[:pos]:
                drops.append(
                    Drop(
                        "window",
                        history[i].label(i),
                        _cost(history[i], i in cleared),
                        f"{full}: oldest first",
                        context_full=True,
                    )
                )
                cleared.discard(i)
            view = view[pos:]
        # 4. pinned facts, the most recently pinned first
        while kept_pinned and total() > limit:
            item = kept_pinned.pop()
            drops.append(
                Drop(
                    "pinned",
                    PINNED_LABEL.format(rank=pinned_ranks[id(item)], key=item.key),
                    item.tokens,
                    f"{full}: pinned facts go last, newest pin first",
                    context_full=True,
                )
            )
        overflow = max(0, total() - limit)

    in_view = set(view)
    clearings = [c for c in clearings if c.index in in_view]
    tiers = (
        TierReport(
            "pinned",
            budgets.pinned,
            _tier_tokens(kept_pinned, pinned_header_tokens),
            len(kept_pinned),
            sum(d.tier == "pinned" for d in drops),
        ),
        TierReport(
            "retrieved",
            budgets.retrieved,
            _tier_tokens(kept_retrieved, retrieved_header_tokens),
            len(kept_retrieved),
            sum(d.tier == "retrieved" for d in drops),
        ),
        TierReport(
            "window", budgets.window, window_tokens(), len(view), sum(d.tier == "window" for d in drops)
        ),
    )
    notes = []
    if overflow:
        notes.append(f"still {overflow} tokens over the context with everything droppable dropped")
    return Assembly(
        pinned=tuple(i.key for i in kept_pinned),
        retrieved=tuple(i.key for i in kept_retrieved),
        window=tuple(view),
        cleared=frozenset(cleared & in_view),
        dropped=tuple(drops),
        clearings=tuple(clearings),
        tiers=tiers,
        fixed_tokens=fixed_tokens,
        total_tokens=total(),
        context=budgets.context,
        reserve=budgets.reserve,
        overflow=overflow,
        gate=gate,
        notes=tuple(notes),
    )
