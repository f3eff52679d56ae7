"""The middleware as arms: `beads` (the middleware itself) and its context assembler's ablations.

`BeadsArm` is `BeadsMemoryMiddleware` with its defaults, deciding through its own `plan_call`: the
headline of the evaluation. The `assembled*` arms below are earlier ablations of the assembler alone.

Where the facts arm packs a fixed share of the budget itself, this arm hands every decision to
`memory.context.assembler`, the code the middleware runs on each model call: the budget is the model's
context (nothing reserved: the harness asks for no reply), the pinned tier gets `pinned_share` of it,
the retrieved tier `facts_share`, and the window the raw turns, whole, with tool output older than the
last `recent_messages` turns cleared to a placeholder when the history does not fit. What the
assembler keeps is what the window shows, counted as every arm's window is.

Pins come from a policy standing in for the user, who pins by hand: `standing_rules` pins every claim
the user stated as a standing rule ("Always ...", "Never ...", "From now on ...") or a preference
("I prefer ...", "I'd rather ..."), in the order they were said. Only claims said before the question
are pinned, as a user could not have pinned anything later.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.eval.arms import FACT_LINE_TOKENS, FACTS_TITLE, MAX_K, WIDEN_BELOW, FactsArm
from bench.eval.conversation import Question, Turn
from bench.eval.tokens import Packer, count_cached
from bench.eval.window import TAIL_TITLE, ConversationView, Window, WindowItem, fact_line, render, said_in
from memory.context.assembler import Assembly, Budgets, Item, MessageSlot, assemble, cleared_text, plan_window
from memory.context.assembler import Role as SlotRole
from memory.context.block import NOTHING, clip, header, shown_as_outdated
from memory.context.block import pinned_header as pinned_block_header
from memory.doors.middleware import RESERVE_TOKENS, BeadsMemoryMiddleware
from memory.model import UNTRUSTED_SOURCES, Fact, Hit, Namespace, SearchResult, Status
from memory.rules.standing import is_standing_instruction

if TYPE_CHECKING:
    from memory.context.recall import CallPlan
    from memory.graph.store import FactStore

PINNED_TITLE = "Pinned by the user (standing rules and preferences, oldest first):"

_PREFERENCE = re.compile(
    r"\bI(?:'d| would)?\s+(?:really\s+|strongly\s+|generally\s+|usually\s+|much\s+)?(?:prefer|rather)\b",
    re.IGNORECASE,
)

PinPolicy = Callable[[Fact, Turn], bool]


def standing_rules(fact: Fact, turn: Turn) -> bool:
    """What a user would pin: their own standing rules and stated preferences."""
    if turn.role != "user" or fact.source in UNTRUSTED_SOURCES:
        return False
    # the rules are the ones capture pins itself (memory.rules.standing): pinning them again is a no-op
    return is_standing_instruction(fact.body) or bool(_PREFERENCE.search(fact.body))


_ROLES: dict[str, SlotRole] = {"user": "human", "assistant": "ai", "tool": "tool"}


def cleared_line(turn: Turn, tokens: int) -> str:
    """A cleared tool result as the window shows it (the middleware's placeholder, in the harness's form)."""
    return render(turn, cleared_text(turn.speaker, tokens))


def history_slots(view: ConversationView) -> list[MessageSlot]:
    """The turns said so far as the assembler sees messages, costed as the window renders them, then
    the question: the newest message, which the middleware always keeps. Every arm asks the question
    outside the window, so it costs nothing here."""
    slots = []
    for turn in view.conversation.turns:
        tokens = view.tokens[turn.id]
        cleared = count_cached([cleared_line(turn, tokens)])[0] if turn.role == "tool" else 0
        slots.append(MessageSlot(_ROLES[turn.role], tokens, cleared, turn.speaker))
    slots.append(MessageSlot("human", 0))
    return slots


def pack_window(
    packer: Packer, view: ConversationView, assembly: Assembly, first_priority: int
) -> list[WindowItem]:
    """The turns the assembly kept, oldest first under the transcript's title (cleared tool output
    as its placeholder); their items in the order a tail chooses them, newest first."""
    turns = view.conversation.turns
    section = packer.section(TAIL_TITLE)
    tail: list[WindowItem] = []
    for i in assembly.window:
        if i == len(turns):
            continue  # the question
        turn = turns[i]
        if i in assembly.cleared:
            line = cleared_line(turn, view.tokens[turn.id])
            packer.add(section, line, count_cached([line])[0])
            continue  # a placeholder shows nothing of the turn
        if packer.add(section, view.lines[turn.id], view.tokens[turn.id]):
            tail.append(WindowItem(turn.id, 0, said=said_in(view.lines[turn.id])))
    return [
        WindowItem(item.turn_id, first_priority + n, said=item.said) for n, item in enumerate(reversed(tail))
    ]


@dataclass(frozen=True, slots=True)
class _Pin:
    fact: Fact
    turn: Turn
    line: str
    tokens: int


class AssembledArm:
    """Facts, pins and turns as `memory.context.assembler` fits them into the budget (see the module docstring)."""

    budgeted = True

    def __init__(
        self,
        facts: FactsArm,
        name: str = "assembled",
        pin_policy: PinPolicy | None = None,
        pinned_share: float = 1 / 6,
        recent_messages: int = 10,
        clear_tool_output: bool = True,
    ) -> None:
        if pin_policy is not None and not 0 < pinned_share + facts.share < 1:
            raise ValueError("the pinned and facts shares must leave room for the window")
        self.facts = facts
        self.name = name
        self.pin_policy = pin_policy
        self.pinned_share = pinned_share if pin_policy is not None else 0.0
        self.recent_messages = recent_messages
        self.clear_tool_output = clear_tool_output
        self._facts: tuple[str, list[Fact]] | None = None

    def _pins_in(self, view: ConversationView) -> list[_Pin]:
        """The claims the policy pins among the turns said so far, in the order they were said."""
        if self.pin_policy is None:
            return []
        cid = view.conversation.id
        if self._facts is None or self._facts[0] != cid:  # one read per conversation
            namespace = self.facts.namespace_for(cid)
            self._facts = (cid, self.facts.store.audit.facts_in_namespace(namespace.id))
        turns = view.conversation.turn_by_id
        order = {tid: i for i, tid in enumerate(turns)}
        facts = [f for f in self._facts[1] if f.status is Status.ACTIVE and f.message_id in turns]
        facts.sort(key=lambda f: (order[f.message_id or ""], f.span or (0, 0)))
        pins = []
        for fact in facts:
            turn = turns[fact.message_id or ""]
            if self.pin_policy(fact, turn):
                line = render(turn, clip(fact.body))
                pins.append(_Pin(fact, turn, line, self._count(line)))
        return pins

    @staticmethod
    def _count(line: str) -> int:
        [tokens] = count_cached([line])
        return tokens

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        if budget is None:
            raise ValueError("the assembled arm needs a budget")
        pins = self._pins_in(view)
        turns = view.conversation.turns
        slots = history_slots(view)
        budgets = Budgets(
            pinned=int(budget * self.pinned_share),
            retrieved=int(budget * self.facts.share),
            window=None,
            recent_messages=self.recent_messages,
            context=budget,
            reserve=0,
            clear_tool_output=self.clear_tool_output,
        )
        pinned_items = [Item(p.fact.short_id, p.tokens) for p in pins]
        pinned_header, retrieved_header, tail_header = (
            self._count(t) for t in (PINNED_TITLE, FACTS_TITLE, TAIL_TITLE)
        )
        plan = plan_window(
            slots,
            budgets,
            "always",
            pinned=pinned_items,
            pinned_header_tokens=pinned_header,
            fixed_tokens=tail_header,  # the window's header: the harness's one fixed text
        )
        fit = plan.window
        shown = frozenset(turns[i].id for i in fit.kept if i < len(turns) and i not in fit.cleared)
        hits, lines = self._retrieved(view, question, budget, shown, {p.fact.id for p in pins})
        retrieved_items = [Item(h.fact.short_id, n, h.score) for h, (_, n) in zip(hits, lines, strict=True)]
        assembly = assemble(
            pinned=pinned_items,
            retrieved=retrieved_items,
            history=slots,
            window=fit,
            budgets=budgets,
            fixed_tokens=tail_header,
            pinned_header_tokens=pinned_header,
            retrieved_header_tokens=retrieved_header,
            gate=plan.gate,
        )

        packer = Packer(budget)
        items: list[WindowItem] = []
        kept_pins = set(assembly.pinned)
        section = packer.section(PINNED_TITLE)
        for pin in pins:
            if pin.fact.short_id in kept_pins and packer.add(section, pin.line, pin.tokens):
                items.append(WindowItem(pin.turn.id, len(items), fact_id=pin.fact.short_id))
        kept_hits = set(assembly.retrieved)
        kept_lines = [
            (hit, line, tokens)
            for hit, (line, tokens) in zip(hits, lines, strict=True)
            if hit.fact.short_id in kept_hits
        ]
        items += pack_hits(packer, FACTS_TITLE, kept_lines, first_priority=len(items))
        items.extend(pack_window(packer, view, assembly, first_priority=len(items)))
        probe = self.facts.memory_probe(view, question)
        return Window(
            self.name, budget, packer.text(), packer.used, tuple(items), probe.not_in_memory, probe.best_score
        )

    def _retrieved(
        self,
        view: ConversationView,
        question: Question,
        budget: int,
        shown: frozenset[str],
        pinned: set[uuid.UUID],
    ) -> tuple[list[Hit], list[tuple[str, int]]]:
        """Ranked facts not already in the window nor pinned, about as many as the tier can hold."""
        namespace = self.facts.namespace_for(view.conversation.id)
        tier = int(budget * self.facts.share)
        k = max(self.facts.options.k, tier // FACT_LINE_TOKENS)
        while True:
            result = self.facts.store.search(
                namespace,
                question.question,
                self.facts.options,
                k=k,
                exclude_message_ids=shown | view.hidden,
                exclude_fact_ids=self.facts.options.exclude_fact_ids | pinned,
            )
            hits = list(result.hits)
            lines = [self._line(view, h) for h in hits]
            used = sum(n for _, n in lines)
            if len(hits) < k or tier - used < WIDEN_BELOW or k >= MAX_K:
                return hits, lines
            k *= 2

    def _line(self, view: ConversationView, hit: Hit) -> tuple[str, int]:
        # clipped as the middleware's block clips a fact (memory.context.block.clip): what the assembler weighs
        line = fact_line(view, hit.fact, clip(hit.fact.body))
        return line, self._count(line)


def pack_hits(
    packer: Packer,
    title: str,
    lines: Iterable[tuple[Hit, str, int]],
    first_priority: int = 0,
) -> list[WindowItem]:
    """The ranked facts' lines (hit, line, tokens) packed under `title` while they fit, as items (an
    older value folded into a line is not shown, so it is no item)."""
    section = packer.section(title)
    items: list[WindowItem] = []
    for hit, line, tokens in lines:
        if packer.add(section, line, tokens):
            priority = first_priority + len(items)
            items.append(
                WindowItem(
                    hit.fact.message_id or "",
                    priority,
                    fact_id=hit.fact.short_id,
                    score=round(hit.score, 4),
                    # the line says so: "(an older line: a later one on this gives a newer value)"
                    marked_outdated=shown_as_outdated(hit),
                    said=said_in(line),
                )
            )
    return items


class BeadsArm:
    """`BeadsMemoryMiddleware` as it runs by default, with the model's context set to the budget.

    Each window is what the middleware's own `plan_call` decides (memory.context.recall) for a model call whose
    history is the conversation so far and whose newest message is the question: the same budgets,
    gate, search options and tier settings, the same rendering of the block (memory.context.block). The
    context is the budget plus the middleware's reply reserve, so that what the model reads (the
    block, pins and turns) is the budget, as for every arm. The only differences are the harness's:
    turns cost what their rendered line costs, and turns said after the question are never retrieved;
    and no memory tool is bound, since the reader can call none (so the block carries no fact ids).
    `options` are keyword arguments for the middleware (the harness's tuning runs), none by default.
    """

    budgeted = True

    def __init__(
        self,
        store: FactStore,
        namespace_for: Callable[[str], Namespace],
        options: Mapping[str, Any] | None = None,
        name: str = "beads",
    ) -> None:
        self.store = store
        self.namespace_for = namespace_for
        self.options = dict(options or {})
        self.name = name
        self._middlewares: dict[tuple[str, int], BeadsMemoryMiddleware] = {}
        self._probe: tuple[tuple[str, str], SearchResult] | None = None

    def middleware(self, conversation_id: str, budget: int) -> BeadsMemoryMiddleware:
        """The middleware a conversation's calls run under, with a context of `budget` + the reserve."""
        key = (conversation_id, budget)
        if key not in self._middlewares:
            if len(self._middlewares) > 16:  # conversations are evaluated one after another
                self._middlewares.clear()
            reserve = self.options.get("reserve_tokens", RESERVE_TOKENS)
            self._middlewares[key] = BeadsMemoryMiddleware(
                self.store,
                self.namespace_for(conversation_id),
                context_tokens=budget + reserve,
                # the harness's reader answers from the window alone, with no tool to call: its block
                # is the one a model without memory tools reads (no fact ids)
                **{"bind_tools": False, **self.options},
            )
        return self._middlewares[key]

    def plan(self, view: ConversationView, question: Question, budget: int) -> CallPlan:
        """The middleware's decision for this question asked now, through its own `plan_call`."""
        middleware = self.middleware(view.conversation.id, budget)
        ids: list[str | None] = [t.id for t in view.conversation.turns]
        [fixed] = count_cached([TAIL_TITLE])  # the window's header: the harness's one fixed text
        return middleware.plan_call(
            history_slots(view), [*ids, None], question.question, fixed, exclude_message_ids=view.hidden
        )

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        if budget is None:
            raise ValueError("the beads arm needs a budget")
        call = self.plan(view, question, budget)
        style = self.middleware(view.conversation.id, budget).tier.style
        packer = Packer(budget)
        items: list[WindowItem] = []
        if call.result is not None and call.result.not_in_memory and call.retrieved_block:
            title, line = NOTHING.split("\n", 1)
            packer.add(packer.section(title), line, count_cached([line])[0])
        else:
            items += pack_hits(packer, header(style), call.retrieved_lines, first_priority=len(items))
        section = packer.section(pinned_block_header(style))
        for pin, line, tokens in call.pinned_lines:
            if packer.add(section, line, tokens):
                items.append(WindowItem(pin.fact.message_id or "", len(items), fact_id=pin.fact.short_id))
        items.extend(pack_window(packer, view, call.assembly, first_priority=len(items)))
        probe = self.memory_probe(view, question)
        pushed = sum(1 for d in call.assembly.dropped if d.tier == "retrieved" and d.context_full)
        return Window(
            self.name,
            budget,
            packer.text(),
            packer.used,
            tuple(items),
            probe.not_in_memory,
            probe.best_score,
            retrieved_pushed_out=pushed,
        )

    def memory_probe(self, view: ConversationView, question: Question) -> SearchResult:
        """The abstention signal, as the facts arm takes it: one search with the store's options and no
        exclusions but the turns not said yet, shared by every budget."""
        key = (view.conversation.id, question.id)
        if self._probe is None or self._probe[0] != key:
            namespace = self.namespace_for(view.conversation.id)
            found = self.store.search(namespace, question.question, exclude_message_ids=view.hidden)
            self._probe = (key, found)
        return self._probe[1]
