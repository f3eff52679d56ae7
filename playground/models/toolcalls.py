"""Tool calls written as text by a small model, turned into real calls.

Qwen2.5 is trained to answer with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks,
but a 0.5B model drifts: it drops the tags and writes a bare JSON object, wraps it in a ```json fence,
writes ``args`` instead of ``arguments``, gives the arguments as a JSON string, or runs on after the
object. :func:`parse_tool_calls` accepts those variants for tools that are bound, and leaves anything
it cannot read as a call (unknown tool, malformed JSON) in the content, so nothing the model wrote is
silently lost. :func:`hold_index` tells a streaming caller how much of a partial reply is safe to show
before it is known whether the reply is a tool call, and :func:`call_opening` where a partial reply
has certainly started one (the point from which the offline model's grammar takes over).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from memory.rules.conclusions import OPEN_TAG

CLOSE_TAG = "</tool_call>"

# A block ends at its closing tag, at the next opening tag (the model forgot to close it) or at the end.
_BLOCK = re.compile(
    re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|(?=" + re.escape(OPEN_TAG) + r")|\Z)",
    re.DOTALL,
)
_FENCE = re.compile(r"\A```[ \t]*(?:json)?[ \t]*\n?(.*?)(?:\n?```|\Z)", re.DOTALL | re.IGNORECASE)
_ARGUMENT_KEYS = ("arguments", "args", "parameters")
# The start of a bare call, up to the point where it is clear: the name and what follows it.
_BARE_OPENING = re.compile(
    r"\s*(?:```[ \t]*(?:json)?[ \t]*\n?\s*)?(?:\[\s*)?\{\s*(?:"
    r'(?P<function>"function"\s*:\s*\{)'
    r'|"name"\s*:\s*"(?P<name>(?:[^"\\]|\\.)*)"(?:\s*(?:\}|,\s*"(?P<key>(?:[^"\\]|\\.)*)"))?)',
    re.IGNORECASE,
)
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ParsedReply:
    content: str
    tool_calls: list[ParsedToolCall] = field(default_factory=list)


def parse_tool_calls(text: str, tool_names: Collection[str], *, allow_bare: bool = True) -> ParsedReply:
    """The calls to bound tools in ``text``, and the text that is left once they are taken out.

    ``allow_bare`` accepts a reply that is nothing but a JSON call object (optionally fenced); a
    streaming caller that has already shown the start of the reply passes False for the rest.
    """
    if not tool_names:
        return ParsedReply(content=text)
    if OPEN_TAG in text:
        return _parse_tagged(text, tool_names)
    if allow_bare:
        bare = _parse_bare(text, tool_names)
        if bare is not None:
            return bare
    return ParsedReply(content=text)


def hold_index(text: str) -> int:
    """How much of a partial reply can be shown now: the rest might become a tool call.

    Only ever grows as ``text`` grows, so a streaming caller never has to take back what it showed.
    A reply that opens with ``{``, ``[{`` or a json fence is held whole; otherwise text is held from a
    ``<tool_call>`` tag, or from a trailing fragment that could still grow into one.
    """
    head = text.lstrip()
    if _may_open_call(head):
        return 0
    if "```".startswith(head):
        return 0  # "`" or "``": could still become a fence
    if head.startswith("```"):
        after = head[3:].lstrip(" \t")
        if "json".startswith(after.lower()):
            return 0  # "```", "```js": could still become a json fence
        if after[:4].lower() == "json":
            after = after[4:]
        if _may_open_call(after.lstrip()):
            return 0
    found = text.find(OPEN_TAG)
    if found >= 0:
        return found
    # A tag split across tokens: hold "<tool_c" until the next token settles it.
    for size in range(min(len(OPEN_TAG) - 1, len(text)), 0, -1):
        if text.endswith(OPEN_TAG[:size]):
            return len(text) - size
    return len(text)


def call_opening(text: str, tool_names: Collection[str]) -> int | None:
    """Where a partial reply starts a tool call, once that is certain; None while it is not.

    A ``<tool_call>`` tag opens one anywhere. At the start of the reply (optionally in a json fence
    or a list), so does a JSON object in the call's shape: ``{"function": {`` or ``{"name": "X"``
    where X is a bound tool or the next key is an arguments key. ``{"name": "Maria", "city": ...}``
    is data, not a call. The position is where the call's text begins: the tag, or the fence,
    bracket or brace at the start.
    """
    bare = _BARE_OPENING.match(text)
    if bare and (
        bare.group("function")
        or bare.group("name") in tool_names
        or (bare.group("key") or "") in _ARGUMENT_KEYS
    ):
        return len(text) - len(text.lstrip())
    found = text.find(OPEN_TAG)
    return found if found >= 0 else None


def _may_open_call(text: str) -> bool:
    """Whether ``text`` (stripped on the left) is empty or could be the start of a JSON call."""
    if not text or text.startswith("{"):
        return True
    # "[" opens a list of calls only if an object follows; "[see](...)" is a markdown link.
    rest = text[1:].lstrip()
    return text.startswith("[") and (not rest or rest.startswith("{"))


def _parse_tagged(text: str, tool_names: Collection[str]) -> ParsedReply:
    calls: list[ParsedToolCall] = []
    kept: list[str] = []
    position = 0
    for match in _BLOCK.finditer(text):
        kept.append(text[position : match.start()])
        found = _calls_in(match.group(1), tool_names)
        if found:
            calls.extend(found)
        else:
            kept.append(match.group(0))  # not a call we can make: leave it for the reader
        position = match.end()
    kept.append(text[position:])
    return _reply("".join(kept), calls)


def _parse_bare(text: str, tool_names: Collection[str]) -> ParsedReply | None:
    body = text.strip()
    after_fence = ""
    fence = _FENCE.match(body)
    if fence:
        body, after_fence = fence.group(1).strip(), body[fence.end() :]
    if not body.startswith(("{", "[")):
        return None
    try:
        value, end = _decoder.raw_decode(body)
    except ValueError:
        return None
    calls = _as_calls(value, tool_names)
    # More objects may follow the first, one call each (the model's idea of "several calls").
    rest = body[end:].lstrip(" \t\r\n,")
    while calls and rest.startswith("{"):
        try:
            value, end = _decoder.raw_decode(rest)
        except ValueError:
            break
        more = _as_calls(value, tool_names)
        if not more:
            break
        calls.extend(more)
        rest = rest[end:].lstrip(" \t\r\n,")
    if not calls:
        return None
    # A closing tag with no opening one: the model half-remembered the format.
    return _reply(rest.removeprefix(CLOSE_TAG) + after_fence, calls)


def _calls_in(block: str, tool_names: Collection[str]) -> list[ParsedToolCall]:
    """The calls in the body of one ``<tool_call>`` block; trailing junk after the JSON is ignored."""
    body = block.strip()
    fence = _FENCE.match(body)
    if fence:
        body = fence.group(1).strip()
    start = body.find("{")
    if start < 0:
        return []
    try:
        value, _ = _decoder.raw_decode(body[start:])
    except ValueError:
        return []
    return _as_calls(value, tool_names)


def _as_calls(value: Any, tool_names: Collection[str]) -> list[ParsedToolCall]:
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        call = _as_call(item, tool_names)
        if call is None:
            return []  # a list is a list of calls only if every element is one
        calls.append(call)
    return calls


def _as_call(value: Any, tool_names: Collection[str]) -> ParsedToolCall | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # the OpenAI wire shape
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    present = [key for key in _ARGUMENT_KEYS if key in value]
    if not present:
        # A call object with no arguments key at all: only the tool name and nothing else is a call.
        return ParsedToolCall(name=name, args={}) if set(value) == {"name"} else None
    args = value[present[0]]
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None
    return ParsedToolCall(name=name, args=args)


def _reply(content: str, calls: list[ParsedToolCall]) -> ParsedReply:
    if not calls:
        return ParsedReply(content=content)
    # A small model often repeats the very same call several times in one reply; run it once.
    unique: list[ParsedToolCall] = []
    for call in calls:
        if call not in unique:
            unique.append(call)
    content = content.strip()
    # What a model leaves around its calls is often just stray fences or brackets: not an answer.
    if not any(ch.isalnum() for ch in content):
        content = ""
    return ParsedReply(content=content, tool_calls=unique)
