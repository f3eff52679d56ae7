"""The playground's scripted backend: a deterministic model that plays each lane by simple rules.

With ``BEADS_MODEL_BACKEND=scripted`` (or ``PLAYGROUND_MODEL_BACKEND=scripted``) both lanes get this
model, so the app, its tests and the walkthrough run with no model at all. The rules are what a
careful small model would do with each lane's tools:

- our lane answers a question from the Memory section of its system prompt, and records a correction
  with ``remember_fact``, superseding the remembered fact it corrects;
- the stock lane calls ``search_memory`` before answering a question and ``manage_memory`` when the
  user states something, then answers from what the tool returned.

A rule only quotes remembered text that shares a content word with the question, so an unrelated
question gets "nothing relevant" rather than whatever happened to be stored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk

from memory.doors.subagents import SUBAGENT_PROMPT
from memory.scripted import ScriptedChatModel, calls, tool_call
from playground.comparison.lanes import STOCK_MEMORY_PROMPT

_WORD = re.compile(r"[a-z0-9$]+")
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be but by can could did do does for from had has have how i if in is it its "
        "me my of on or our should so that the their them then there these they this to us was we were "
        "what when where which who why will with would you your correction actually update please",
    )
)
_QUESTION_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|can|could|should|would|is|are|do|does|did|will)\b",
    re.IGNORECASE,
)
_CORRECTION = re.compile(
    r"^\s*(correction|actually|update|to correct|scratch that)\b[\s,:;-]*", re.IGNORECASE
)
# "- [id] (when) text (note)": the careful reader quotes the text alone, not the date nor the note
_MEMORY_LINE = re.compile(
    r"^- \[([0-9a-f]{8})\] (?:\((?:today \d\d:\d\d|yesterday|\d+ days ago|\d{1,2} \w{3} \d{4})\) )?"
    r"(.*?)(?: \((?:updated|from sub-agent|from a tool result|an older line)[^)]*\))?$"
)

ACK = "Noted, I will keep that in mind."
ACK_CORRECTION = "Noted: I have updated that."
NOTHING = "Nothing relevant to that is in memory."
#: how every research sub-agent's prompt begins, in both lanes (see playground.comparison.lanes, memory.doors.subagents)
_SUBAGENT_OPENING = SUBAGENT_PROMPT.split(".", 1)[0]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 1}


def is_question(text: str) -> bool:
    stripped = text.strip()
    return stripped.endswith("?") or bool(_QUESTION_START.match(stripped))


def is_correction(text: str) -> bool:
    return bool(_CORRECTION.match(text))


def corrected_claim(text: str) -> str:
    """The claim a correction states: 'Correction: our budget is $120k.' -> 'Our budget is $120k.'"""
    claim = _CORRECTION.sub("", text, count=1).strip()
    return claim[:1].upper() + claim[1:] if claim else text.strip()


def memory_lines(system: str) -> list[tuple[str, str]]:
    """(short id, text) of each fact in the Memory section, in the order it was ranked."""
    if "## Memory" not in system:
        return []
    block = system.split("## Memory", 1)[1]
    found = []
    for line in block.splitlines():
        match = _MEMORY_LINE.match(line.strip())
        if match:
            found.append((match[1], match[2]))
    return found


def best_overlap(query: str, texts: Sequence[str]) -> list[int]:
    """Indexes of the texts that share content words with `query`, most shared first (stable)."""
    wanted = content_words(query)
    scored = [(len(wanted & content_words(t)), i) for i, t in enumerate(texts)]
    return [i for score, i in sorted(scored, key=lambda s: (-s[0], s[1])) if score > 0]


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)


def _last_user(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return _text(message).strip()
    return ""


def beads_rule(messages: Sequence[BaseMessage], system: str) -> AIMessage | str:
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return ACK_CORRECTION if last.name == "remember_fact" else "Done."
    user = _last_user(messages)
    facts = memory_lines(system)
    if is_correction(user):
        ranked = best_overlap(user, [text for _, text in facts])
        claim = corrected_claim(user)
        if ranked:
            return calls(tool_call("remember_fact", fact=claim, supersedes=facts[ranked[0]][0]))
        return calls(tool_call("remember_fact", fact=claim))
    if is_question(user):
        ranked = best_overlap(user, [text for _, text in facts])
        return f"From memory: {facts[ranked[0]][1]}" if ranked else NOTHING
    return ACK


def stock_rule(messages: Sequence[BaseMessage]) -> AIMessage | str:
    last = messages[-1] if messages else None
    user = _last_user(messages)
    if isinstance(last, ToolMessage):
        if last.name != "search_memory":
            return ACK if last.name == "manage_memory" else "Done."
        try:
            items = json.loads(_text(last))
        except ValueError:
            return NOTHING
        contents = [
            str((item.get("value") or {}).get("content", "")) for item in items if isinstance(item, dict)
        ]
        ranked = best_overlap(user, contents)
        return "From memory: " + " ".join(contents[i] for i in ranked) if ranked else NOTHING
    if is_question(user):
        return calls(tool_call("search_memory", query=user))
    return calls(tool_call("manage_memory", content=user, action="create"))


def lane_rules(messages: list[BaseMessage]) -> AIMessage | str:
    """The reply for whichever lane is asking, told apart by its system prompt."""
    system = _text(messages[0]) if messages and isinstance(messages[0], SystemMessage) else ""
    if system.startswith(_SUBAGENT_OPENING):
        return "(scripted) The research sub-agent has nothing to add."
    if STOCK_MEMORY_PROMPT in system:
        return stock_rule(messages)
    return beads_rule(messages, system)


class PacedScriptedModel(ScriptedChatModel):
    """The scripted model, optionally pausing between tokens so a reply visibly streams."""

    token_delay: float = 0.0

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in super()._stream(messages, stop, run_manager, **kwargs):
            if self.token_delay and chunk.message.content:
                time.sleep(self.token_delay)
            yield chunk
        # the base class keeps every prompt for tests to inspect; a long-running app keeps a few
        del self._prompts[:-50]


def scripted_lane_model(token_delay_ms: int = 0) -> PacedScriptedModel:
    return PacedScriptedModel(fallback=lane_rules, token_delay=token_delay_ms / 1000)
