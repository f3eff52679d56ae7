"""One model call's memory: the window plan, the retrieved tier filled to its budget, the assembly.

`plan_call` is what `BeadsMemoryMiddleware` decides before each model call, written once so that the
evaluation's `beads` arm runs the very same code (bench.eval.assembled.BeadsArm): the caller costs
the raw messages (`MessageSlot`s) and says which of them have ids, and gets back which messages the
model sees, which facts go in (already rendered by memory.context.block, in the order they are read:
`newest_first`, or rank's with memory.rules.slots.later_first) and the assembly's account of why.
It reads the store (pins, search, passages) and writes nothing: recording what was injected, and
evict-mode capture, stay with the middleware.

`plan_query` is the same decision for a question asked with no conversation in the window, with the
middleware's default budgets and tier: the block every door returns for a search (the HTTP API, MCP's
`search`, the isolation benchmark), so that what a door shows is byte for byte what the model reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from memory.context.agent_replies import asks_about_replies, is_reply
from memory.context.assembler import (
    Assembly,
    Budgets,
    InjectionMode,
    Item,
    MessageSlot,
    WindowFit,
    WindowPlan,
    assemble,
    lend_to_window,
    plan_window,
    retrieved_fit,
)
from memory.context.block import (
    NOTHING,
    RetrievedTier,
    TierSettings,
    fill_retrieved,
    pinned_line,
    render_pinned,
)
from memory.context.block import header as block_header
from memory.context.block import pinned_header as pinned_block_header
from memory.context.tokens import count_cached
from memory.graph.pins import CAPTURE, PinnedFact
from memory.graph.store import FactStore
from memory.model import Hit, Namespace, SearchResult
from memory.retrieval import SearchOptions
from memory.rules.corrections import asks_about_earlier
from memory.rules.slots import later_first


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What one model call gets from memory, and why."""

    query: str
    plan: WindowPlan  # the view before the context limit, the gate, this call's tier budgets
    assembly: Assembly  # the final decision: kept, dropped and cleared, per tier
    tier: RetrievedTier | None  # the ranked candidates and their lines (None: no search ran)
    result: SearchResult | None  # the search as injected: its hits are the facts that went in
    pins: tuple[PinnedFact, ...]  # every pin the namespace sees
    injected_pins: tuple[PinnedFact, ...]
    retrieved_lines: tuple[tuple[Hit, str, int], ...]  # what went in: hit, line, tokens
    pinned_lines: tuple[tuple[PinnedFact, str, int], ...]
    retrieved_block: str  # memory.context.block's rendering of the retrieved tier ('' when nothing went in)
    pinned_block: str

    @property
    def block(self) -> str:
        """Both fact tiers as the system prompt carries them."""
        return "\n\n".join(part for part in (self.retrieved_block, self.pinned_block) if part)


