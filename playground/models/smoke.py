"""A quick gate for the configured models: ``python -m playground.models.smoke [--backend ...]``.

Three checks, each PASS or FAIL with the reason: (a) the chat model returns a structured tool call,
(b) it can answer with a JSON object of given keys (the shape fact extraction needs), (c) the
embedder that goes with the backend returns vectors of its declared length. Exits 1 if any fails.
A small offline model may well fail (a) or (b); that is reported, not papered over.

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
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from playground.models.chatml import text_of
from playground.models.select import ActiveModel, select_chat_model
from playground.models.settings import ModelSettings

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
    parser.add_argument("--backend", choices=["auto", "ollama", "local"], default=None)
    args = parser.parse_args(argv)
    settings = ModelSettings() if args.backend is None else ModelSettings(model_backend=args.backend)
    active = select_chat_model(settings)
    print(f"backend: {active.backend}  model: {active.model_name}  ({active.note})")
    results = run_checks(active, settings)
    for result in results:
        status = "PASS" if result.passed else "FAIL"
        print(f"{status}  {result.name:<10} {result.seconds:6.1f}s  {result.reason}")
    return 0 if all(r.passed for r in results) else 1


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
