"""Final answers that are not statements are never captured as conclusions (memory.rules.conclusions),
checked on the outputs the offline model actually gave, and through the middleware."""

from __future__ import annotations

import pytest
from langchain_core.tools import StructuredTool

from memory.graph.store import FactStore
from memory.model import Kind, Source
from memory.rules.conclusions import is_conclusion, repeats, without_lead_in
from memory.scripted import ScriptedChatModel, calls, tool_call
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
    conclusions = [f.body for f in store.audit.session_facts("s") if f.kind is Kind.CONCLUSION]
    assert conclusions == ["Your budget is $120k per year."]


LEAD_INS = [
    # the conclude_task description said back by the offline model before what it found
    (
        "The summary of what was found for the agent that delegated it is: The launch is on April 2.",
        "The launch is on April 2.",
    ),
    ('The summary of what was found is:\n"Our sitter is Lucia."', "Our sitter is Lucia."),
    ("Here is what I found: the sync moved to Thursday.", "the sync moved to Thursday."),
    # a colon that announces nothing, or that belongs to the claim, stays
    ("Note: the sync moved to Thursday.", "Note: the sync moved to Thursday."),
    ("The meeting is at 10:30 on Thursday.", "The meeting is at 10:30 on Thursday."),
    ("Budget: $120k per year.", "Budget: $120k per year."),
]


@pytest.mark.parametrize(("text", "kept"), LEAD_INS)
def test_a_lead_in_that_only_announces_the_finding_goes(text: str, kept: str) -> None:
    assert without_lead_in(text) == kept


def test_an_answer_that_says_back_a_tool_result_repeats_it() -> None:
    error = "Not pinned: 'Hannah charges 18/hr' is not a fact id (expected at least 6 hex digits)"
    assert repeats("Hannah charges 18/hr is not a fact id (expected at least 6 hex digits).", error)
    assert not repeats("Your sitter Hannah charges 18/hr.", error)
    assert not repeats("", error)


def test_the_middleware_keeps_no_answer_that_only_says_a_tool_result_back(store: FactStore) -> None:
    def lookup(query: str) -> str:
        """Look something up."""
        return "The office's lease ends in May 2027 per the landlord's letter."

    model = ScriptedChatModel(
        replies=[
            calls(tool_call("lookup", query="lease")),
            "The office's lease ends in May 2027 per the landlord's letter.",
            "Here is what I found: the lease ends in May 2027, so we should plan the move for April.",
        ]
    )
    agent, _ = build_beads_agent(
        model, store, "s", tools=[StructuredTool.from_function(lookup)], research=False
    )
    run_turns(agent, "s", ["When does our lease end?", "So when should we move?"])
    facts = store.audit.session_facts("s")
    conclusions = [f.body for f in facts if f.kind is Kind.CONCLUSION and f.source is Source.PASSIVE_CAPTURE]
    # the first answer was the tool's result said back (and the result itself was captured);
    # the second is the agent's own, without its lead-in
    assert "the lease ends in May 2027, so we should plan the move for April." in conclusions
    assert not [c for c in conclusions if c.startswith("The office's lease")]
    assert [f.body for f in facts if f.source is Source.TOOL_RESULT] == [
        "The office's lease ends in May 2027 per the landlord's letter."
    ]


@pytest.mark.parametrize(
    ("reply", "said", "echo"),
    [
        (
            "Got it! Your budget is $100k per year and it must be self-hostable.",
            "Our budget is $100k per year. It must be self-hostable.",
            True,
        ),
        ("Noted, you are vegetarian. Anything else I can help with?", "I am vegetarian.", True),
        (
            "Your budget is $100k per year, so a self-hosted GitLab fits.",
            "Our budget is $100k per year.",
            False,
        ),
        ("Noted: you are vegetarian, so I will skip the steakhouse.", "I am vegetarian.", False),
        ("Noted.", "I am vegetarian.", False),  # says nothing: no echo (and states_nothing keeps it out)
    ],
)
def test_an_acknowledgement_is_the_users_words_said_back(reply: str, said: str, echo: bool) -> None:
    from memory.rules.conclusions import acknowledges

    assert acknowledges(reply, said) is echo
