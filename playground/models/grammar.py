"""A llama.cpp grammar (GBNF) that admits only well-formed calls of the tools bound to a request.

A 0.5B model that decides to call a tool often gets the call wrong: a tool that does not exist, a
required argument left out, ``"id": "budget"`` where the schema asks for a UUID. Once the offline model
has opened a call, :func:`tool_call_gbnf` constrains the rest of it: the object must be
``{"name": <a bound tool>, "arguments": <that tool's arguments>}`` with the arguments valid for that
tool's JSON schema (required properties present, types, enums and string formats such as ``uuid``
respected, no properties the schema does not name), followed by the closing tag.

The schema-to-grammar work is llama.cpp's own converter (``llama_cpp.llama_grammar``), given one
schema: a union with one object per tool, each naming its tool as a constant. What is ours: a UUID
may only be one the conversation holds (see :func:`tool_call_gbnf`); JSON strings may not hold raw
control characters (the converter allows them, and a strict JSON parser refuses the result); two
tools' definitions of the same name stay apart; and a tool whose schema the converter cannot read, or
whose rules llama.cpp cannot parse, still gets its name constrained, with any JSON object for its
arguments.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from playground.models.engine import import_llama_cpp
from playground.models.toolcalls import CLOSE_TAG

_log = logging.getLogger(__name__)

# The name the call object's rule is given; ``root`` adds the closing tag after it.
_CALL_RULE = "tool-call"

# A JSON string character: anything but a quote, a backslash or a control character, or an escape.
_CHAR_RULE = r'char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_DEF_KEYS = ("$defs", "definitions")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_UUID_FORMAT = re.compile(r"^uuid[1-5]?$")  # the formats llama.cpp's converter reads as a UUID


def tool_call_gbnf(tools: Sequence[Mapping[str, Any]], known_ids: Iterable[str] = ()) -> str:
    """The grammar of one call of one of ``tools`` (OpenAI-format tool dicts), as Qwen2.5 writes it.

    It starts at the call object (the ``<tool_call>`` tag and the newline after it come before) and
    ends with the closing tag; once it is complete llama.cpp lets the model only end its turn.
    Raises ValueError if llama.cpp could not parse it (a tool name that needs escaping).

    A UUID names something that exists, so a UUID-formatted value may only be one of ``known_ids``
    (the UUIDs the conversation holds, see :func:`uuids_in`); with none known, an optional UUID
    property is left out and only a required one may be any UUID. A small model otherwise invents
    one (``"12345678-1234-..."``) that the schema accepts and the tool cannot use.
    """
    if not tools:
        raise ValueError("a tool-call grammar needs at least one tool")
    # Keys keep their order: the grammar asks for properties in the order the schema lists them,
    # which is the order the model reads in its prompt.
    return _gbnf(json.dumps(list(tools), ensure_ascii=False), tuple(dict.fromkeys(known_ids)))


def uuids_in(text: str, limit: int = 64) -> list[str]:
    """The distinct UUIDs in ``text``, the latest ``limit`` of them, in the order they last appear."""
    found = [match.group(0).lower() for match in _UUID.finditer(text)]
    return list(dict.fromkeys(reversed(found)))[:limit][::-1]


@functools.lru_cache(maxsize=64)
def _gbnf(tools_json: str, known_ids: tuple[str, ...]) -> str:
    tools = json.loads(tools_json)
    alternatives, defs = [], {}
    for index, tool in enumerate(tools):
        function = tool.get("function", tool)
        parameters = function.get("parameters") or {}
        arguments, tool_defs = _readable_arguments(function["name"], parameters, index, known_ids)
        defs.update(tool_defs)
        alternatives.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": arguments},
                "required": ["name", "arguments"],
            }
        )
    schema: dict[str, Any] = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    if defs:
        schema["$defs"] = defs
    top, rules = _convert(schema)
    gbnf = f'root ::= {top} "\\n{CLOSE_TAG}"\n{rules}'
    if not _parses(gbnf):  # each tool's arguments parsed on their own: a tool's name is what is left
        raise ValueError(
            f"llama.cpp cannot parse the grammar of the tools {[t.get('function', t)['name'] for t in tools]}"
        )
    return gbnf


def _readable_arguments(
    name: str, parameters: Mapping[str, Any], index: int, known_ids: tuple[str, ...]
) -> tuple[Any, dict[str, Any]]:
    """The tool's arguments schema with its definitions taken out (and renamed, so that two tools'
    definitions of the same name do not meet) and its UUIDs held to the known ones, or any object if
    the converter cannot read it."""
    arguments = copy.deepcopy(dict(parameters))
    defs: dict[str, Any] = {}
    for key in _DEF_KEYS:
        for def_name, definition in (arguments.pop(key, None) or {}).items():
            defs[f"t{index}_{def_name}"] = definition
    arguments = _known_uuids_only(_renamed_refs(arguments, index), known_ids)
    defs = {key: _known_uuids_only(_renamed_refs(value, index), known_ids) for key, value in defs.items()}
    try:
        top, rules = _convert({**arguments, "$defs": defs} if defs else arguments)
        if not _parses(f"root ::= {top}\n{rules}"):
            raise ValueError("llama.cpp cannot parse the rules made of it")  # a quote in a property name
    # The converter asserts, or raises ValueError, KeyError...: each of them means it cannot.
    except Exception as e:
        _log.warning("tool %s: its arguments schema has no grammar (%s); any JSON object is allowed", name, e)
        return {"type": "object"}, {}
    return arguments, defs


def _parses(gbnf: str) -> bool:
    """Whether llama.cpp's grammar parser takes ``gbnf``: a grammar it refuses must never reach the
    sampler. Parsing needs no vocabulary (only token references would)."""
    llama_cpp = import_llama_cpp()
    sampler = llama_cpp.llama_sampler_init_grammar(None, gbnf.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def _known_uuids_only(schema: Any, known_ids: tuple[str, ...]) -> Any:
    """``schema`` with each UUID held to ``known_ids``. Where none is known, a UUID alternative of an
    ``anyOf`` that has others is dropped, and so is an optional property left with no value but null."""
    restricted = _restrict(schema, known_ids)
    return schema if restricted is None else restricted


def _restrict(schema: Any, known_ids: tuple[str, ...]) -> Any:
    """As :func:`_known_uuids_only`; None when no value of ``schema`` is left."""
    if not isinstance(schema, dict):
        return schema
    if schema.get("type", "string") == "string" and _UUID_FORMAT.match(str(schema.get("format", ""))):
        return {"enum": list(known_ids)} if known_ids else None
    result = dict(schema)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            kept = [alt for alt in (_restrict(alt, known_ids) for alt in schema[key]) if alt is not None]
            if not kept:
                return None
            result[key] = kept
    if isinstance(schema.get("properties"), dict):
        required = set(schema.get("required") or ())
        properties = {}
        for prop, prop_schema in schema["properties"].items():
            narrowed = _restrict(prop_schema, known_ids)
            if prop in required:
                properties[prop] = prop_schema if narrowed is None else narrowed  # any UUID, not no call
            elif narrowed is not None and narrowed != prop_schema and _only_null(narrowed):
                continue  # "id": null says no more than leaving it out
            elif narrowed is not None:
                properties[prop] = narrowed
        result["properties"] = properties
    if isinstance(schema.get("items"), dict):
        result["items"] = _known_uuids_only(schema["items"], known_ids)
    return result


def _only_null(schema: dict[str, Any]) -> bool:
    alternatives = schema.get("anyOf") or schema.get("oneOf") or [schema]
    return all(isinstance(alt, dict) and alt.get("type") == "null" for alt in alternatives)


def _renamed_refs(value: Any, index: int) -> Any:
    if isinstance(value, list):
        return [_renamed_refs(item, index) for item in value]
    if not isinstance(value, dict):
        return value
    renamed = {key: _renamed_refs(item, index) for key, item in value.items()}
    ref = renamed.get("$ref")
    if isinstance(ref, str):
        for key in _DEF_KEYS:
            prefix = f"#/{key}/"
            if ref.startswith(prefix):
                renamed["$ref"] = f"#/$defs/t{index}_{ref.removeprefix(prefix)}"
    return renamed


def _convert(schema: dict[str, Any]) -> tuple[str, str]:
    """llama.cpp's rules for ``schema``, and the name of the rule that matches the whole of it."""
    import_llama_cpp()
    from llama_cpp.llama_grammar import SchemaConverter

    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(copy.deepcopy(schema), _CALL_RULE)
    top = converter.visit(resolved, _CALL_RULE)
    lines = converter.format_grammar().splitlines()
    return top, "\n".join(_CHAR_RULE if line.startswith("char ::= ") else line for line in lines)
