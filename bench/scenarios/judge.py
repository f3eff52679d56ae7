"""The blinded judge: one call per transcript, lane names removed, in a shuffled order, with two
control transcripts written by hand among them.

The judge sees what the user said and what the assistant answered, conversation by conversation, and
the records the scenario's tool returns; never which arm answered, nor its tool calls. Per scenario
and run the arms' transcripts and the two controls (a careful assistant's replies, and the same
replies keeping the value the user replaced) are shuffled with a seeded generator and labelled
"Transcript 1" to "Transcript 6" in that order. If the judge cannot tell the two controls apart on
`latest`, its grades of the arms mean little: the report shows the controls beside the arms.

It grades by calling a `grade` tool the call must be made to, so a small model's grades arrive as
three integers from 1 to 5 (the offline model writes a forced call under a grammar); a reply without
the call is parsed for the same three numbers, and a grade neither way yields is left empty.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from bench.scenarios.script import Scenario

DIMENSIONS = ("correctness", "latest", "grounding")
CONTROLS = ("control-gold", "control-stale")
#: a reply longer than this is cut in the transcript the judge reads (the offline judge reads 4,096 tokens)
REPLY_CHARS = 600

JUDGE_SYSTEM = (
    "You grade an assistant's replies to a user. You are strict and you judge only from the text "
    "you are given."
)

JUDGE_PROMPT = """The user and an assistant talked in {conversations} separate conversations. The assistant started each conversation without seeing the earlier ones: it knew them only through its memory.

Records the assistant could read with its {tool} tool:
{records}

The transcript ({label}):
{transcript}

Grade the assistant's LAST reply, each on a scale from 1 (worst) to 5 (best):
- correctness: it answers the user's last message correctly, given everything the user said and the records above.
- latest: it uses the user's latest information; where the user corrected a value, it uses the new value, not the one it replaced.
- grounding: everything it states comes from what the user said or from the records above; nothing is invented.

Call the grade tool with the three grades."""

# lane and tool names that would tell the judge which arm answered
_REVEALING = re.compile(
    r"\b(stock|beads|langmem|langgraph|postgresstore|manage_memory|search_memory|remember_fact|"
    r"pin_fact|recall_from_subagents|conclude_task|delegate_research)\b",
    re.IGNORECASE,
)
Grade = Literal[1, 2, 3, 4, 5]


class GradeCall(BaseModel):
    """Record the three grades of the assistant's last reply."""

    correctness: Grade = Field(description="1 (worst) to 5 (best)")
    latest: Grade = Field(description="1 (worst) to 5 (best)")
    grounding: Grade = Field(description="1 (worst) to 5 (best)")


GRADE_TOOL = {
    "type": "function",
    "function": {
        "name": "grade",
        "description": GradeCall.__doc__,
        "parameters": GradeCall.model_json_schema(),
    },
}


def blind(text: str) -> str:
    """A reply with the words that name a lane or its memory tools masked."""
    return _REVEALING.sub("[...]", text)


def transcript(scenario: Scenario, replies: Sequence[str]) -> str:
    """The user's messages and the replies, conversation by conversation, replies blinded and cut."""
    lines: list[str] = []
    conversation = 0
    for step, reply in zip(scenario.steps, replies, strict=True):
        if step.conversation != conversation:
            conversation = step.conversation
            lines += [""] if lines else []
            lines.append(f"Conversation {conversation}")
        shown = " ".join(blind(reply).split())
        if len(shown) > REPLY_CHARS:
            shown = shown[:REPLY_CHARS].rstrip() + " [cut]"
        lines.append(f"User: {step.text}")
        lines.append(f"Assistant: {shown or '(no reply)'}")
    return "\n".join(lines)


def judge_prompt(scenario: Scenario, replies: Sequence[str], label: str) -> str:
    return JUDGE_PROMPT.format(
        conversations=scenario.steps[-1].conversation,
        tool=scenario.tool_name,
        records="\n".join(scenario.records.values()),
        label=label,
        transcript=transcript(scenario, replies),
    )


def control_replies(scenario: Scenario, which: str) -> list[str]:
    return [step.gold if which == "control-gold" else step.stale for step in scenario.steps]


@dataclass(frozen=True)
class Assignment:
    """One transcript's place in the judge's order: its label, and who wrote it (kept from the judge)."""

    order: int
    label: str
    subject: str


def shuffled(subjects: Sequence[str], scenario: str, run: int, seed: int) -> list[Assignment]:
    """The subjects in a seeded random order, labelled by position."""
    order = list(subjects)
    random.Random(f"{seed}:{scenario}:{run}").shuffle(order)
    return [Assignment(i, f"Transcript {i}", subject) for i, subject in enumerate(order, 1)]


_NUMBER = {dim: re.compile(rf'"?{dim}"?\s*[:=]\s*"?([1-5])\b', re.IGNORECASE) for dim in DIMENSIONS}


def parse_grades(reply: AIMessage) -> dict[str, int | None]:
    """The grades from the `grade` call, else from numbers written in the text; None where missing."""
    for call in reply.tool_calls:
        if call["name"] == "grade":
            args = call["args"]
            return {dim: _grade(args.get(dim)) for dim in DIMENSIONS}
    text = reply.text
    found = {dim: _NUMBER[dim].search(text) for dim in DIMENSIONS}
    return {dim: int(match[1]) if match else None for dim, match in found.items()}


def _grade(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 1 <= number <= 5 else None


def grade(model: BaseChatModel, prompt: str) -> tuple[dict[str, int | None], str]:
    """One judge call: the grades and what the judge wrote (its call's arguments, or its text)."""
    messages: list[BaseMessage] = [SystemMessage(JUDGE_SYSTEM), HumanMessage(prompt)]
    try:
        bound = model.bind_tools([GRADE_TOOL], tool_choice="grade")
    except NotImplementedError:  # a model that binds no tools: the grades from its text
        bound = model
    reply = bound.invoke(messages)
    if not isinstance(reply, AIMessage):
        return dict.fromkeys(DIMENSIONS), str(reply)
    said = json.dumps(reply.tool_calls[0]["args"]) if reply.tool_calls else reply.text
    return parse_grades(reply), said[:300]


def scripted_judge() -> BaseChatModel:
    """A rule in place of the judge, for the harness's tests: 1 for every grade of a transcript whose
    last reply is empty, 4 otherwise."""
    from memory.scripted import ScriptedChatModel, calls, tool_call

    def rule(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1].text.rsplit("Assistant:", 1)[-1]
        value = 1 if "(no reply)" in last.split("\n", 1)[0] else 4
        return calls(tool_call("grade", **dict.fromkeys(DIMENSIONS, value)))

    return ScriptedChatModel(fallback=rule)


def judge_model(spec: str) -> BaseChatModel:
    """The judge as `--judge-model` names it, chosen the way the playground chooses its model: a
    model spec (`local` / `offline`, `ollama:<name>`, `openai:<name>`, ...), or `scripted` (a rule,
    for tests). Temperature 0."""
    from memory.errors import ConfigurationError
    from memory.model_spec import parse_model_spec
    from playground.models.select import select_chat_model
    from playground.models.settings import ModelSettings

    if spec == "scripted":
        return scripted_judge()
    try:
        parsed = parse_model_spec(spec)
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from exc
    if parsed.provider in ("auto", "scripted"):
        raise ValueError(f"a judge model names its model, not {spec!r}")
    return select_chat_model(ModelSettings(model=str(parsed), temperature=0)).chat_model
