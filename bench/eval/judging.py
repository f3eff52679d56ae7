"""Grade a reader's answer (bench.eval.reader) with a judge model, and compare arms pairwise.

The judge prompts are LongMemEval's (Wu et al., "LongMemEval: Benchmarking Chat Assistants on
Long-Term Interactive Memory", ICLR 2025; prompts (c) 2024 Di Wu, MIT licence), used unchanged: the
judge answers yes or no, and "yes" anywhere in its reply means correct, as in the official scorer.
The answering and the judging model are any LangChain chat models; they should differ, so a model is
never grading its own answers.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from bench.eval.conversation import JudgePrompt, Question
from memory.errors import ConfigurationError

_JUDGE_TAIL = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
_JUDGE_HEAD = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
    "response contains the correct answer. Otherwise, answer no. "
)
JUDGE_PROMPTS: dict[JudgePrompt, str] = {
    "default": _JUDGE_HEAD
    + "If the response is equivalent to the correct answer or contains all the intermediate steps to get "
    "the correct answer, you should also answer yes. If the response only contains a subset of the "
    "information required by the answer, answer no." + _JUDGE_TAIL,
    "temporal": _JUDGE_HEAD
    + "If the response is equivalent to the correct answer or contains all the intermediate steps to get "
    "the correct answer, you should also answer yes. If the response only contains a subset of the "
    "information required by the answer, answer no. In addition, do not penalize off-by-one errors for "
    "the number of days. If the question asks for the number of days/weeks/months, etc., and the model "
    "makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response is "
    "still correct." + _JUDGE_TAIL,
    "knowledge-update": _JUDGE_HEAD
    + "If the response contains some previous information along with an updated answer, the response "
    "should be considered as correct as long as the updated answer is the required answer." + _JUDGE_TAIL,
    "preference": "I will give you a question, a rubric for desired personalized response, and a response "
    "from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
    "The model does not need to reflect all the points in the rubric. The response is correct as long as "
    "it recalls and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\n"
    "Model Response: {}\n\nIs the model response correct? Answer yes or no only.",
    "abstention": "I will give you an unanswerable question, an explanation, and a response from a model. "
    "Please answer yes if the model correctly identifies the question as unanswerable. The model could say "
    "that the information is incomplete, or some other information is given but the asked information is "
    "not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify "
    "the question as unanswerable? Answer yes or no only.",
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def judge(model: BaseChatModel, question: Question, response: str) -> tuple[bool, str]:
    """(correct, the judge's reply), by the LongMemEval prompt for the question's kind."""
    prompt = JUDGE_PROMPTS[question.judge_prompt].format(question.question, question.reference, response)
    reply = _text(model.invoke([HumanMessage(prompt)]).content).strip()
    return "yes" in reply.lower(), reply


def pairwise(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wins, losses and ties between every two arms, per dataset and budget, on questions both graded.

    `full` has no budget; it is compared at every budget, since it is the same window at each.
    """
    by_key: dict[tuple[str, int | None], dict[str, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    graded = [r for r in rows if r.get("correct") is not None]
    for r in graded:
        by_key[(r["dataset"], r["budget"])][r["arm"]][r["question_id"]] = bool(r["correct"])
    out: list[dict[str, Any]] = []
    for (dataset, budget), arms in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        if budget is None:
            continue
        arms = dict(arms)
        if (full := by_key.get((dataset, None), {}).get("full")) is not None:
            arms["full"] = full
        for a, b in combinations(sorted(arms), 2):
            shared = arms[a].keys() & arms[b].keys()
            wins = sum(1 for q in shared if arms[a][q] and not arms[b][q])
            losses = sum(1 for q in shared if arms[b][q] and not arms[a][q])
            out.append(
                {
                    "dataset": dataset,
                    "budget": budget,
                    "arm_a": a,
                    "arm_b": b,
                    "wins_a": wins,
                    "wins_b": losses,
                    "ties": len(shared) - wins - losses,
                }
            )
    return out


def chat_model_from_spec(spec: str, *, num_ctx: int = 16384) -> BaseChatModel:
    """A chat model from a command-line spec, at temperature 0.

    - a model spec as the playground reads it (memory.model_spec): `ollama:<model>` (with `num_ctx`:
      Ollama otherwise truncates at 2,048), `openai:<model>` (OPENAI_BASE_URL for any
      OpenAI-compatible server), `anthropic:<model>`, any `provider:model` of init_chat_model, or
      `offline` (the bundled model, as the playground runs it);
    - `<module>:<attribute>` (the factory hook): a BaseChatModel, or a callable returning one,
      importable from the project, for a module that is no model provider.
    """
    from memory.model_spec import parse_model_spec
    from playground.models.select import select_chat_model
    from playground.models.settings import ModelSettings

    module_name, _, attribute = spec.partition(":")
    if _is_factory(module_name):
        return _from_factory(spec, module_name, attribute)
    settings = ModelSettings(model=str(parse_model_spec(spec)), temperature=0, num_ctx=num_ctx)
    return select_chat_model(settings).chat_model


def _providers() -> frozenset[str]:
    """The providers a model spec may name: ours and those LangChain's init_chat_model builds."""
    from langchain.chat_models import base

    known: Any = getattr(base, "_SUPPORTED_PROVIDERS", ())
    return frozenset({"offline", "local", "scripted", "auto", "ollama", "openai", "anthropic", *known})


def _is_factory(module_name: str) -> bool:
    """Whether the part of a spec before its colon names a module of ours rather than a provider."""
    if not module_name or module_name.strip().lower() in _providers():
        return False
    if "." in module_name:
        return True
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


def _from_factory(spec: str, module_name: str, attribute: str) -> BaseChatModel:
    if not attribute:
        raise ConfigurationError(f"a chat model factory is '<module>:<attribute>', not {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load the chat model {spec!r}: {exc}") from exc
    model = target() if callable(target) and not isinstance(target, BaseChatModel) else target
    if not isinstance(model, BaseChatModel):
        raise ConfigurationError(f"{spec!r} gave a {type(model).__name__}, not a LangChain chat model")
    return model


def accuracy_by_type(
    rows: Sequence[dict[str, Any]],
) -> dict[tuple[str, str, int | None, str], tuple[int, int]]:
    """(dataset, arm, budget, question type) -> (correct, graded)."""
    out: dict[tuple[str, str, int | None, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        if r.get("correct") is None:
            continue
        cell = out[(r["dataset"], r["arm"], r["budget"], r["type"])]
        cell[0] += int(bool(r["correct"]))
        cell[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}
