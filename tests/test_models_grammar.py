"""The tool-call grammar, checked by llama.cpp's own grammar engine against the real tool schemas.

No model is run: llama.cpp loads the offline model's vocabulary only, and each candidate text is fed
to the grammar sampler token by token, the way generation would. A text is admitted when every token
is allowed and the grammar then lets the model end its turn.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from memory.doors.tools import memory_tools
from memory.graph.store import FactStore
from memory.model import Namespace
from memory.scripted import ScriptedChatModel
from playground.comparison.lanes import stock_tools
from playground.comparison.websearch import web_search_tool
from playground.models.engine import import_llama_cpp
from playground.models.grammar import tool_call_gbnf, uuids_in
from playground.models.settings import ModelSettings
from playground.models.weights import ensure_weights

ID = "3f2b8c1e-9a4d-4e7f-b6c5-1d2e3f4a5b6c"
OTHER_ID = "0c9e2a71-5b3d-4f8e-a1c2-d3e4f5a6b7c8"
END = "\n</tool_call>"

Admits = Callable[[str, str], bool]


@pytest.fixture(scope="module")
def admits() -> Iterator[Admits]:
    llama_cpp = import_llama_cpp()
    path = ensure_weights(ModelSettings().model_cache_dir)
    vocab_model = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = vocab_model._model.vocab
    end_of_turn = vocab_model.token_eos()

    def check(gbnf: str, text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        assert sampler, f"llama.cpp cannot parse the grammar:\n{gbnf}"
        try:
            tokens = vocab_model.tokenize(text.encode(), add_bos=False, special=True)
            for token in [*tokens, end_of_turn]:
                candidate = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
                candidates = llama_cpp.llama_token_data_array(candidate, 1, -1, False)
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if candidate[0].logit == float("-inf"):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)

    yield check
    vocab_model.close()


def openai(tools: list[BaseTool]) -> list[dict[str, Any]]:
    return [convert_to_openai_tool(tool) for tool in tools]


STOCK = openai(stock_tools(ScriptedChatModel(), [web_search_tool()]))
BEADS = openai(
    [
        *memory_tools(cast(FactStore, None), cast(Namespace, None), "orchestrator", "orchestrator"),
        web_search_tool(),
    ]
)


def call(name: str, arguments: str | dict[str, Any]) -> str:
    """A call as the model writes it; ``arguments`` as a dict is written as JSON with one space."""
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    return f'{{"name": "{name}", "arguments": {arguments}}}{END}'


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        (call("manage_memory", '{"content": "Our budget is 1,200,000 euros."}'), True),
        (call("manage_memory", '{"content": "Budget: 1.2M", "action": "create"}'), True),
        (call("manage_memory", {"content": "Budget: 1.5M", "action": "update", "id": ID}), True),
        (call("manage_memory", {"action": "delete", "id": ID}), True),
        (call("search_memory", '{"query": "budget", "limit": 3}'), True),
        (call("web_search", '{"query": "mortgage rates Portugal"}'), True),
        (call("delegate_research", '{"task": "Lisbon neighbourhoods", "researcher": "r1"}'), True),
        (call("manage_memory", '{"content": "line one\\nline two"}'), True),  # an escaped newline
        # what the offline model wrote on a fresh install
        (call("our_budget", '{"budget": "1200000"}'), False),
        (call("manage_memory", '{"content": "x", "action": "update", "id": "budget"}'), False),
        (call("manage_memory", {"content": "x", "action": "update", "id": OTHER_ID}), False),
        (call("search_memory", "{}"), False),  # query is required
        (call("search_memory", '{"query": "budget", "limit": "3"}'), False),
        (call("manage_memory", '{"action": "remove"}'), False),  # not one of the enum's values
        (call("web_search", '{"query": "x", "page": 2}'), False),  # a property the schema does not name
        (call("manage_memory", '{"content": "line one\nline two"}'), False),  # a raw newline: not JSON
        ('{"name": "web_search", "arguments": {"query": "x"}}', False),  # the closing tag is part of it
        (call("web_search", '{"query": "x"}') + " Done.", False),  # and nothing comes after it
    ],
)
def test_the_stock_lane_grammar_admits_valid_calls_only(admits: Admits, text: str, admitted: bool) -> None:
    assert admits(tool_call_gbnf(STOCK, [ID]), text) is admitted


def test_with_no_uuid_known_an_optional_uuid_is_left_out(admits: Admits) -> None:
    gbnf = tool_call_gbnf(STOCK)
    assert admits(gbnf, call("manage_memory", '{"content": "Budget: 1.2M", "action": "create"}'))
    # An invented UUID is well formed and the schema takes it; LangMem then refuses the create.
    invented = "12345678-1234-1234-1234-123456789012"
    assert not admits(gbnf, call("manage_memory", {"content": "x", "id": invented}))
    assert not admits(gbnf, call("manage_memory", '{"content": "x", "id": null}'))


def test_a_required_uuid_may_be_any_uuid_when_none_is_known(admits: Admits) -> None:
    def fetch_order(order_id: str) -> str:
        """Fetch an order."""
        return order_id

    tool = convert_to_openai_tool(StructuredTool.from_function(fetch_order))
    tool["function"]["parameters"]["properties"]["order_id"]["format"] = "uuid"
    gbnf = tool_call_gbnf([tool])
    assert admits(gbnf, call("fetch_order", {"order_id": OTHER_ID}))
    assert not admits(gbnf, call("fetch_order", '{"order_id": "order-7"}'))
    assert not admits(gbnf, call("fetch_order", "{}"))
    known = tool_call_gbnf([tool], [ID])
    assert admits(known, call("fetch_order", {"order_id": ID}))
    assert not admits(known, call("fetch_order", {"order_id": OTHER_ID}))


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        (call("remember_fact", '{"fact": "Budget is 1.5M", "supersedes": "a1b2c3d4"}'), True),
        (call("pin_fact", '{"fact_id": "a1b2c3d4", "unpin": true}'), True),
        (call("recall_from_subagents", '{"researcher": "researcher", "limit": 5}'), True),
        (call("remember_fact", '{"supersedes": "a1b2c3d4"}'), False),  # fact is required
        (call("pin_fact", '{"fact_id": "a1b2c3d4", "unpin": "yes"}'), False),
        (call("manage_memory", '{"content": "x"}'), False),  # the other lane's tool
    ],
)
def test_the_beads_lane_grammar(admits: Admits, text: str, admitted: bool) -> None:
    assert admits(tool_call_gbnf(BEADS), text) is admitted


def with_item(name: str, item: dict[str, Any]) -> dict[str, Any]:
    """A tool whose argument refers to a definition named "Item" (LangChain inlines its own
    definitions; a tool given as a dict, from an MCP server say, keeps them)."""
    parameters = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "required": ["item"],
        "$defs": {"Item": item},
    }
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_definitions_of_the_same_name_in_two_tools_stay_apart(admits: Admits) -> None:
    book = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    stock = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    gbnf = tool_call_gbnf([with_item("add_book", book), with_item("add_stock", stock)])
    assert admits(gbnf, call("add_book", {"item": {"title": "Dune"}}))
    assert admits(gbnf, call("add_stock", {"item": {"count": 3}}))
    assert not admits(gbnf, call("add_book", {"item": {"count": 3}}))
    assert not admits(gbnf, call("add_stock", {"item": {"title": "Dune"}}))


def test_a_schema_the_converter_cannot_read_still_constrains_the_name(admits: Admits) -> None:
    odd = {
        "type": "function",
        "function": {
            "name": "odd_tool",
            "parameters": {"type": "object", "properties": {"x": {"type": "frobnicate"}}},
        },
    }
    gbnf = tool_call_gbnf([odd, *STOCK])
    assert admits(gbnf, call("odd_tool", '{"anything": [1, 2]}'))
    assert not admits(gbnf, call("odd_tools", "{}"))
    assert not admits(gbnf, call("search_memory", "{}"))  # the others keep their schemas


def test_a_schema_llama_cpp_cannot_parse_falls_back_the_same_way(admits: Admits) -> None:
    quoted = {
        "type": "function",
        "function": {"name": "quoted", "parameters": {"type": "object", "properties": {'say "hi"': {}}}},
    }
    gbnf = tool_call_gbnf([quoted])
    assert admits(gbnf, call("quoted", {"anything": 1}))
    assert not admits(gbnf, call("search_memory", {"query": "x"}))


def test_a_tool_name_llama_cpp_cannot_parse_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        tool_call_gbnf([{"type": "function", "function": {"name": 'say "hi"', "parameters": {}}}])


def test_uuids_in_a_conversation() -> None:
    text = f"created memory {ID.upper()}\nsee {OTHER_ID} and {ID} again; not-a-uuid 1234"
    assert uuids_in(text) == [OTHER_ID, ID]
    assert uuids_in(text, limit=1) == [ID]
    assert uuids_in("nothing here") == []
