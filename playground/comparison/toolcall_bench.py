"""How well the chat model calls the lanes' tools: ``python -m playground.comparison.toolcall_bench``.

Each prompt is sent once to each lane's model with that lane's real tools bound (the playground's
set: memory tools, web search, the research sub-agent) under the lane's system prompt, one model call
and no agent loop. A call counts as valid when it names a bound tool and the tool's own argument
schema accepts its arguments (what the agent's tool node checks before it runs the tool). For the
stock lane, a valid manage_memory call is also run against an empty in-memory LangMem store:
LangMem refuses some schema-valid calls (an id on "create", no id on "update"), and only a stored
memory helps the lane. No tool is run otherwise: nothing here touches the network or a database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from playground.models.chatml import text_of
from playground.models.select import select_chat_model
from playground.models.settings import ModelSettings

Lane = Literal["stock", "beads"]

#: What people type into the playground: facts to keep, questions that need them, corrections,
#: web and research tasks, and plain chat that needs no tool at all.
PROMPTS = (
    "Our budget for the new apartment is 1,200,000 euros. Please remember that.",
    "I'm allergic to peanuts, keep that in mind whenever you suggest recipes.",
    "What was our budget again?",
    "Correction: the budget went up to 1.5 million euros.",
    "Forget what I told you about my peanut allergy, it was a mistake.",
    "Search the web for the current mortgage interest rates in Portugal.",
    "Research the best neighbourhoods in Lisbon for a family with two children.",
    "Always answer me in British English from now on.",
    "Hi! How are you today?",
    "What is 12 times 7?",
)


@dataclass
class Reply:
    lane: str
    grammar: bool | None
    prompt: int
    seconds: float
    calls: list[dict[str, Any]] = field(default_factory=list)
    content: str = ""

    @property
    def valid_calls(self) -> int:
        return sum(1 for call in self.calls if call["valid"])


def lane_tools(lane: Lane, model: BaseChatModel) -> tuple[str, list[BaseTool]]:
    """The system prompt and the tools a lane's model is given, in the order it sees them."""
    from playground.comparison.lanes import (
        CORE_SYSTEM_PROMPT,
        RESEARCH_NAME,
        STOCK_MEMORY_PROMPT,
        beads_prompt,
        stock_tools,
    )
    from playground.comparison.websearch import web_search_tool

    web = [web_search_tool()]
    if lane == "stock":
        return f"{CORE_SYSTEM_PROMPT}\n\n{STOCK_MEMORY_PROMPT}", stock_tools(model, web)
    from memory.doors.subagents import make_subagent_tool
    from memory.doors.tools import memory_tools
    from memory.graph.store import FactStore
    from memory.model import Namespace

    # Only the schemas are used here; these tools are never run, so they get no store.
    store, root = cast(FactStore, None), cast(Namespace, None)
    tools = [
        *memory_tools(store, root, "orchestrator", "orchestrator"),  # the middleware's, bound first
        *web,
        make_subagent_tool(store, root, model, web, name=RESEARCH_NAME),
    ]
    return beads_prompt(memory_tools=True), tools


def check_call(call: dict[str, Any], tools: Sequence[BaseTool]) -> dict[str, Any]:
    """The call as a row: whether it names a bound tool and the tool's schema accepts the args."""
    row: dict[str, Any] = {"name": call["name"], "args": call["args"], "valid": False, "why": ""}
    tool = next((t for t in tools if t.name == call["name"]), None)
    if tool is None:
        row["why"] = "no such tool"
        return row
    try:
        tool.tool_call_schema.model_validate(call["args"])  # type: ignore[union-attr]
    except ValidationError as e:
        row["why"] = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        return row
    row["valid"] = True
    if call["name"] == "manage_memory":
        row["stored"], row["why"] = _langmem_outcome(call["args"])
    return row


def _langmem_outcome(args: dict[str, Any]) -> tuple[bool, str]:
    """Whether LangMem, given the call, leaves a memory in an empty store; and what it said."""
    from langgraph.store.memory import InMemoryStore
    from langmem import create_manage_memory_tool

    store = InMemoryStore()
    try:
        said = str(create_manage_memory_tool(namespace=("smoke",), store=store).invoke(args))
    except ValueError as e:  # LangMem's own refusals: an id on create, none on update or delete
        return False, f"LangMem refused: {e}"
    # An update under an id nobody was given stores a new memory all the same; a delete stores none.
    return bool(store.search(("smoke",))), said


