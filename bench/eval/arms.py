"""The arms: ways to spend the same context budget on one conversation, and the window each builds.

Every budgeted arm packs through one `Packer` with one token count (bench.eval.tokens), so no arm can
exceed its budget and none is measured differently. Items are recorded with the order in which the arm
chose them (`priority`, 0 first): rank for retrieval, recency for a transcript tail.

- beads     BeadsMemoryMiddleware itself, by default, with the model's context = the budget
            (bench.eval.assembled.BeadsArm): the headline
- tail      the newest turns, whole, the oldest of them clipped to fill the budget
- docstore  LangGraph's PostgresStore over whole turns (same embedder), best first until full
- bm25      bm25s over whole turns, best first until full
- facts     FactStore.search's ranked facts in about a third of the budget, the tail in the rest
- full      every turn, no budget: the ceiling
- beads_gated  the middleware with `injection="gated"`: no block while the transcript fits
- facts_gated, assembled, assembled_pinned, assembled_noclear: the middleware's gate and context
            assembler over the same budget (bench.eval.assembled)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from bench.eval.conversation import Conversation, Question
from bench.eval.tokens import Packer, count_cached, count_tokens
from bench.eval.window import (
    TAIL_TITLE,
    ConversationView,
    Window,
    WindowItem,
    fact_line,
    fill_tail,
    said_in,
)
from memory.context.assembler import should_inject
from memory.model import Hit, Namespace, SearchResult, Status
from memory.retrieval import SearchOptions

if TYPE_CHECKING:
    import bm25s  # ships no types: BM25 is Any to the checker, named here for the reader
    from langgraph.store.postgres import PostgresStore

    from memory.graph.store import FactStore

ARM_NAMES = (
    "beads",
    "beads_gated",
    "tail",
    "docstore",
    "bm25",
    "facts",
    "facts_gated",
    "assembled",
    "assembled_pinned",
    "assembled_noclear",
    "full",
)
# the default run: the middleware itself (the headline), the baselines and the facts ablations; the
# assembled arms are measured on purpose (bench.eval.assembled)
DEFAULT_ARMS = ("beads", "tail", "docstore", "bm25", "facts", "facts_gated", "full")
TURNS_TITLE = "Conversation turns retrieved from memory (most relevant first):"
FACTS_TITLE = "Facts from memory (most relevant first):"
# Below the library's relevance floor FactStore.search says "not in memory"; the docstore's score is
# the same embedder's cosine similarity, so the same number is the honest analogous floor for it
# (MiniLM's here; the runner passes the embedder's own, memory.graph.thresholds).
RELEVANCE_FLOOR = SearchOptions().relevance_floor
# the facts arm asks for more facts while this much of its block is still free, up to MAX_K
WIDEN_BELOW = 24
# about what one fact line costs: a block of N tokens asks for N // FACT_LINE_TOKENS facts at first
FACT_LINE_TOKENS = 20
MAX_K = 400


class Arm(Protocol):
    name: str
    budgeted: bool

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window: ...


class TailArm:
    name = "tail"
    budgeted = True

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        packer = Packer(budget)
        items = fill_tail(packer, view)
        return Window(self.name, budget, packer.text(), packer.used, tuple(items))


class FullArm:
    name = "full"
    budgeted = False

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        packer = Packer(None)
        items = fill_tail(packer, view)
        return Window(self.name, None, packer.text(), packer.used, tuple(items), all_turns=True)


Ranking = list[tuple[str, float]]  # (turn id, score), best first


class RankedTurnsArm:
    """Whole turns in the order a retriever ranks them, skipping any that no longer fit."""

    name = "ranked"
    budgeted = True

    def __init__(self) -> None:
        self._cache: tuple[tuple[str, str], Ranking, bool] | None = None

    def rank(self, view: ConversationView, question: Question, complete: bool) -> tuple[Ranking, bool]:
        """The ranked turns (all of them when `complete`), and whether that is every turn there is."""
        raise NotImplementedError

    def nothing_relevant(self, ranking: Ranking) -> bool:
        raise NotImplementedError

    def ranking(
        self, view: ConversationView, question: Question, complete: bool = False
    ) -> tuple[Ranking, bool]:
        # one retrieval per question serves every budget: the ranking does not depend on it
        key = (view.conversation.id, question.id)
        if self._cache is None or self._cache[0] != key or (complete and not self._cache[2]):
            ranking, exhaustive = self.rank(view, question, complete)
            self._cache = (key, ranking, exhaustive)
        return self._cache[1], self._cache[2]

    def _pack(
        self, view: ConversationView, ranking: Ranking, budget: int | None
    ) -> tuple[Packer, list[WindowItem]]:
        packer = Packer(budget)
        section = packer.section(TURNS_TITLE)
        items: list[WindowItem] = []
        for turn_id, score in ranking:
            if packer.add(section, view.lines[turn_id], view.tokens[turn_id]):
                said = said_in(view.lines[turn_id])
                items.append(WindowItem(turn_id, len(items), score=round(score, 4), said=said))
        return packer, items

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        ranking, exhaustive = self.ranking(view, question)
        packer, items = self._pack(view, ranking, budget)
        if not exhaustive and (
            packer.remaining is None or packer.remaining >= min(view.tokens.values(), default=0)
        ):
            # the first, shorter ranking ran out before the window was full: rank everything
            ranking, exhaustive = self.ranking(view, question, complete=True)
            packer, items = self._pack(view, ranking, budget)
        best = ranking[0][1] if ranking else None
        return Window(
            self.name, budget, packer.text(), packer.used, tuple(items), self.nothing_relevant(ranking), best
        )


def docstore_namespace(conversation_id: str) -> tuple[str, ...]:
    # LangGraph joins namespace labels with "." and refuses labels that contain one
    return ("eval", conversation_id.replace(".", "_"))


class DocstoreArm(RankedTurnsArm):
    """LangGraph's PostgresStore, one document per turn, searched with the query as given.

    The first search asks for about twice as many turns as the largest budget holds (at the median turn
    length); should the window still have room when they run out, it asks for every turn.
    """

    name = "docstore"

    def __init__(
        self, store: PostgresStore, floor: float = RELEVANCE_FLOOR, budgets: Sequence[int] = ()
    ) -> None:
        super().__init__()
        self.store = store
        self.floor = floor
        self.largest_budget = max(budgets, default=None)

    def rank(self, view: ConversationView, question: Question, complete: bool) -> tuple[Ranking, bool]:
        # the store holds the whole conversation; turns said after the question (view.hidden) are
        # filtered out below, so a complete ranking must reach past them
        turns = len(view.conversation.turns) + len(view.hidden)
        limit = turns
        if not complete and self.largest_budget is not None:
            shown = sorted(view.tokens.values())  # the turns said so far: what the window can hold
            median = shown[len(shown) // 2] if shown else 1
            limit = min(turns, 2 * self.largest_budget // max(1, median) + 10)
        namespace = docstore_namespace(view.conversation.id)
        hits = self.store.search(namespace, query=question.question, limit=max(1, limit))
        # search takes a namespace prefix: keep this conversation's own documents only
        ranking = [
            (h.key, float(h.score or 0.0)) for h in hits if h.namespace == namespace and h.key in view.lines
        ]
        return ranking, limit >= turns or len(hits) < limit

    def nothing_relevant(self, ranking: Ranking) -> bool:
        return not ranking or ranking[0][1] < self.floor


class BM25Arm(RankedTurnsArm):
    """bm25s over whole turns (English stopwords, no stemmer), one index per conversation, in memory.

    Turns sharing no query term score 0 and are not retrieved (a lexical index has nothing to say about
    them). BM25 scores have no absolute scale, so the only floor that needs no tuning on the questions
    is zero: the arm signals "nothing relevant" when no turn shares a term with the question.
    """

    name = "bm25"

    def __init__(self) -> None:
        super().__init__()
        self._indexes: dict[str, tuple[bm25s.BM25, list[str]]] = {}

    def _index(self, view: ConversationView) -> tuple[bm25s.BM25, list[str]]:
        import bm25s

        cid = f"{view.conversation.id}@{len(view.conversation.turns)}"  # a view may stop early
        if cid not in self._indexes:
            self._indexes.clear()  # conversations are evaluated one after another
            ids = [t.id for t in view.conversation.turns]
            corpus = bm25s.tokenize(
                [t.text for t in view.conversation.turns], stopwords="en", show_progress=False
            )
            retriever = bm25s.BM25()
            retriever.index(corpus, show_progress=False)
            self._indexes[cid] = (retriever, ids)
        return self._indexes[cid]

    def rank(self, view: ConversationView, question: Question, complete: bool) -> tuple[Ranking, bool]:
        import bm25s

        retriever, ids = self._index(view)
        [terms] = bm25s.tokenize([question.question], stopwords="en", show_progress=False, return_ids=False)
        vocab = retriever.vocab_dict
        known = [t for t in terms if t in vocab]
        if not known:
            return [], True
        scores = retriever.get_scores(known)
        order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), i))
        return [(ids[i], float(scores[i])) for i in order if scores[i] > 0], True

    def nothing_relevant(self, ranking: Ranking) -> bool:
        return not ranking


class FactsArm:
    """Facts + transcript: FactStore.search's ranked facts in `share` of the budget, the tail in the rest.

    As the middleware does, turns already in the tail are excluded from the search (`exclude_message_ids`),
    so the fact block only spends tokens on what the window would otherwise lack. The library's relevance
    floor and ranking apply as they are.

    Each budget has its own search, excluding its own tail. (One search shared by every budget, filtered
    afterwards, is not the same: keyword fusion ranks by places among the candidates, so which
    candidates are fetched and excluded moves the order.) The search asks for about as many facts as
    the block holds and asks again for twice as many while the block has room.

    The abstention signal is `not_in_memory` of one search with the library's default options and no
    exclusions: with exclusions it would also fire whenever the tail already shows everything relevant,
    which says nothing about whether memory holds the answer.
    """

    name = "facts"
    budgeted = True

    def __init__(
        self,
        store: FactStore,
        namespace_for: Callable[[str], Namespace],
        share: float = 1 / 3,
        options: SearchOptions | None = None,
    ) -> None:
        if not 0 < share < 1:
            raise ValueError("the facts share of the budget must be between 0 and 1")
        self.store = store
        self.namespace_for = namespace_for
        self.share = share
        self.options = options or store.search_options
        self._probe: tuple[tuple[str, str], SearchResult] | None = None

    def memory_probe(self, view: ConversationView, question: Question) -> SearchResult:
        """Does memory hold anything relevant at all (one search per question, shared by every budget)."""
        key = (view.conversation.id, question.id)
        if self._probe is None or self._probe[0] != key:
            namespace = self.namespace_for(view.conversation.id)
            # only turns said by the time of asking (view.hidden: said later)
            probe = self.store.search(
                namespace, question.question, self.options, exclude_message_ids=view.hidden
            )
            self._probe = (key, probe)
        return self._probe[1]

    def _visible(self, view: ConversationView, budget: int) -> frozenset[str]:
        """The turns the tail shows whole at `budget` (what the window already holds)."""
        provisional = Packer(budget - int(budget * self.share))
        return frozenset(item.turn_id for item in fill_tail(provisional, view, clip=False))

    def _search(
        self, view: ConversationView, question: Question, k: int, visible: frozenset[str]
    ) -> SearchResult:
        namespace = self.namespace_for(view.conversation.id)
        return self.store.search(
            namespace, question.question, self.options, k=k, exclude_message_ids=visible | view.hidden
        )

    def _hits(
        self, view: ConversationView, question: Question, budget: int, k: int
    ) -> tuple[list[Hit], bool]:
        """The ranked facts not already in `budget`'s tail, and whether more may rank beyond them."""
        hits = self._search(view, question, k, self._visible(view, budget)).hits
        return list(hits), len(hits) >= k

    def _pack_facts(
        self, hits: Sequence[Hit], view: ConversationView, facts_budget: int
    ) -> tuple[Packer, list[WindowItem]]:
        packer = Packer(facts_budget)
        section = packer.section(FACTS_TITLE)
        items: list[WindowItem] = []
        lines = [fact_line(view, hit.fact) for hit in hits]
        for hit, line, tokens in zip(hits, lines, count_cached(lines), strict=True):
            fact = hit.fact
            if packer.add(section, line, tokens):
                items.append(
                    WindowItem(
                        fact.message_id or "",
                        len(items),
                        fact_id=fact.short_id,
                        score=round(hit.score, 4),
                        marked_outdated=fact.status is not Status.ACTIVE,
                    )
                )
        return packer, items

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        if budget is None:
            raise ValueError("the facts arm needs a budget")
        facts_budget = int(budget * self.share)
        # a fact line costs ~20-40 tokens: ask for about what the block holds (candidates follow k, as
        # the library sizes them) and widen only when every hit fitted with room left
        k = max(self.options.k, int(budget * self.share) // FACT_LINE_TOKENS)
        while True:
            hits, more = self._hits(view, question, budget, k)
            packer, items = self._pack_facts(hits, view, facts_budget)
            if not more or (packer.remaining or 0) < WIDEN_BELOW or k >= MAX_K:
                break
            k *= 2
        packer.budget = budget  # the tail takes everything the facts left
        items.extend(fill_tail(packer, view, first_priority=len(items)))
        probe = self.memory_probe(view, question)
        return Window(
            self.name, budget, packer.text(), packer.used, tuple(items), probe.not_in_memory, probe.best_score
        )


class GatedFactsArm:
    """The facts arm behind the middleware's pressure gate (memory.context.assembler.should_inject, mode
    "gated"): while the whole transcript fits the budget it is the transcript and nothing else; once it
    does not, it is the facts arm. The same function decides for the middleware, so what is measured
    here is what the library does."""

    name = "facts_gated"
    budgeted = True

    def __init__(self, facts: FactsArm) -> None:
        self.facts = facts

    def window(self, view: ConversationView, question: Question, budget: int | None) -> Window:
        if budget is None:
            raise ValueError("the gated facts arm needs a budget")
        gate = should_inject(view.history_tokens + count_tokens(TAIL_TITLE), budget, "gated")
        if gate.inject:
            inner = self.facts.window(view, question, budget)
            return replace(inner, arm=self.name)
        packer = Packer(budget)
        items = fill_tail(packer, view)
        return Window(self.name, budget, packer.text(), packer.used, tuple(items))


def aware(stamp: datetime) -> datetime:
    """A dataset's time as timezone-aware (undated zones read as UTC)."""
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def conversation_end_of(conversation: Conversation) -> datetime | None:
    """The time of the conversation's last dated turn (timezone-aware), or None when no turn has one."""
    stamps = [aware(t.timestamp) for t in conversation.turns if t.timestamp is not None]
    return max(stamps, default=None)


def budgets_for(arm: Arm, budgets: Sequence[int]) -> list[int | None]:
    """The budgets an arm runs at: every one, or only "no budget" for the full-context ceiling."""
    return list(budgets) if arm.budgeted else [None]
