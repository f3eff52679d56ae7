"""Conversations with tool calls in them, for measuring what clearing old tool output is worth.

LoCoMo and BEAM hold no tool output, and an agent's transcript is full of it. `with_tool_calls` makes
a dataset that has some, deterministically: after every `every`-th turn the assistant runs a web
search on the words of that turn, and the tool answers with about `tokens` tokens of text taken in
order from the next conversation of the same dataset (cyclically). Questions, evidence and every
original turn are unchanged; the new turns get ids of their own, so evidence never points at them.
"""

from __future__ import annotations

import dataclasses
from itertools import cycle

from bench.eval.conversation import Conversation, Dataset, Session, Turn

TOOL_NAME = "web_search"
CHARS_PER_TOKEN = 4  # close enough for English prose under the WordPiece count


def _donor_text(donor: Conversation, start: int, tokens: int) -> tuple[str, int]:
    """About `tokens` tokens of `donor`'s turns from turn `start` on (wrapping); and where it stopped."""
    turns = donor.turns
    parts: list[str] = []
    size, i = 0, start
    while size < tokens * CHARS_PER_TOKEN and turns:
        text = turns[i % len(turns)].text.strip()
        parts.append(text)
        size += len(text) + 1
        i += 1
    return " ".join(parts), i % max(1, len(turns))


def with_tool_calls(dataset: Dataset, every: int = 6, tokens: int = 300) -> Dataset:
    """`dataset` with a web search call and its result after every `every`-th turn (see the module)."""
    if every < 1 or tokens < 1:
        raise ValueError("tool calls need every >= 1 and tokens >= 1")
    conversations = dataset.conversations
    if len(conversations) < 2:
        raise ValueError("tool output is taken from another conversation: the dataset needs two or more")
    donors = cycle(conversations[1:] + conversations[:1])
    changed = []
    for conversation in conversations:
        donor = next(donors)
        position, n = 0, 0
        sessions = []
        for session in conversation.sessions:
            turns: list[Turn] = []
            for turn in session.turns:
                turns.append(turn)
                n += 1
                if n % every:
                    continue
                query = " ".join(turn.text.split()[:8])
                result, position = _donor_text(donor, position, tokens)
                turns.append(
                    dataclasses.replace(
                        turn,
                        id=f"{turn.id}#call",
                        role="assistant",
                        speaker="assistant",
                        text=f'{TOOL_NAME}("{query}")',
                        calls_tool=True,
                    )
                )
                turns.append(
                    dataclasses.replace(
                        turn, id=f"{turn.id}#result", role="tool", speaker=TOOL_NAME, text=result
                    )
                )
            sessions.append(Session(session.id, tuple(turns)))
        changed.append(
            dataclasses.replace(
                conversation, dataset=f"{conversation.dataset}-tools", sessions=tuple(sessions)
            )
        )
    return Dataset(
        f"{dataset.name}-tools",
        f"{dataset.source}#tool-calls-every-{every}-{tokens}-tokens",
        changed,
        dataset.issues,
    )
