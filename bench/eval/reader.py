"""The reader: a chat model that answers each question from an arm's window, the same prompt for every arm.

`--answer-model offline` is the bundled offline model (playground.models.local, Qwen2.5-Coder-0.5B in
process, greedy; the 1.5B with `offline:qwen2.5-coder-1.5b` or BEADS_LOCAL_MODEL); any other model
spec (`ollama:<model>`, `openai:<model>`, `anthropic:<model>`, any `provider:model`) or a
`<module>:<factory>` is any LangChain chat model (bench.eval.judging.chat_model_from_spec). The prompt asks for a short phrase in the memory's own
words, as LoCoMo's question answering does, and for "not mentioned" when the memory does not say,
the phrase LoCoMo's scorer looks for on unanswerable questions (bench.eval.answer_scores).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from bench.eval.conversation import Question

if TYPE_CHECKING:
    from playground.models.settings import LocalModelName

OFFLINE = "offline"
#: how reports name the offline reader: say what it is, so nobody reads its figures as a strong model's
OFFLINE_LABEL = "offline 0.5B"
#: the parameter count in an offline model's name ("qwen2.5-coder-1.5b-instruct-q4_k_m": 1.5)
_MODEL_SIZE = re.compile(r"-(\d+(?:\.\d+)?)b-")
READER_MAX_TOKENS = 48  # a short phrase; the offline model otherwise explains at length

READER_SYSTEM = (
    "You answer a question about earlier conversations, using only the memory given below. Answer "
    "with a short phrase, in the memory's own words where you can. If the memory does not contain the "
    "answer, reply exactly: not mentioned."
)

_LABEL = re.compile(r"^\s*(?:short\s+)?answer\s*:\s*", re.I)


def reader_prompt(window_text: str, question: Question) -> list[SystemMessage | HumanMessage]:
    """The same prompt for every arm: only the window differs."""
    today = f"Today's date: {question.question_date}\n\n" if question.question_date else ""
    memory = window_text or "(nothing)"
    return [
        SystemMessage(READER_SYSTEM),
        HumanMessage(f"Memory:\n{memory}\n\n{today}Question: {question.question}\nShort answer:"),
    ]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def first_line(reply: str) -> str:
    """The answer itself: the reply's first non-empty line, without an "Answer:" label (small models
    go on to explain, and the explanation would count against F1 as much as a wrong answer)."""
    line = next((line for line in reply.splitlines() if line.strip()), "")
    return _LABEL.sub("", line).strip()


@dataclass(frozen=True)
class Reading:
    answer: str
    reply: str  # what the model wrote, whole
    seconds: float


def read(model: BaseChatModel, window_text: str, question: Question) -> Reading:
    started = time.perf_counter()
    reply = _text(model.invoke(reader_prompt(window_text, question)).content).strip()
    return Reading(first_line(reply), reply, time.perf_counter() - started)


def offline_context(budgets: Sequence[int]) -> int:
    """Context length for windows of up to max(budgets) tokens: the harness counts with MiniLM's
    tokenizer and Qwen's runs longer on the same text, plus the prompt and the answer."""
    longest = max(budgets, default=1200)
    needed = int(longest * 1.5) + 1024
    return max(4096, -(-needed // 512) * 512)


def offline_reader(
    budgets: Sequence[int], *, model: LocalModelName | None = None, max_tokens: int = READER_MAX_TOKENS
) -> BaseChatModel:
    """The bundled offline model (`model`, else the one ``BEADS_LOCAL_MODEL`` names), greedy and seeded,
    with room for the largest window."""
    from playground.models.local import LocalChatModel
    from playground.models.settings import ModelSettings

    settings = ModelSettings(model_backend="local", local_num_ctx=offline_context(budgets))
    if model is not None:
        settings = settings.model_copy(update={"local_model": model})
    return LocalChatModel(settings=settings, temperature=0.0, seed=0, max_tokens=max_tokens)


def offline_name(model: LocalModelName | None = None) -> str:
    """The offline reader's name: `model`, else the one ``BEADS_LOCAL_MODEL`` chooses, as
    offline_reader loads it."""
    from playground.models.settings import ModelSettings
    from playground.models.weights import LOCAL_MODELS

    return f"{OFFLINE}:{LOCAL_MODELS[model or ModelSettings().local_model].model_name}"


def reader_label(name: str | None) -> str:
    """A reader's name as reports print it ("offline 0.5B (qwen2.5-coder-...)" for the offline one)."""
    if name is None:
        return "none"
    if name == OFFLINE or name.startswith(f"{OFFLINE}:"):
        model = name.partition(":")[2]
        size = _MODEL_SIZE.search(model)
        label = f"{OFFLINE} {size.group(1)}B" if size else OFFLINE_LABEL
        return f"{label} ({model})" if model else label
    return name
