"""The agent's own replies come after the user's claims in the block, unless the question asks what
the agent said (memory.context.agent_replies), on real Postgres."""

from __future__ import annotations

import pytest

from memory.context.agent_replies import asks_about_replies
from memory.context.block import TierSettings, fill_retrieved
from memory.graph.store import FactStore
from memory.model import Fact, Hit, Kind, SearchResult, Source

ASKS_ABOUT_REPLIES = [
    "How did you recommend handling the retries?",
    "What approach did you suggest for the resume's keywords?",
    "Have you told me which index to use?",
    "What was your advice on the caching layer?",
    "Remind me of your suggestions for the login page.",
    "You mentioned a library for PDFs earlier; which one was it?",
    "Summarize what we covered about triangles.",
    "What have we discussed about the budget?",
]
REQUESTS = [
    "Can you show me how to set up the cache?",
    "Could you help me structure the login feature?",
    "Can you walk me through the order in which I brought up each feature throughout our conversations?",
    "What did I say about my dog?",
    "How should I organize the parts of a webpage?",
    "Would you suggest Redis or Memcached?",
]


@pytest.mark.parametrize("question", ASKS_ABOUT_REPLIES)
def test_a_question_about_what_the_agent_said_is_read_as_one(question: str) -> None:
    assert asks_about_replies(question)


@pytest.mark.parametrize("question", REQUESTS)
def test_a_request_or_a_question_about_the_user_is_not(question: str) -> None:
    assert not asks_about_replies(question)


QUESTION = "How should I cache the weather API responses?"
ABOUT_REPLIES = "What did you recommend for caching the weather API responses?"


def _block(store: FactStore, facts: list[Fact], question: str) -> list[str]:
    hits = tuple(Hit(f, 0.9 - i * 0.01, 0.1, 0.9, None, False, None) for i, f in enumerate(facts))
    result = SearchResult(hits, question, False, 0.9)
    tier = fill_retrieved(lambda k: result, store.passages, 6000, sum, TierSettings())
    return list(tier.lines)


def _said(store: FactStore) -> tuple[Fact, Fact, Fact]:
    root = store.root("s")
    reply = store.remember(
        root,
        "Sure! Caching the weather API responses is a great idea. Here are some steps to set it up: ...",
        kind=Kind.CONCLUSION,
        source=Source.PASSIVE_CAPTURE,
        message_id="a1",
    )
    [claim] = store.capture_message(
        root, "My weather app calls the API every 10 minutes.", message_id="u1"
    ).facts
    kept = store.remember(root, "The user wants responses cached for 10 minutes.", kind=Kind.CONCLUSION)
    return reply, claim, kept


def test_the_agents_reply_follows_the_users_claims(store: FactStore) -> None:
    reply, claim, kept = _said(store)
    # ranked first, the reply is shown after the user's claim and after what the agent chose to keep
    lines = _block(store, [reply, claim, kept], QUESTION)
    assert [i for i, line in enumerate(lines) if "Here are some steps" in line] == [2], lines
    assert "every 10 minutes" in lines[0] and "cached for 10 minutes" in lines[1]
    # the order of the other lines is the ranking's
    lines = _block(store, [reply, kept, claim], QUESTION)
    assert "cached for 10 minutes" in lines[0] and "every 10 minutes" in lines[1]


def test_asked_what_it_said_the_agents_reply_keeps_its_rank(store: FactStore) -> None:
    reply, claim, kept = _said(store)
    lines = _block(store, [reply, claim, kept], ABOUT_REPLIES)
    assert "Here are some steps" in lines[0], lines
