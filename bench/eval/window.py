"""What an arm puts in front of the model: the window, its items, and the transcript tail every arm shares.

Turns are rendered the same way everywhere (and facts like the turn they were carved from), so arms
differ only in what they choose, never in how it is shown or counted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from datetime import datetime

from bench.eval.conversation import Conversation, Question, Turn
from bench.eval.tokens import Packer, clip_to_last, count_many, count_tokens
from memory.model import Fact

TAIL_TITLE = "Conversation so far (oldest first):"


@dataclass(frozen=True, slots=True)
class WindowItem:
    turn_id: str
    priority: int  # the order in which the arm chose it: 0 first
    fact_id: str | None = None  # short id of the fact, for items that are facts
    score: float | None = None  # the retriever's score, for ranked items
    clipped: bool = False  # only the end of the turn fitted
    marked_outdated: bool = False  # the window labels it superseded (never happens for active heads)
    said: str | None = None  # when the window says it was said ("07 Feb 2024 00:03", "7 Feb 2024")


@dataclass(frozen=True, slots=True)
class Window:
    arm: str
    budget: int | None
    text: str
    tokens: int
    items: tuple[WindowItem, ...]
    nothing_relevant: bool | None = None  # the arm's "memory holds nothing relevant"; None: no such signal
    best_score: float | None = None
    all_turns: bool = False  # full context: every turn of the conversation
    # the middleware's arms: its ranked facts that fitted their tier but not the context (the tiers
    # together asked for more than it holds); None: no such tier
    retrieved_pushed_out: int | None = None


# what a line shows of when it was said: a turn's "[07 Feb 2024 00:03] user: ...", a fact's
# "- [3f2a9c1e] (7 Feb 2024 00:03) ..." (memory.context.block.hit_line)
_SAID = re.compile(r"^(?:\[([^\]]*)\]|- (?:\[[0-9a-f]+\] )?\(([^)]*)\))")


def said_in(line: str) -> str | None:
    """When `line` says it was said, as the window shows it; None for a line that does not."""
    found = _SAID.match(line)
    return None if found is None else found.group(1) or found.group(2)


_CLOCK = re.compile(r"\s*\b\d{1,2}:\d{2}(?::\d{2})?\b")


def without_clock(text: str) -> str:
    """`text` with the time of day its lines' stamps say taken out ("[07 Feb 2024 00:03] user: ..."
    reads "[07 Feb 2024] user: ..."): the stamp's digits are when a line was said, not what it says,
    and the loaders' times of day are made up (a session's turns seconds apart), so a reference's
    "15" or "42" must not be found in them."""
    lines = []
    for line in text.splitlines():
        found = _SAID.match(line)
        if found is not None:
            line = _CLOCK.sub("", line[: found.end()]) + line[found.end() :]
        lines.append(line)
    return "\n".join(lines)


def format_time(stamp: datetime | None) -> str:
    return stamp.strftime("%d %b %Y %H:%M") if stamp else "undated"


def render(turn: Turn, text: str | None = None) -> str:
    """One line of a window; turns and the facts carved from them look alike, so no arm is favoured."""
    return f"[{format_time(turn.timestamp)}] {turn.speaker}: {text if text is not None else turn.text}"


def fact_line(view: ConversationView, fact: Fact, body: str | None = None) -> str:
    """A fact as a window line: like the turn it was carved from, or dated and marked as memory when
    it has none. `body` replaces the fact's text (the assembled arm clips it as the block does)."""
    text = fact.body if body is None else body
    turn = view.conversation.turn_by_id.get(fact.message_id or "")
    return render(turn, text) if turn else f"[{format_time(fact.valid_from)}] memory: {text}"


@dataclass
class ConversationView:
    """A conversation with every turn's rendered line and token count computed once, for every arm.

    A view may stop early (`until`): the question is then asked at that moment, and `hidden` holds the
    turns said after it, which no arm may show (retrievers over the whole conversation exclude them).
    """

    conversation: Conversation
    lines: dict[str, str] = field(init=False)
    tokens: dict[str, int] = field(init=False)
    hidden: frozenset[str] = field(default=frozenset(), init=False)

    def __post_init__(self) -> None:
        turns = self.conversation.turns
        self.lines = {t.id: render(t) for t in turns}
        self.tokens = dict(zip(self.lines, count_many(list(self.lines.values())), strict=True))

    @property
    def newest_first(self) -> list[Turn]:
        return list(reversed(self.conversation.turns))

    @property
    def history_tokens(self) -> int:
        """The whole transcript so far, as the tail would render it (one line per turn)."""
        return sum(self.tokens.values())

    def until(self, session_id: str) -> ConversationView:
        """The conversation as it stood at the end of session `session_id` (counts reused, not redone)."""
        ids = [s.id for s in self.conversation.sessions]
        cut = ids.index(session_id) + 1
        if cut == len(ids):
            return self
        shown = replace(self.conversation, sessions=self.conversation.sessions[:cut])
        view = object.__new__(ConversationView)
        view.conversation = shown
        kept = {t.id for t in shown.turns}
        view.lines = {k: v for k, v in self.lines.items() if k in kept}
        view.tokens = {k: v for k, v in self.tokens.items() if k in kept}
        view.hidden = self.hidden | frozenset(k for k in self.lines if k not in kept)
        return view


ASK_AT_MODES = ("end", "evidence", "later")


def asked_at(view: ConversationView, question: Question, mode: str) -> ConversationView:
    """The view a question is asked against, as if the user asked it then:

    - "end": after the whole conversation (the datasets' own setting);
    - "evidence": right after the session holding its latest evidence;
    - "later": after a session drawn between that one and the last, evenly, fixed per question (a
      hash of its id), so histories of every length occur and the evidence is not always recent.

    Questions without evidence (abstention) are asked at the end."""
    if mode not in ASK_AT_MODES:
        raise ValueError(f"ask-at mode must be one of {', '.join(ASK_AT_MODES)}, not {mode!r}")
    if mode == "end":
        return view
    evidence = [*question.evidence_ids, *question.current_ids]
    turns = view.conversation.turn_by_id
    position = {t.id: i for i, t in enumerate(view.conversation.turns)}
    known = [e for e in evidence if e in turns]
    if not known:
        return view
    last = max(known, key=position.__getitem__)
    sessions = [s.id for s in view.conversation.sessions]
    first = sessions.index(turns[last].session_id)
    if mode == "evidence":
        return view.until(sessions[first])
    draw = int.from_bytes(hashlib.sha256(question.id.encode()).digest()[:8], "big")
    return view.until(sessions[first + draw % (len(sessions) - first)])


def fill_tail(
    packer: Packer, view: ConversationView, first_priority: int = 0, clip: bool = True
) -> list[WindowItem]:
    """Newest turns, whole, while they fit; then the end of the next one (if `clip`). Chronological text."""
    section = packer.section(TAIL_TITLE)
    items: list[WindowItem] = []
    for turn in view.newest_first:
        line = view.lines[turn.id]
        if packer.add(section, line, view.tokens[turn.id]):
            items.append(WindowItem(turn.id, first_priority + len(items), said=said_in(line)))
            continue
        room = packer.header_room(section)
        clipped = clip_to_last(line, room) if clip and room is not None else None
        if clipped is not None and packer.add(section, clipped, count_tokens(clipped)):
            items.append(WindowItem(turn.id, first_priority + len(items), clipped=True))
        break
    section.lines.reverse()  # packed newest first, read oldest first
    return items
