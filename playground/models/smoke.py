"""A quick gate for the configured models: ``python -m playground.models.smoke [--model SPEC]``.

Each check PASS or FAIL with the reason. The tool-call checks, which decide what the playground's
lanes may use (:func:`tool_gate`): (a) asked to use a tool, the model returns a structured call to
it; (b) asked something no tool helps with, it answers without calling one; (c) given a tool's
result, it answers from it in words, not with another call. Then (d) it can answer with a JSON
object of given keys (the shape fact extraction needs), and (e) the embedder that goes with the
backend returns vectors of its declared length. Exits 1 if any fails. A small offline model may well
fail some; that is reported, not papered over.

A model that fails a tool-call check runs the playground's lanes without the research sub-agent and
web search, tools it would call when it should answer; our lane keeps capture and injection (no tool
call needed), the stock lane LangMem's tools (its memory is those calls).

How well a model calls the playground lanes' real tools is measured by the comparison, not here:
``python -m playground.comparison.toolcall_bench``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from memory.rules.conclusions import why_no_answer
from playground.models.chatml import text_of
from playground.models.select import ActiveModel, select_chat_model
from playground.models.settings import ModelSettings

#: the checks the tool gate runs, in order
TOOL_CHECKS = ("tool call", "no needless call", "answer from a tool")
PLAIN_QUESTION = "In one short sentence: why do people tie a knot in a handkerchief?"
TOOL_RESULT = "Paris: 14°C, light rain, wind 20 km/h."

EXTRACTION_KEYS = ("name", "city", "job")
EXTRACTION_PROMPT = (
    "Read the text and reply with only a JSON object with the keys "
    '"name", "city" and "job", and nothing else.\n\n'
    "Text: Maria Lopez works as a nurse. She moved to Lisbon last spring."
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    reason: str
    seconds: float


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


def check_tool_call(model: BaseChatModel) -> tuple[bool, str]:
    reply = model.bind_tools([get_weather]).invoke(
        [HumanMessage("What's the weather in Paris? Use the tool.")]
    )
    for call in reply.tool_calls:
        city = str(call["args"].get("city", ""))
        if call["name"] == "get_weather" and city.strip().lower() == "paris":
            return True, f"get_weather(city={city!r})"
    if reply.tool_calls:
        return False, f"wrong tool call: {[(c['name'], c['args']) for c in reply.tool_calls]}"
    return False, f"no tool call; the reply was {_short(text_of(reply))!r}"


def check_no_needless_call(model: BaseChatModel) -> tuple[bool, str]:
    reply = model.bind_tools([get_weather]).invoke([HumanMessage(PLAIN_QUESTION)])
    if reply.tool_calls:
        return False, f"called {[c['name'] for c in reply.tool_calls]} for a question no tool helps with"
    text = text_of(reply)
    if (why := why_no_answer(text, asked=PLAIN_QUESTION, tool_names=["get_weather"])) is not None:
        return False, f"no answer ({why}): {_short(text)!r}"
    return True, _short(text)


def check_answer_from_tool(model: BaseChatModel) -> tuple[bool, str]:
    asked = "What's the weather in Paris? Use the tool."
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_weather_1", "type": "tool_call"}
    reply = model.bind_tools([get_weather]).invoke(
        [
            HumanMessage(asked),
            AIMessage("", tool_calls=[call]),
            ToolMessage(TOOL_RESULT, tool_call_id="call_weather_1", name="get_weather"),
        ]
    )
    if reply.tool_calls:
        return False, f"called {[c['name'] for c in reply.tool_calls]} again instead of answering"
    text = text_of(reply)
    # said back whole, the result is still no answer; a reply that uses it names its figures
    why = why_no_answer(text, asked=asked, tool_results=[TOOL_RESULT], tool_names=["get_weather"])
    if why is not None:
        return False, f"no answer ({why}): {_short(text)!r}"
    if not any(word in text.lower() for word in ("14", "rain")):
        return False, f"the answer does not use the result: {_short(text)!r}"
    return True, _short(text)


@dataclass(frozen=True)
class ToolGate:
    """What the tool-call checks decided: whether the lanes may offer the model the research
    sub-agent and web search, and the check that failed (or the checks passed), in one line."""

    passed: bool
    reason: str


def tool_gate(model: BaseChatModel) -> ToolGate:
    """Run the tool-call checks (:data:`TOOL_CHECKS`) on `model`, stopping at the first that fails."""
    checks: list[tuple[str, Callable[[BaseChatModel], tuple[bool, str]]]] = [
        ("tool call", check_tool_call),
        ("no needless call", check_no_needless_call),
        ("answer from a tool", check_answer_from_tool),
    ]
    for name, check in checks:
        try:
            passed, reason = check(model)
        except Exception as e:  # a gate reports every failure, whatever raised it
            passed, reason = False, f"{type(e).__name__}: {_short(str(e))}"
        if not passed:
            return ToolGate(False, f"the {name} check failed: {reason}")
    return ToolGate(True, f"the {len(checks)} tool-call checks passed")


def check_extraction(model: BaseChatModel) -> tuple[bool, str]:
    reply = model.invoke([HumanMessage(EXTRACTION_PROMPT)])
    text = text_of(reply).strip()
    body = text
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    start = body.find("{")
    if start < 0:
        return False, f"no JSON object in {_short(text)!r}"
    try:
        value, end = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError as e:
        return False, f"the JSON does not parse ({e.msg}): {_short(text)!r}"
    if not isinstance(value, dict):
        return False, f"expected a JSON object, got {type(value).__name__}"
    missing = [key for key in EXTRACTION_KEYS if key not in value]
    if missing:
        return False, f"missing keys {missing}: {_short(json.dumps(value))}"
    # Accepted, as an extraction parser would, but shown: a model that chats around its JSON wastes tokens.
    extra = len(body.strip()) - (end - start)
    around = f" (plus {extra} characters of other text)" if extra > 0 else ""
    return True, f"{json.dumps(value)}{around}"


def check_embedding(backend: str, settings: ModelSettings) -> tuple[bool, str]:
    from memory.embedders import MiniLMEmbedder, OllamaEmbedder

    # The embedder that goes with the backend: Ollama's own next to an Ollama chat model.
    embedder: Any = (
        OllamaEmbedder(base_url=settings.ollama_base_url) if backend == "ollama" else MiniLMEmbedder()
    )
    vector = embedder.embed(["Maria Lopez works as a nurse in Lisbon."])[0]
    if len(vector) != embedder.dims:
        return False, f"{embedder.name}: {len(vector)} dimensions, expected {embedder.dims}"
    return True, f"{embedder.name}: {len(vector)} dimensions"


def run_checks(active: ActiveModel, settings: ModelSettings) -> list[CheckResult]:
    checks: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
        ("tool call", lambda: check_tool_call(active.chat_model)),
        ("no needless call", lambda: check_no_needless_call(active.chat_model)),
        ("answer from a tool", lambda: check_answer_from_tool(active.chat_model)),
        ("extraction", lambda: check_extraction(active.chat_model)),
        ("embedding", lambda: check_embedding(active.backend, settings)),
    ]
    results = []
    for name, check in checks:
        started = time.perf_counter()
        try:
            passed, reason = check()
        except Exception as e:  # a gate reports every failure, whatever raised it
            passed, reason = False, f"{type(e).__name__}: {e}"
        results.append(CheckResult(name, passed, reason, time.perf_counter() - started))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m playground.models.smoke",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a model spec: offline, ollama:<model>, openai:<model>, anthropic:<model>, provider:model "
        "(default: BEADS_MODEL, else BEADS_MODEL_BACKEND)",
    )
    parser.add_argument("--backend", choices=["auto", "ollama", "local"], default=None)
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.model is not None:
        overrides["model"] = args.model
    if args.backend is not None:
        overrides["model_backend"] = args.backend
    settings = ModelSettings(**overrides)
    active = select_chat_model(settings)
    print(f"model: {active.label}  ({active.note})")
    results = run_checks(active, settings)
    for result in results:
        status = "PASS" if result.passed else "FAIL"
        print(f"{status}  {result.name:<18} {result.seconds:6.1f}s  {result.reason}")
    tools_ok = all(r.passed for r in results if r.name in TOOL_CHECKS)
    print(
        "the playground's lanes may use delegation and web search"
        if tools_ok
        else "the playground's lanes run without delegation and web search (a tool-call check failed)"
    )
    return 0 if all(r.passed for r in results) else 1


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
