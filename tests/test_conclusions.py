"""Final answers that are not statements are never captured as conclusions (memory.conclusions),
checked on the outputs the offline model actually gave, and through the middleware."""

from __future__ import annotations

import pytest

from memory.conclusions import is_conclusion
from memory.model import Kind
from memory.scripted import ScriptedChatModel
from memory.store import FactStore
from playground.comparison.lanes import build_beads_agent
from tests.test_agents import run_turns

NOT_CONCLUSIONS = [
    '{"name": "our_budget", "arguments": {"budget": "1200000"}}',
    '{"name": "our_budget", "arguments": {"budget": "120k per year"}}',
    '  {"name": "remember_fact", "args": {"fact": "x"}} and then some',
    '```json\n{"name": "search_memory", "parameters": {"query": "budget"}}\n```',
    '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]',
    '<tool_call>\n{"name": "manage_memory", "arguments": {"content": "budget"}}\n</tool_call>',
    'Sure! <tool_call>{"name": "nope"}',
    "",
    "   \n ",
    "Error: the model failed to respond",
    "Traceback (most recent call last):\n  File ...",
]
CONCLUSIONS = [
    "Your budget is $120k per year.",
    "The budget changed from $100k to $120k per year.",
    '{"budget": "120k"} is what the config says.',
    'Here is the JSON you asked for: {"a": 1}',
    "An error budget of 0.1% is typical for this tier.",
]


@pytest.mark.parametrize("text", NOT_CONCLUSIONS)
def test_tool_call_text_empty_replies_and_errors_are_no_conclusions(text: str) -> None:
    assert not is_conclusion(text)


@pytest.mark.parametrize("text", CONCLUSIONS)
def test_answers_in_words_are_conclusions(text: str) -> None:
    assert is_conclusion(text)


def test_the_middleware_keeps_only_answers_in_words(store: FactStore) -> None:
    replies = [NOT_CONCLUSIONS[0], NOT_CONCLUSIONS[5], "Your budget is $120k per year."]
    model = ScriptedChatModel(replies=replies)
    agent, _ = build_beads_agent(model, store, "s", tools=[], research=False)
    run_turns(agent, "s", ["Our budget is $100k.", "Correction: it is $120k.", "What is our budget?"])
    conclusions = [f.body for f in store.session_facts("s") if f.kind is Kind.CONCLUSION]
    assert conclusions == ["Your budget is $120k per year."]