def plan_call(
    store: FactStore,
    namespace: Namespace,
    *,
    history: Sequence[MessageSlot],
    message_ids: Sequence[str | None],
    query: str,
    fixed_tokens: int,
    budgets: Budgets,
    injection: InjectionMode,
    options: SearchOptions,
    tier: TierSettings,
    before_search: Callable[[WindowFit], None] | None = None,
    now: datetime | None = None,
    as_of: datetime | None = None,
) -> CallPlan:
    """Decide one call (see the module docstring). `message_ids[i]` is history[i]'s message id: facts
    carved from a message the view shows verbatim are not retrieved. `before_search` sees the view
    first (evict-mode capture stores what leaves it, so that this very search can find it). `now`:
    what the block's "today" is (the clock when not given). `as_of`: search the memory as it stood
    then (FactStore.search)."""
    now = now or datetime.now(UTC)
    if len(message_ids) != len(history):
        raise ValueError("one message id (or None) per history slot")
    pins = tuple(store.pinned(namespace.session_id, namespace))
    # a pin is left out as a search leaves its fact out: said in a message the call may not read (the
    # harness's turns after the question), or pinned after the moment `as_of` reads memory at
    readable = [
        p
        for p in pins
        if p.excluded_because is None
        and p.fact.message_id not in options.exclude_message_ids
        and (as_of is None or p.pinned_at <= as_of)
    ]
    [pinned_header, retrieved_header, nothing] = count_cached(
        [pinned_block_header(tier.style), block_header(tier.style), NOTHING]
    )

    def planned(chosen: Sequence[PinnedFact]) -> tuple[WindowPlan, list[str], list[int], list[Item]]:
        texts = [pinned_line(p.fact, tier.style) for p in chosen]
        counts = count_cached(texts)
        items = [Item(p.fact.short_id, n) for p, n in zip(chosen, counts, strict=True)]
        window = plan_window(
            history,
            budgets,
            injection,
            pinned=items,
            pinned_header_tokens=pinned_header,
            fixed_tokens=fixed_tokens,
        )
        return window, texts, counts, items

    usable = readable
    said = [p for p in readable if p.pinned_by == CAPTURE]
    if said:
        # capture's standing rules are shown as many as the retrieved budget earns, nearest the query
        placed = [p for p in readable if p.pinned_by != CAPTURE]
        room = planned(placed)[0].retrieved
        nearest = nearest_rules(store, said, query, max(1, (room or 0) // STANDING_RULE_TOKENS))
        usable = [p for p in readable if p.pinned_by != CAPTURE or p in nearest]
    plan, pin_texts, pin_counts, pinned_items = planned(usable)
    fit = plan.window
    if before_search is not None:
        before_search(fit)
    verbatim = set(fit.kept) - fit.cleared
    view_ids = frozenset(mid for i, mid in enumerate(message_ids) if i in verbatim and mid is not None)

    filled: RetrievedTier | None = None
    if query and plan.gate.inject:
        searched = replace(
            options,
            exclude_message_ids=options.exclude_message_ids | view_ids,
            # a pinned fact is already in the prompt: never spend a retrieved slot on it too
            exclude_fact_ids=options.exclude_fact_ids | {p.fact.id for p in usable},
        )
        budget = plan.retrieved

        def search(k: int | None) -> SearchResult:
            return store.search(
                namespace, query, searched if k is None else replace(searched, k=k), as_of=as_of
            )

        filled = fill_retrieved(
            search,
            store.standing_passages,
            budget,
            lambda tokens: retrieved_fit(tokens, retrieved_header, budget),
            tier,
            now,
        )

    if filled is not None:
        # what the tier leaves of its budget widens the window; facts whose message it now shows go
        wider = lend_to_window(plan, history, retrieved_fit(filled.tokens, retrieved_header, plan.retrieved))
        if wider is not plan:
            plan, fit = wider, wider.window
            verbatim = set(fit.kept) - fit.cleared
            shown = {mid for i, mid in enumerate(message_ids) if i in verbatim and mid is not None} - view_ids
            filled = filled.without_messages(
                shown, "its message is in the window the tier's unused budget widened"
            )

    result = None if filled is None else filled.result
    if result is not None and result.not_in_memory:
        retrieved_items = [Item("not in memory", nothing)]
        header = 0  # the one line is the whole section
    else:
        hits = () if result is None or filled is None else result.hits
        tokens = () if filled is None else filled.tokens
        retrieved_items = [Item(h.fact.short_id, n, h.score) for h, n in zip(hits, tokens, strict=True)]
        header = retrieved_header
    assembly = assemble(
        pinned=pinned_items,
        retrieved=retrieved_items,
        history=history,
        window=fit,
        budgets=plan.budgets,
        fixed_tokens=fixed_tokens,
        pinned_header_tokens=pinned_header,
        retrieved_header_tokens=header,
        gate=plan.gate,
    )

    kept_retrieved = set(assembly.retrieved)
    kept_pinned = set(assembly.pinned)
    injected_pins = tuple(p for p in usable if p.fact.short_id in kept_pinned)
    pinned_lines = tuple(
        (p, text, n)
        for p, text, n in zip(usable, pin_texts, pin_counts, strict=True)
        if p.fact.short_id in kept_pinned
    )
    retrieved_lines: tuple[tuple[Hit, str, int], ...] = ()
    if result is not None and filled is not None and not result.not_in_memory:
        kept_lines = {
            h.fact.id: (h, text, n)
            for h, text, n in zip(result.hits, filled.lines, filled.tokens, strict=True)
            if h.fact.short_id in kept_retrieved
        }
        # the lines the budget kept, in the order they are read; which lines, rank decided. Newest
        # first already puts a change said later above its old value, so later_first's pairwise
        # reading of the lines (2 ms a block at BEAM 500K, 10 at the p95) runs for rank order only
        kept = [h for h, _, _ in kept_lines.values()]
        if tier.read_order == "newest":
            in_order = newest_first(kept, query, tier.replies_last)
        else:
            in_order = later_first(kept, query, filled.shown())
        retrieved_lines = tuple(kept_lines[h.fact.id] for h in in_order)
        # the lines the budget left out are in the assembly's account, with the reason
        result = replace(result, hits=tuple(h for h, _, _ in retrieved_lines))
    # the lines exactly as the tier rendered and counted them
    retrieved_block = ""
    if result is not None and result.not_in_memory and kept_retrieved:
        retrieved_block = NOTHING
    elif retrieved_lines:
        retrieved_block = "\n".join([block_header(tier.style), *(line for _, line, _ in retrieved_lines)])
    return CallPlan(
        query=query,
        plan=plan,
        assembly=assembly,
        tier=filled,
        result=result,
        pins=pins,
        injected_pins=injected_pins,
        retrieved_lines=retrieved_lines,
        pinned_lines=pinned_lines,
        retrieved_block=retrieved_block,
        pinned_block=render_pinned([p.fact for p in injected_pins], tier.style),
    )


def newest_first(hits: Sequence[Hit], query: str, replies_last: bool = True) -> list[Hit]:
    """The block's lines (`hits`, in rank's order) as they are read with `TierSettings.read_order`
    "newest": by when each was said, the latest first; lines said at the same moment keep their
    order. The agent's replies stay after the user's words (`replies_last`, unless the question asks
    for them), and a question about how things were keeps rank's order: there the earlier value is
    the answer, and rank put the line worded like the question first."""
    if asks_about_earlier(query):
        return list(hits)
    after = replies_last and not asks_about_replies(query)
    return sorted(hits, key=lambda h: (after and is_reply(h), -h.fact.valid_from.timestamp()))


# Capture pins a user's standing rules (memory.rules.standing), and a long session gathers many, each
# for the turns about its subject. All of them in every prompt took a sixth of a 1,200-token block on
# BEAM 500K's tune chats (ten rules, about 190 tokens), and the retrieved lines they pushed out cost
# 28 of 179 questions their evidence turn's readable excerpt. A call shows one rule for every
# STANDING_RULE_TOKENS of its retrieved budget (at least one), those nearest its query: among its
# chat's rules, the rule a tune question needed was the nearest or the second nearest in 15 of 20
# (500K), 11 of 12 (100K) and 4 of 4 (1M). Pins a person placed all go in, as before.
STANDING_RULE_TOKENS = 400


def nearest_rules(store: FactStore, rules: Sequence[PinnedFact], query: str, n: int) -> list[PinnedFact]:
    """The `n` of `rules` nearest `query` by their stored claim vectors, in pin order; the first `n`
    without a query."""
    if len(rules) <= n:
        return list(rules)
    if not query.strip():
        return list(rules[:n])
    chosen = set(store.nearest([p.fact.id for p in rules], query, n))
    return [p for p in rules if p.fact.id in chosen]


def plan_query(
    store: FactStore,
    namespace: Namespace,
    query: str,
    *,
    budgets: Budgets | None = None,
    tier: TierSettings | None = None,
    options: SearchOptions | None = None,
    as_of: datetime | None = None,
    now: datetime | None = None,
) -> CallPlan:
    """`plan_call` for `query` asked with nothing of the conversation in the window, with
    `BeadsMemoryMiddleware`'s defaults (its budgets: `Budgets()`, whose retrieved tier does not depend
    on the context or the window; `TierSettings()`; the store's search options): its `block` is what
    the middleware would inject for the question, and what a door returns for it. `as_of`: the memory
    as it stood then (FactStore.search)."""
    return plan_call(
        store,
        namespace,
        history=(),
        message_ids=(),
        query=query,
        fixed_tokens=0,
        budgets=budgets or Budgets(),
        injection="always",
        options=options or store.search_options,
        tier=tier or TierSettings(),
        now=now,
        as_of=as_of,
    )
