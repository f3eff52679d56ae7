"""Tool calls written as text by a small model: what is parsed, what is left as content."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from playground.models.toolcalls import ParsedToolCall, call_opening, hold_index, parse_tool_calls

TOOLS = {"get_weather", "remember"}
PARIS = ParsedToolCall("get_weather", {"city": "Paris"})

CASES = [
    # (id, text, expected content, expected calls)
    (
        "tagged",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "",
        [PARIS],
    ),
    (
        "tagged without the closing tag",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "",
        [PARIS],
    ),
    (
        "text before a tagged call",
        'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
        "Let me check.",
        [PARIS],
    ),
    (
        "several tagged calls",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "remember", "arguments": {"fact": "likes tea"}}</tool_call>',
        "",
        [PARIS, ParsedToolCall("remember", {"fact": "likes tea"})],
    ),
    (
        "a second call opened before the first was closed",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
        "",
        [PARIS, ParsedToolCall("get_weather", {"city": "Rome"})],
    ),
    (
        "trailing junk inside the tag",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}}}\n]</tool_call>',
        "",
        [PARIS],
    ),
    (
        "bare JSON",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "",
        [PARIS],
    ),
    (
        "bare JSON with args instead of arguments",
        '  {"name": "get_weather", "args": {"city": "Paris"}}\n',
        "",
        [PARIS],
    ),
    (
        "bare JSON then a stray closing tag",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "",
        [PARIS],
    ),
    (
        "bare JSON then a remark",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\nI will check the weather.',
        "I will check the weather.",
        [PARIS],
    ),
    (
        "fenced JSON",
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        "",
        [PARIS],
    ),
    (
        "fence without a language",
        '```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        "",
        [PARIS],
    ),
    (
        "a list of calls",
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "remember", "arguments": {"fact": "x"}}]',
        "",
        [PARIS, ParsedToolCall("remember", {"fact": "x"})],
    ),
    (
        "objects one after another",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        "",
        [PARIS, ParsedToolCall("get_weather", {"city": "Oslo"})],
    ),
    (
        "arguments as a JSON string",
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',
        "",
        [PARIS],
    ),
    (
        "the OpenAI wire shape",
        '{"type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}',
        "",
        [PARIS],
    ),
    (
        "the same call repeated",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n' * 3,
        "",
        [PARIS],
    ),
    (
        "a call with no arguments",
        '<tool_call>{"name": "remember"}</tool_call>',
        "",
        [ParsedToolCall("remember", {})],
    ),
]

LEFT_AS_CONTENT = [
    ("plain text", "The weather in Paris is usually mild."),
    ("unknown tool, tagged", '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'),
    ("unknown tool, bare", '{"name": "launch", "arguments": {"target": "moon"}}'),
    ("malformed JSON, tagged", '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>'),
    ("malformed JSON, bare", '{"name": "get_weather", "arguments": {"city": "Paris"'),
    ("arguments a string that is not JSON", '{"name": "get_weather", "arguments": "Paris"}'),
    ("arguments not an object", '{"name": "get_weather", "arguments": ["Paris"]}'),
    ("JSON that is data, not a call", '{"name": "Maria", "city": "Lisbon", "job": "nurse"}'),
    ("a code fence", "```python\nprint('hi')\n```"),
    ("a list with one non-call", '[{"name": "get_weather", "arguments": {}}, {"x": 1}]'),
]


@pytest.mark.parametrize(("text", "content", "calls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parses_calls(text: str, content: str, calls: list[ParsedToolCall]) -> None:
    reply = parse_tool_calls(text, TOOLS)
    assert reply.tool_calls == calls
    assert reply.content == content


@pytest.mark.parametrize("text", [c[1] for c in LEFT_AS_CONTENT], ids=[c[0] for c in LEFT_AS_CONTENT])
def test_what_is_not_a_call_stays_content(text: str) -> None:
    reply = parse_tool_calls(text, TOOLS)
    assert reply.tool_calls == []
    assert reply.content == text


def test_unknown_call_stays_beside_a_known_one() -> None:
    unknown = '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'
    reply = parse_tool_calls(
        unknown + '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', TOOLS
    )
    assert reply.tool_calls == [PARIS]
    assert reply.content == unknown


def test_nothing_is_parsed_without_bound_tools() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert parse_tool_calls(text, ()).tool_calls == []
    assert parse_tool_calls(text, ()).content == text


def test_bare_json_only_counts_as_a_whole_reply() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert parse_tool_calls(text, TOOLS, allow_bare=False).tool_calls == []
    assert parse_tool_calls("Try this: " + text, TOOLS).tool_calls == []


@pytest.mark.parametrize(
    ("text", "held_from"),
    [
        ("", 0),
        ("   ", 0),
        ("{", 0),
        ("[", 0),
        ("[ {", 0),
        ("[link](http://x)", 16),
        (' {"name": "get_', 0),
        ("`", 0),
        ("```", 0),
        ("```js", 0),
        ("```json\n", 0),
        ("```json\n{", 0),
        ("```\n{", 0),
        ("```python\nprint", 15),
        ("```jsx\n<div>", 12),
        ("Hello", 5),
        ("Hello <", 6),
        ("Hello <tool_c", 6),
        ("Hello <tool_call>", 6),
        ('Hello <tool_call>{"name"', 6),
        ("Hello <b>", 9),
        ("Hello <toolbox", 14),
    ],
)
def test_hold_index(text: str, held_from: int) -> None:
    assert hold_index(text) == held_from


PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<",
    "tool_",
    "call>",
    "{",
    "}",
    "[",
    "```",
    "json",
    "\n",
    " ",
    "a",
    "`",
]


@given(st.lists(st.sampled_from(PIECES), max_size=12))
def test_hold_index_never_takes_back_what_was_shown(pieces: list[str]) -> None:
    text = "".join(pieces)
    previous = 0
    for end in range(len(text) + 1):
        ready = hold_index(text[:end])
        assert previous <= ready <= end
        previous = ready
    assert "<tool_call>" not in text[:previous]


def test_a_streamed_call_is_never_shown() -> None:
    reply = 'Sure, one moment <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    shown = max(hold_index(reply[:end]) for end in range(len(reply) + 1))
    assert reply[:shown] == "Sure, one moment "
    assert parse_tool_calls(reply[shown:], TOOLS, allow_bare=False).tool_calls == [PARIS]


CALL_PIECES = [
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '[{"name": "remember", "args": {"fact": "x"}}]',
    "<tool_call>",
    "</tool_call>",
    "```json\n",
    "```JSON\n",
    "``` json ",
    "```\n",
    "```",
    "Sure. ",
    "[see](x) ",
    "\n",
    " ",
]


@given(st.lists(st.sampled_from(CALL_PIECES), max_size=6))
def test_streaming_finds_the_same_calls_as_parsing_the_whole_reply(pieces: list[str]) -> None:
    text = "".join(pieces)
    shown = 0
    for end in range(len(text) + 1):  # one character per token: the finest a stream can split
        shown = max(shown, hold_index(text[:end]))
    streamed = parse_tool_calls(text[shown:], TOOLS, allow_bare=shown == 0)
    whole = parse_tool_calls(text, TOOLS)
    assert streamed.tool_calls == whole.tool_calls


@pytest.mark.parametrize(
    ("text", "opening"),
    [
        ("<tool_call>", 0),
        ("Let me check.\n<tool_call>\n{", 14),
        ('{"name": "get_wea', None),  # the name is not settled until its string ends
        ('{"name": "get_weather"', 0),  # a bound tool
        ('  {"name": "get_weather"}', 2),
        ('{"name": "our_budget", "arguments"', 0),  # not a bound tool, but a call's shape
        ('{"name": "our_budget", "args"', 0),
        ('{"name": "Maria", "city"', None),  # data whose first key happens to be "name"
        ('{"name": "Maria", "city": "Lisbon"}', None),
        ('```json\n{"name": "remember", ', 0),
        ('[{"name": "remember", ', 0),
        ('{"function": {', 0),
        ('Sure: {"name": "remember", "arguments": {}}', None),  # bare calls count only at the start
        ("It is sunny.", None),
        ("<tool_c", None),
    ],
)
def test_where_a_call_opens(text: str, opening: int | None) -> None:
    assert call_opening(text, TOOLS) == opening


@given(st.lists(st.sampled_from([*CALL_PIECES, '{"name": "Maria", "city": "L"}']), max_size=6))
def test_a_call_opens_after_everything_already_shown(pieces: list[str]) -> None:
    # The offline model drops a call's text from its opening on: none of it may have been shown.
    text = "".join(pieces)
    shown = 0
    for end in range(len(text) + 1):
        opening = call_opening(text[:end], TOOLS)
        if opening is not None:
            assert opening >= shown
            break
        shown = max(shown, hold_index(text[:end]))
