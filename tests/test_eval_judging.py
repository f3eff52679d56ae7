"""Reading, judging and pairwise comparison with scripted chat models (queued replies, no real model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_samples import write_locomo
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from bench.eval.conversation import Question
from bench.eval.judging import chat_model_from_spec, judge, pairwise
from bench.eval.reader import read
from bench.eval.report import render_markdown
from bench.eval.runner import ROWS_FILE, Evaluation, RunConfig, read_rows
from memory.errors import ConfigurationError

pytestmark = pytest.mark.bench


class ScriptedChatModel(BaseChatModel):
    """Returns the queued replies in order (an Exception in the queue is raised) and records each prompt."""

    replies: list[Any] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.prompts.append("\n".join(str(m.content) for m in messages))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def scripted_factory() -> ScriptedChatModel:
    return ScriptedChatModel(replies=["hello"])


KU = Question("ku", "c", "knowledge_update", "How many engineers?", "7", judge_prompt="knowledge-update")
ABSTAIN = Question(
    "ab",
    "c",
    "abstention",
    "Who is my cousin?",
    "No cousin is mentioned.",
    abstention=True,
    judge_prompt="abstention",
)


def test_answer_uses_the_window_and_judge_uses_the_longmemeval_prompt() -> None:
    model = ScriptedChatModel(replies=["Seven engineers."])
    assert read(model, "[20 Feb 2024] user: My team has 7 engineers.", KU).answer == "Seven engineers."
    assert "My team has 7 engineers." in model.prompts[0] and "How many engineers?" in model.prompts[0]

    judge_model = ScriptedChatModel(replies=["Yes.", "no", "YES, it does."])
    assert judge(judge_model, KU, "Seven engineers.") == (True, "Yes.")
    assert "updated answer is the required answer" in judge_model.prompts[0]
    assert (
        "Correct Answer: 7" in judge_model.prompts[0]
        and "Model Response: Seven engineers." in judge_model.prompts[0]
    )
    assert judge(judge_model, ABSTAIN, "I do not know.")[0] is False
    assert "correctly identifies the question as unanswerable" in judge_model.prompts[1]
    assert "Explanation: No cousin is mentioned." in judge_model.prompts[1]
    assert judge(judge_model, KU, "7")[0] is True


def test_pairwise_counts_wins_losses_and_ties_per_budget() -> None:
    def row(q: str, arm: str, budget: int | None, correct: bool | None) -> dict:
        return {"dataset": "d", "question_id": q, "arm": arm, "budget": budget, "correct": correct}

    rows = [
        row("q1", "facts", 100, True), row("q1", "tail", 100, False), row("q1", "full", None, True),
        row("q2", "facts", 100, False), row("q2", "tail", 100, True), row("q2", "full", None, True),
        row("q3", "facts", 100, True), row("q3", "tail", 100, None), row("q3", "full", None, False),
    ]  # fmt: skip
    pairs = {(p["arm_a"], p["arm_b"]): p for p in pairwise(rows)}
    assert (
        pairs[("facts", "tail")]["wins_a"],
        pairs[("facts", "tail")]["wins_b"],
        pairs[("facts", "tail")]["ties"],
    ) == (1, 1, 0)
    # full has no budget: it is compared at every budget
    assert (
        pairs[("facts", "full")]["wins_a"],
        pairs[("facts", "full")]["wins_b"],
        pairs[("facts", "full")]["ties"],
    ) == (1, 1, 1)


def test_a_run_with_scripted_models_grades_every_row(tmp_path: Path, db_url: str) -> None:
    # two questions x (tail, facts at one budget, full) = 6 answers and 5 verdicts (one answer fails)
    answers = ["Pixel", "Pixel", RuntimeError("context too long"), "Lisbon", "no idea", "Lisbon"]
    verdicts = ["yes", "no", "no", "yes", "no"]
    answer_model = ScriptedChatModel(replies=answers)
    judge_model = ScriptedChatModel(replies=verdicts)
    cfg = RunConfig(
        datasets=[("locomo", write_locomo(tmp_path))],
        out_dir=tmp_path / "out",
        budgets=(150,),
        arms=("tail", "facts", "full"),
        embedder="fake-64",
        database_url=db_url,
        exact_database=True,
        limit=2,
        answer_model=answer_model,
        judge_model=judge_model,
        answer_model_name="scripted-answer",
        judge_model_name="scripted-judge",
        show_progress=False,
    )
    Evaluation(cfg).run()
    rows = {(r["question_id"], r["arm"]): r for r in read_rows(cfg.out_dir / ROWS_FILE)}
    assert answer_model.replies == [] and judge_model.replies == []
    q0, q1 = sorted({q for q, _ in rows})
    assert [rows[(q0, a)].get("correct") for a in ("tail", "facts", "full")] == [True, False, None]
    assert "RuntimeError: context too long" in rows[(q0, "full")]["answer_error"]
    assert [rows[(q1, a)]["correct"] for a in ("tail", "facts", "full")] == [False, True, False]
    assert (
        rows[(q1, "facts")]["answer"] == "no idea" and rows[(q1, "facts")]["judge_model"] == "scripted-judge"
    )
    # the facts arm's window reached the answering model
    assert "Facts from memory" in answer_model.prompts[1] or "Conversation so far" in answer_model.prompts[1]

    markdown = render_markdown(list(rows.values()), None)
    assert "Accuracy by question type" in markdown and "Pairwise" in markdown
    assert "| 150 | facts | tail | 1 | 1 | 0 |" in markdown
    assert "No answer model was configured" not in markdown


def test_rows_without_grades_are_redone_once_models_are_configured(tmp_path: Path, db_url: str) -> None:
    base = {
        "datasets": [("locomo", write_locomo(tmp_path))],
        "out_dir": tmp_path / "out",
        "budgets": (150,),
        "arms": ("tail",),
        "embedder": "fake-64",
        "database_url": db_url,
        "exact_database": True,
        "limit": 1,
        "show_progress": False,
    }
    Evaluation(RunConfig(**base)).run()
    graded = RunConfig(
        **base, answer_model=ScriptedChatModel(replies=["x"]), judge_model=ScriptedChatModel(replies=["yes"])
    )
    [record] = Evaluation(graded).run()
    assert record.rows_written == 1
    [row] = read_rows(graded.out_dir / ROWS_FILE)
    assert row["correct"] is True


def test_chat_model_factory_hook() -> None:
    model = chat_model_from_spec(f"{__name__}:scripted_factory")
    assert isinstance(model, ScriptedChatModel)
    ollama = chat_model_from_spec("ollama:qwen3:4b", num_ctx=8192)
    assert getattr(ollama, "model", None) == "qwen3:4b" and getattr(ollama, "num_ctx", None) == 8192
    for bad in ("nonsense", f"{__name__}:KU", "no_such_module_here:factory"):
        with pytest.raises(ConfigurationError):
            chat_model_from_spec(bad)