def run_lane(
    models: Mapping[bool | None, BaseChatModel], lane: Lane, prompts: Sequence[str] = PROMPTS
) -> list[Reply]:
    """Each prompt once per model (keyed by its grammar setting, None where it has none). The
    models take turns prompt by prompt, first one then the other going first, so that a busy
    machine and the model's prompt cache favour neither; an unrecorded first call reads the
    lane's system prompt and tools into that cache, which no reply then pays for."""
    system, tools = lane_tools(lane, next(iter(models.values())))
    bound = {grammar: model.bind_tools(tools) for grammar, model in models.items()}
    next(iter(bound.values())).invoke([SystemMessage(system), HumanMessage("Hello.")])
    replies = []
    for index, prompt in enumerate(prompts):
        turns = list(bound.items())
        for grammar, model in turns[::-1] if index % 2 else turns:
            started = time.perf_counter()
            message = model.invoke([SystemMessage(system), HumanMessage(prompt)])
            reply = Reply(lane, grammar, index, round(time.perf_counter() - started, 2))
            reply.calls = [check_call(call, tools) for call in getattr(message, "tool_calls", [])]
            reply.content = text_of(message)
            replies.append(reply)
    return replies


def summarise(replies: Sequence[Reply]) -> dict[str, Any]:
    calls = [call for reply in replies for call in reply.calls]
    managed = [call for call in calls if call["name"] == "manage_memory" and call["valid"]]
    text_only = [r for r in replies if not r.calls]
    return {
        "replies": len(replies),
        "calls": len(calls),
        "valid": sum(1 for call in calls if call["valid"]),
        "unknown tool": sum(1 for call in calls if call["why"] == "no such tool"),
        "free text": sum(1 for r in text_only if r.content.strip()),
        # what a reader of the lane sees as an answer but was meant as a call the parser could not read
        "call-like text": sum(1 for r in text_only if _looks_like_a_call(r.content)),
        "stored": sum(1 for call in managed if call.get("stored")),
        "manage_memory valid": len(managed),
        "seconds per model call": _seconds([r.seconds for r in replies]),
        "seconds per reply with a call": _seconds([r.seconds for r in replies if r.calls]),
    }


def _seconds(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"mean": round(statistics.fmean(values), 2), "median": round(statistics.median(values), 2)}


def _looks_like_a_call(text: str) -> bool:
    head = text.lstrip().lstrip("`").removeprefix("json").lstrip()
    return "<tool_call>" in text or head.startswith(('{"name"', '[{"name"', '{"function"'))


def run_tool_call_bench(
    settings: ModelSettings, *, grammar: str = "both", temperature: float = 0.0, out: Path | None = None
) -> int:
    modes: list[bool | None] = [None]
    active = select_chat_model(settings)
    if active.backend == "local":
        by_grammar: dict[str, list[bool | None]] = {"on": [True], "off": [False], "both": [False, True]}
        modes = by_grammar[grammar]
    print(f"backend: {active.backend}  model: {active.model_name}  temperature: {temperature}")
    models = {
        mode: _model(
            active.chat_model,
            settings if mode is None else settings.model_copy(update={"local_tool_grammar": mode}),
            temperature,
        )
        for mode in modes
    }
    rows: list[Reply] = []
    for lane in cast(tuple[Lane, ...], ("stock", "beads")):
        replies = run_lane(models, lane)
        rows.extend(replies)
        for mode in modes:
            label = "" if mode is None else f"  grammar {'on' if mode else 'off'}"
            mine = [reply for reply in replies if reply.grammar == mode]
            print(f"{lane}{label}: {json.dumps(summarise(mine))}")
            for reply in mine:
                print(f"  [{reply.prompt}] {reply.seconds:5.1f}s  {_describe(reply)}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with (out / "replies.jsonl").open("w", encoding="utf-8") as handle:
            for reply in rows:
                handle.write(json.dumps(asdict(reply), ensure_ascii=False) + "\n")
    return 0


def _model(chat_model: BaseChatModel, settings: ModelSettings, temperature: float) -> BaseChatModel:
    from playground.models.local import LocalChatModel

    if isinstance(chat_model, LocalChatModel):
        return LocalChatModel(settings=settings, temperature=temperature, seed=0)
    return chat_model


def _describe(reply: Reply) -> str:
    if not reply.calls:
        text = " ".join(reply.content.split())
        return f"text: {text[:100]!r}"
    parts = []
    for call in reply.calls:
        verdict = "valid" if call["valid"] else f"INVALID ({call['why']})"
        if "stored" in call:
            verdict += f", {'stored' if call['stored'] else 'nothing stored'} ({call['why']})"
        parts.append(f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)[:120]}) {verdict}")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m playground.comparison.toolcall_bench",
        description="The playground's prompts of both lanes, each lane's real tools bound, one model call "
        "each: calls made, calls that name a bound tool with arguments it accepts, free-text replies, "
        "seconds per call.",
    )
    parser.add_argument("--backend", choices=["auto", "ollama", "local"], default=None)
    parser.add_argument(
        "--grammar",
        choices=["on", "off", "both"],
        default="both",
        help="offline model only: with the tool-call grammar, without it, or both taking turns",
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="0 is greedy")
    parser.add_argument("--out", type=Path, default=None, help="write replies.jsonl here")
    args = parser.parse_args(argv)
    settings = ModelSettings() if args.backend is None else ModelSettings(model_backend=args.backend)
    return run_tool_call_bench(settings, grammar=args.grammar, temperature=args.temperature, out=args.out)


if __name__ == "__main__":
    sys.exit(main())
