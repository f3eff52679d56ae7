"""A lane fails only when something is really broken, and a reply is an answer or nothing: tool
errors go back to the model, an unreachable web search says so in one sentence, non-answers are
withheld from the page and from capture, and the smoke gate decides which tools a lane gets."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.postgres import PostgresSaver

from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore
from memory.model import Kind
from memory.rules.conclusions import why_no_answer
from memory.scripted import ScriptedChatModel, calls, tool_call
from playground.comparison.lanes import LANE_TOOL_NAMES, build_beads_agent, build_stock_agent
from playground.comparison.websearch import UNAVAILABLE, search_web
from playground.models import smoke
from playground.models.select import ActiveModel
from playground.runtime import Runtime
from playground.settings import PlaygroundSettings
from playground.turn_runner import reply_payload
from tests.test_agents import fresh_thread, run_turns, saver, stock_store

__all__ = ["saver", "stock_store"]  # the fixtures, shared with test_agents

NO_ANSWERS = [
    ("", "an empty reply"),
    (
        '<tool_call>{"name": "web_search", "arguments": {"query": "x"}}</tool_call>',
        "a tool call written as text",
    ),
    (
        "Web search is unavailable right now, so answer from what you know and say so.",
        "an error or failure notice",
    ),
    ("delegate_research", "an identifier, not a sentence"),
    ("MG2CC378A9BA6056D1A49452866D3CBD63", "an identifier, not a sentence"),
    ("What is our budget?", "the question said back"),
    ("I will call search_memory to find the budget.", "a reply about its tools (search_memory)"),
    ("This tool returned a summary of what you found.", "a reply about its tools"),
    # the stock lane's last replies in two held-out chats on the offline model
    ("This tool does not return any results.", "a reply about its tools"),
    (
        'This is a tool response indicating that no results were found for the query "chip".',
        "a reply about its tools",
    ),
    # the stock lane's reply in the walkthrough on the offline 1.5B
    (
        "To determine our budget per year, I need to search my long-term memories for relevant information.",
        "a reply about its tools",
    ),
]
ANSWERS = [
    "Our budget is $120k per year.",
    "$120k per year.",
    "8KXR203",  # a one-word answer is still an answer
    "Dallas.",
    "What is our budget? It is $120k per year.",  # the question, then its answer
    "You could use a search tool for that, or ask the vendor.",  # tools as the user's matter
    "I will check the memory usage of your Redis instance next: it was 1.2 GB on Monday.",
]


@pytest.mark.parametrize(("text", "why"), NO_ANSWERS)
def test_what_is_no_answer_says_why(text: str, why: str) -> None:
    assert why_no_answer(text, asked="What is our budget?", tool_names=LANE_TOOL_NAMES) == why


@pytest.mark.parametrize("text", ANSWERS)
def test_answers_in_words_are_answers(text: str) -> None:
    assert why_no_answer(text, asked="What is our budget?", tool_names=LANE_TOOL_NAMES) is None


def test_a_tools_output_said_back_is_no_answer() -> None:
    result = "Pinned: Our budget is $120k per year. It stays in every call."
    assert why_no_answer(result, tool_results=[result]) == "a tool's output said back"


def test_the_lane_withholds_a_non_answer_and_keeps_what_the_model_wrote() -> None:
    asked = "What is our budget?"
    messages: list[BaseMessage] = [
        HumanMessage(asked),
        AIMessage(
            "",
            tool_calls=[{"name": "web_search", "args": {"query": "budget"}, "id": "c1", "type": "tool_call"}],
        ),
        ToolMessage(
            "1. Budget planning (https://example.org)\n   How teams plan a budget.",
            tool_call_id="c1",
            name="web_search",
        ),
        AIMessage("Budget planning: how teams plan a budget."),
    ]
    payload = reply_payload(messages, asked)
    assert payload == {
        "text": "",
        "no_answer": "a tool's output said back",
        "raw": "Budget planning: how teams plan a budget.",
    }
    assert reply_payload([HumanMessage(asked), AIMessage("It is $120k.")], asked) == {"text": "It is $120k."}


def test_our_lane_captures_no_non_answer_as_a_conclusion(store: FactStore) -> None:
    model = ScriptedChatModel(
        replies=["What is the launch date?", "I will call web_search for that.", "It is April 2."]
    )
    agent, _ = build_beads_agent(model, store, "s", tools=[], research=False)
    run_turns(agent, "s", ["What is the launch date?", "And the launch date?", "Tell me the launch date."])
    conclusions = [f.body for f in store.audit.session_facts("s") if f.kind is Kind.CONCLUSION]
    assert conclusions == ["It is April 2."]


def test_langmems_error_goes_back_to_the_stock_model_as_a_tool_result(
    stock_store: Any, saver: PostgresSaver
) -> None:
    # the held-out chats' crash: manage_memory asked to update without an id raises a ValueError
    model = ScriptedChatModel(
        replies=[
            calls(tool_call("manage_memory", content="Budget is $120k.", action="update")),
            calls(tool_call("manage_memory", content="Budget is $120k.")),
            "Noted: $120k.",
        ]
    )
    agent = build_stock_agent(model, stock_store, checkpointer=saver, research=False)
    out = agent.invoke({"messages": [HumanMessage("Our budget is now $120k.")]}, fresh_thread("s"))
    failed, stored = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert failed.status == "error" and "You must provide a MEMORY ID" in str(failed.content)
    assert str(failed.content).startswith("Error: ValueError(")
    assert stored.status == "success" and out["messages"][-1].content == "Noted: $120k."
    assert [i.value["content"] for i in stock_store.search(("memories", "s"))] == ["Budget is $120k."]


def test_a_tool_error_goes_back_to_our_model_and_is_not_captured(store: FactStore) -> None:
    def lookup(item: str) -> str:
        """Look an item up."""
        raise RuntimeError("upstream 503 at lookup.example")

    model = ScriptedChatModel(replies=[calls(tool_call("lookup", item="budget")), "I could not look it up."])
    agent, _ = build_beads_agent(
        model, store, "s", tools=[StructuredTool.from_function(lookup)], research=False, memory_tools=False
    )
    out = agent.invoke({"messages": [HumanMessage("Look up the budget.")]}, fresh_thread("s"))
    [failed] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert failed.status == "error" and "upstream 503" in str(failed.content)
    assert not any("upstream 503" in f.body for f in store.audit.session_facts("s"))


def test_an_unreachable_web_search_says_so_in_one_plain_sentence() -> None:
    # no network in tests: the engines fail to resolve, and none of their words reach the model
    notice = search_web("pgvector release notes", timeout=2)
    assert notice == UNAVAILABLE
    assert "http" not in notice and "Error" not in notice and notice.count(".") == 1


def scripted_active(*replies: object) -> ActiveModel:
    return ActiveModel("local", "scripted", ScriptedChatModel(replies=list(replies)), "test")


def test_a_model_that_passes_the_tool_checks_keeps_every_tool() -> None:
    model = scripted_active(
        calls(tool_call("get_weather", city="Paris")),
        "A knot is a reminder: you tie it so you remember something later.",
        "It is 14°C with light rain in Paris.",
    ).chat_model
    gate = smoke.tool_gate(model)
    assert gate == smoke.ToolGate(True, "the 3 tool-call checks passed")


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        (["Sunny."], "the tool call check failed: no tool call; the reply was 'Sunny.'"),
        (
            [calls(tool_call("get_weather", city="Paris")), calls(tool_call("get_weather", city="Paris"))],
            "the no needless call check failed: called ['get_weather'] for a question no tool helps with",
        ),
        (
            [
                calls(tool_call("get_weather", city="Paris")),
                "A reminder.",
                "Paris: 14°C, light rain, wind 20 km/h.",
            ],
            "the answer from a tool check failed: no answer (a tool's output said back)",
        ),
    ],
)
def test_the_first_failed_tool_check_says_why(replies: list[object], reason: str) -> None:
    gate = smoke.tool_gate(scripted_active(*replies).chat_model)
    assert not gate.passed and gate.reason.startswith(reason)


def test_a_model_that_fails_the_gate_runs_lanes_without_delegation_and_web_search() -> None:
    unused: Any = None  # these properties read only the settings, the model and the gate
    tools = [StructuredTool.from_function(search_web, name="web_search")]
    settings = PlaygroundSettings()
    active = scripted_active()
    gate = smoke.ToolGate(False, "the no needless call check failed: called ['get_weather']")
    failed = Runtime(
        settings, unused, unused, unused, unused, active, FakeEmbedder(), "ready", tools, unused, gate
    )
    assert (failed.lane_tools, failed.research) == ([], False)
    label, line = failed.status_lines[2]
    assert label == "Tools" and line == (
        "web search and delegation off, because the no needless call check failed: called "
        "['get_weather']; our lane still captures and injects, the stock lane keeps LangMem's tools"
    )
    passed = Runtime(
        settings,
        unused,
        unused,
        unused,
        unused,
        active,
        FakeEmbedder(),
        "ready",
        tools,
        unused,
        smoke.ToolGate(True, "the 3 tool-call checks passed"),
    )
    assert (passed.lane_tools, passed.research) == (tools, True)
    assert passed.status_lines[2][1] == "web search and delegation on: the 3 tool-call checks passed"


def test_the_page_says_a_lane_gave_no_answer_with_the_raw_text_behind_a_disclosure() -> None:
    import uuid

    from playground.events import EventRow
    from playground.render import make_templates, render_event

    templates = make_templates()
    chat, turn = uuid.uuid4(), uuid.uuid4()

    def fragment(seq: int, kind: str, payload: dict[str, Any]) -> str:
        return render_event(templates, EventRow(chat, seq, turn, seq, "stock", kind, payload))

    started = fragment(1, "start", {"attempt": 1, "model": "openai:gpt-4o-mini"})
    assert f'id="model-{turn}-stock"' in started and ">openai:gpt-4o-mini</span>" in started
    raw = '<tool_call>{"name": "search_memory"}</tool_call>'
    done = fragment(2, "done", {"text": "", "no_answer": "a tool call written as text", "raw": raw})
    assert "No answer from this lane (a tool call written as text)." in done
    assert "<details" in done and "What the model wrote" in done
    assert "&lt;tool_call&gt;" in done and raw not in done  # the model's text, escaped
    answered = fragment(3, "done", {"text": "It is $120k."})
    assert "It is $120k." in answered and "<details" not in answered


def test_a_reply_from_what_memory_returned_is_an_answer() -> None:
    # the stock lane's memory reaches its model only as search_memory's result: quoting it answers
    asked = "What is our budget?"
    found = '[{"key": "k1", "value": {"content": "Our budget is $120k per year."}}]'
    messages: list[BaseMessage] = [
        HumanMessage(asked),
        AIMessage(
            "",
            tool_calls=[
                {"name": "search_memory", "args": {"query": "budget"}, "id": "c1", "type": "tool_call"}
            ],
        ),
        ToolMessage(found, tool_call_id="c1", name="search_memory"),
        AIMessage("From memory: Our budget is $120k per year."),
    ]
    assert reply_payload(messages, asked) == {"text": "From memory: Our budget is $120k per year."}
