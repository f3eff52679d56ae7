"""The one internal shape every benchmark is loaded into: conversation -> sessions -> turns, plus questions.

Loaders (bench.eval.loaders) turn LoCoMo, BEAM and LongMemEval files into these records; everything
downstream (ingestion, arms, metrics) reads only these, so a new format needs only a new loader.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Literal

Role = Literal["user", "assistant", "tool"]  # "tool": a tool's result (bench.eval.toolcalls)

# Which LongMemEval judge prompt grades a question (see bench.eval.judging).
JudgePrompt = Literal["default", "temporal", "knowledge-update", "preference", "abstention"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One message. `id` is what the dataset's evidence cites; unique within its conversation."""

    id: str
    session_id: str
    role: Role
    speaker: str
    text: str
    timestamp: datetime | None
    calls_tool: bool = False  # an assistant turn that calls a tool (not a final answer)


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    conversation_id: str
    type: str  # the dataset's own category name, e.g. "temporal" or "knowledge_update"
    question: str
    reference: str  # the gold answer, rubric or (for abstention) the explanation the judge reads
    evidence_ids: tuple[str, ...] = ()  # turns that hold the answer (resolved, existing ids only)
    stale_ids: tuple[str, ...] = ()  # knowledge updates: the turns with the replaced value
    current_ids: tuple[str, ...] = ()  # knowledge updates: the turns with the value now true
    # knowledge updates: the values themselves, as written ("165 commits"), for scoring an answer
    current_values: tuple[str, ...] = ()
    stale_values: tuple[str, ...] = ()
    abstention: bool = False  # unanswerable: the right behaviour is to say memory holds nothing
    judge_prompt: JudgePrompt = "default"
    question_date: str | None = None  # "today" as the dataset states it, for temporal questions


@dataclass(frozen=True)  # no slots: the derived views below are computed once and cached
class Conversation:
    id: str
    dataset: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @cached_property
    def turns(self) -> tuple[Turn, ...]:
        """Every turn in the order it was said (sessions in order, turns in order)."""
        return tuple(t for s in self.sessions for t in s.turns)

    @cached_property
    def turn_by_id(self) -> dict[str, Turn]:
        return {t.id: t for t in self.turns}


@dataclass
class LoadIssues:
    """What a loader could not take at face value: counted, never silently dropped.

    `repaired` ids were malformed but unambiguous ("D30:05" -> "D30:5"); `unresolved` ones were dropped
    (unparseable, or naming a turn that does not exist).
    """

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, example: str, n: int = 1) -> None:
        self.counts[kind] += n
        bucket = self.examples.setdefault(kind, [])
        if len(bucket) < 5:
            bucket.append(example)


@dataclass
class Dataset:
    name: str  # "locomo", "beam" or "longmemeval"
    source: str  # the path it was read from
    conversations: list[Conversation]
    issues: LoadIssues = field(default_factory=LoadIssues)

    @property
    def questions(self) -> list[Question]:
        return [q for c in self.conversations for q in c.questions]
