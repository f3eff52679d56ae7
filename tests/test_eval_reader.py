"""The reader in the harness: judge-free scores, the stratified sample, paired bootstrap intervals, and a
whole run with a rule-following stand-in for the reader (no model) against real Postgres."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from eval_samples import write_beam, write_locomo
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field
from rich.console import Console

from bench.eval.answer_scores import (
    answer_f1,
    answer_scores,
    exact_match,
    multi_answer_f1,
    normalize_answer,
    says_not_mentioned,
    short_exact_match,
    stale_values_from,
    token_f1,
    update_answer,
)
from bench.eval.bootstrap import arm_intervals, paired_bootstrap
from bench.eval.cli import main
from bench.eval.conversation import Question
from bench.eval.reader import first_line, offline_context, reader_label, reader_prompt
from bench.eval.report import SUMMARY_FILE, write_report
from bench.eval.runner import ROWS_FILE, ROWS_SNAPSHOT, Evaluation, RunConfig, read_rows, sample_questions

pytestmark = pytest.mark.bench


def question(reference: str, qtype: str = "single-hop", **kw: Any) -> Question:
    return Question("q", "c", qtype, "What?", reference, **kw)


# -- LoCoMo's F1 and exact match ---------------------------------------------------------------------


def test_normalisation_is_locomos() -> None:
    assert normalize_answer("The cat, and a Dog!") == "cat dog"
    assert normalize_answer("  7 May,   2023. ") == "7 may 2023"
    assert normalize_answer("An apple-pie") == "applepie"  # punctuation goes, words are not split


def test_token_f1_and_exact_match() -> None:
    assert token_f1("Pixel", "Pixel") == 1.0
    assert token_f1("the cat Pixel", "Pixel") == 2 * (1 / 2) * 1 / (1 / 2 + 1)  # "the" is dropped
    assert token_f1("no idea", "Pixel") == 0.0
    assert token_f1("cat cat", "cat") == 2 * (1 / 2) * 1 / (1 / 2 + 1)  # counts are clipped
    assert exact_match("Lisbon.", "lisbon") and exact_match("parrots and Lisbon", "Lisbon, parrots")
    assert not exact_match("in Lisbon", "Lisbon")


def test_category_rules() -> None:
    # multi-hop: each part of the reference against its best part of the answer
    assert multi_answer_f1("Boulderhaus, Pixel", "Pixel, Boulderhaus") == 1.0
    assert multi_answer_f1("Pixel", "Pixel, Boulderhaus") == 0.5
    assert answer_f1("Pixel", question("Pixel, Boulderhaus", "multi-hop")) == 0.5
    assert answer_f1("Pixel", question("Pixel, Boulderhaus", "single-hop")) == 2 * 1 * 0.5 / 1.5
    # open-domain: the part before ";"
    assert answer_f1("psychology", question("psychology; counselling maybe", "open-domain")) == 1.0
    # no F1 for unanswerable questions or rubrics
    assert answer_f1("x", question("x", abstention=True)) is None
    assert answer_f1("x", question("x", judge_prompt="preference")) is None
    # exact match only for short references
    assert short_exact_match("Pixel", question("Pixel")) is True
    assert short_exact_match("x", question("one two three four five six")) is None
    assert says_not_mentioned("Not mentioned.") and says_not_mentioned("No information available")
    assert not says_not_mentioned("I think it was Lisbon")


def test_the_reader_prompt_and_reply() -> None:
    ku = question("7", question_date="2024-03-01")
    system, human = reader_prompt("[01 Mar 2024] user: My team has 7 engineers.", ku)
    assert "not mentioned" in str(system.content)
    assert "My team has 7 engineers." in str(human.content) and "Today's date: 2024-03-01" in str(
        human.content
    )
    assert "(nothing)" in str(reader_prompt("", ku)[1].content)
    assert first_line("Answer: Lisbon\n\nBecause the memory says so.") == "Lisbon"
    assert first_line("\n  Short answer: 7 engineers") == "7 engineers"
    assert offline_context([1200]) == 4096 and offline_context([6000]) == 10240
    assert reader_label("offline:qwen") == "offline 0.5B (qwen)" and reader_label("ollama:x") == "ollama:x"
    big = "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert reader_label(f"offline:{big}") == f"offline 1.5B ({big})"


# -- knowledge updates: current, stale, both, neither -------------------------------------------------


def test_stale_values_are_read_by_unit_from_the_stale_message() -> None:
    stale = "Tagged the release with 150 commits and 12 branches merged, on April 20 at 3 PM."
    assert stale_values_from(["165 commits"], [stale]) == ("150 commits",)
    assert stale_values_from(["April 25"], [stale]) == ("april 20",)
    assert stale_values_from(["4:30 PM"], [stale]) == ("3 pm",)
    assert stale_values_from(["78%"], ["Coverage reached 65% on the module, version 5.3.0."]) == ("65%",)
    # a bare number takes its unit from the reference answer
    assert stale_values_from(["12"], ["I finished 8 problems today."], "12 probability problems") == (
        "8 problems",
    )
    # nothing of the same unit: no stale value
    assert stale_values_from(["7 women"], ["I mentored five mentees"]) == ()


def test_which_value_an_answer_names() -> None:
    current, stale = ["165 commits"], ["150 commits"]
    assert update_answer("165 commits are merged.", current, stale) == "current"
    assert update_answer("It was 150.", current, stale) == "stale"
    assert update_answer("First 150, now 165.", current, stale) == "both"
    assert update_answer("not mentioned", current, stale) == "neither"
    assert update_answer("165", current, []) is None
    # a date's year is not needed to name it; words where the values have no numbers
    assert update_answer("April 5", ["April 5, 2024"], ["april 1"]) == "current"
    assert update_answer("Mrs. Okafor teaches her", ["Mrs. Okafor"], ["Mr. Reyes"]) == "current"
    assert update_answer("Mr Reyes", ["Mrs. Okafor"], ["Mr. Reyes"]) == "stale"
    # number words count as numbers
    assert update_answer("seven engineers", ["7 engineers"], ["5 engineers"]) == "current"
    scores = answer_scores(
        "165 commits", question("165 commits", current_values=tuple(current), stale_values=tuple(stale))
    )
    assert scores == {
        "reader_f1": 1.0,
        "reader_em": True,
        "reader_not_mentioned": False,
        "reader_update": "current",
    }


# -- the stratified sample -----------------------------------------------------------------------------


def test_the_seeded_sample_is_stratified_and_repeatable() -> None:
    questions = [Question(f"{t}{i}", "c", t, "?", "x") for t in ("a", "b", "c") for i in range(10)]
    questions += [Question("d0", "c", "d", "?", "x")]
    drawn = sample_questions(questions, 3, seed=1)
    assert [q.id for q in drawn] == [q.id for q in sample_questions(questions, 3, seed=1)]
    assert {t: sum(q.type == t for q in drawn) for t in "abcd"} == {"a": 3, "b": 3, "c": 3, "d": 1}
    assert [q.id for q in drawn] == [q.id for q in questions if q in drawn]  # order kept
    other = {q.id for q in sample_questions(questions, 3, seed=2)}
    assert other != {q.id for q in drawn}
    # one type's draw does not depend on the others
    without_c = [q for q in questions if q.type != "c"]
    assert {q.id for q in sample_questions(without_c, 3, seed=1)} == {q.id for q in drawn if q.type != "c"}
    # no seed: the even stride older runs used
    assert [q.id for q in sample_questions(questions, 2) if q.type == "a"] == ["a0", "a5"]


# -- paired bootstrap ----------------------------------------------------------------------------------


def test_paired_bootstrap_is_deterministic_and_paired() -> None:
    a = [1.0, 0.5, 0.0, 1.0, 0.8, 0.2, 0.9, 0.4] * 10
    b = [0.5, 0.5, 0.0, 0.2, 0.8, 0.1, 0.3, 0.4] * 10
    first = paired_bootstrap(a, b, seed=3)
    assert first == paired_bootstrap(a, b, seed=3)
    assert first is not None and first.n == 80
    assert abs(first.difference - (sum(a) - sum(b)) / 80) < 1e-12
    assert first.low < first.difference < first.high and first.excludes_zero
    assert paired_bootstrap(a, b, seed=4) != first
    same = paired_bootstrap(a, a)
    assert same is not None and (same.low, same.high) == (0.0, 0.0) and not same.excludes_zero
    assert paired_bootstrap([], []) is None


def test_arm_intervals_pair_questions_per_dataset_and_budget() -> None:
    def row(q: str, arm: str, budget: int | None, f1: float | None) -> dict[str, Any]:
        return {"dataset": "d", "question_id": q, "arm": arm, "budget": budget, "reader_f1": f1}

    rows = [
        row("q1", "beads", 100, 1.0), row("q1", "bm25", 100, 0.0), row("q1", "full", None, 1.0),
        row("q2", "beads", 100, 1.0), row("q2", "bm25", 100, None), row("q2", "full", None, 0.0),
        row("q3", "beads", 100, 0.5), row("q3", "bm25", 100, 0.5),
    ]  # fmt: skip
    cells = {c["arm"]: c["interval"] for c in arm_intervals(rows, "reader_f1", "beads")}
    assert set(cells) == {"bm25", "full"}
    assert cells["bm25"].n == 2 and cells["bm25"].difference == 0.5  # q2 has no bm25 score
    assert cells["full"].n == 2 and cells["full"].difference == 0.5  # full is paired at every budget


# -- a whole run with a stand-in reader ----------------------------------------------------------------


class RuleReader(BaseChatModel):
    """Answers from the prompt's memory by fixed rules, as a careful reader would: no model at all."""

    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "rule-reader"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        self.prompts.append(prompt)
        memory = prompt.split("Memory:", 1)[1].rsplit("Question:", 1)[0]
        asked = prompt.rsplit("Question:", 1)[1]
        reply = "not mentioned"
        if "cat" in asked and "Pixel" in memory:
            reply = "Pixel"
        elif "engineers" in asked and (found := re.findall(r"has (\d+) engineers", memory)):
            reply = f"{found[-1]} engineers\nThe memory says so."  # the explanation is cut off
        elif "Lisbon" in memory and "parrots" in asked:
            reply = "Answer: in Lisbon"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def test_a_run_with_a_reader_scores_every_answer_and_the_report_leads_with_it(
    tmp_path: Path, db_url: str
) -> None:
    reader = RuleReader()
    split = {"tune": ["conv-test"], "holdout": ["beam-100k-1"]}
    cfg = RunConfig(
        datasets=[("locomo", write_locomo(tmp_path)), ("beam", write_beam(tmp_path))],
        out_dir=tmp_path / "out",
        budgets=(120, 400),
        arms=("beads", "bm25", "tail"),
        embedder="fake-64",
        database_url=db_url,
        exact_database=True,
        split=split,
        answer_model=reader,
        answer_model_name="rule-reader",
        show_progress=False,
    )
    Evaluation(cfg).run()
    rows = read_rows(cfg.out_dir / ROWS_FILE)
    assert rows and all(r["answer_model"] == "rule-reader" and r["answer"] is not None for r in rows)
    assert len(reader.prompts) == len(rows)  # one reading per question, arm and budget
    assert all("correct" not in r for r in rows)  # no judge, no grade
    cat = [r for r in rows if r["question_id"] == "conv-test:q0"]
    assert any(r["answer"] == "Pixel" for r in cat)  # bm25 finds the cat's turn
    for r in cat:
        right = r["answer"] == "Pixel"
        assert (r["reader_f1"], r["reader_em"]) == ((1.0, True) if right else (0.0, False))
    parrots = [r for r in rows if r["question_id"] == "conv-test:q1" and r["answer"] == "in Lisbon"]
    assert parrots and all(r["reader_f1"] == round(2 * 0.5 / 1.5, 4) for r in parrots)
    assert all(r["reader_em"] is False for r in parrots)
    adversarial = [r for r in rows if r["type"] == "adversarial"]
    assert adversarial and all(r["reader_f1"] is None for r in adversarial)
    assert all(r["reader_not_mentioned"] for r in adversarial if r["answer"] == "not mentioned")
    # the knowledge update: its values are on the row, and the answer is read against them
    ku = [r for r in rows if r["question_id"] == "beam-100k-1:knowledge_update:0"]
    assert ku and all(
        r["current_values"] == ["7 engineers"] and r["stale_values"] == ["5 engineers"] for r in ku
    )
    expected = {"7 engineers": "current", "5 engineers": "stale", "not mentioned": "neither"}
    assert all(r["reader_update"] == expected[r["answer"]] for r in ku)
    assert any(r["answer_reply"].endswith("The memory says so.") for r in ku if "answer_reply" in r)

    # a rerun with the same reader does nothing; rows from no reader are redone once one is named
    assert sum(r.rows_written for r in Evaluation(cfg).run()) == 0

    _, _, markdown = write_report(cfg.out_dir, rows)
    headline = markdown.split("## Headline", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in headline.splitlines() if line.startswith("| dataset |"))
    # the reader first, then answer words, then evidence recall; tune before holdout
    order = [
        header.index(name)
        for name in ("reader F1, tune", "reader F1, holdout", "stale answers", "answer words", "recall,")
    ]
    assert order == sorted(order)
    assert "Reader: rule-reader" in headline and "fine claims from many turns" in headline
    assert "### The reader's answers" in markdown and "No judge was configured" in markdown
    assert "No answer model was configured" not in markdown
    assert "beads against each arm, question by question" in markdown and "2,000 resamples" in markdown


def test_the_cli_reads_with_a_reader_and_the_report_rebuilds_from_the_rows(
    tmp_path: Path, db_url: str
) -> None:
    out = tmp_path / "reader-out"
    argv = [
        "run", "--locomo", str(write_locomo(tmp_path)), "--out", str(out), "--budgets", "120",
        "--arms", "beads", "bm25", "--sample", "1", "--sample-seed", "7", "--embedder", "fake-64",
        "--database-url", db_url, "--exact-database", "--no-progress",
        "--answer-model", f"{__name__}:RuleReader",
    ]  # fmt: skip
    assert main(argv, console=Console(record=True, width=200)) == 0
    rows = read_rows(out / ROWS_FILE)
    assert {r["answer_model"] for r in rows} == {f"{__name__}:RuleReader"}
    info = json.loads((out / "run-info.json").read_text())
    assert (
        info["runs"][-1]["sample_seed"] == 7 and info["runs"][-1]["answer_model"] == f"{__name__}:RuleReader"
    )
    summary = (out / SUMMARY_FILE).read_text()
    (out / ROWS_FILE).unlink()
    assert main(["report", "--out", str(out)], console=Console(record=True)) == 0
    assert (out / SUMMARY_FILE).read_text() == summary
    # the committed rows keep the scores, not the answers (they quote the data)
    committed = read_rows(out / ROWS_SNAPSHOT)
    assert len(committed) == len(rows) and all("reader_not_mentioned" in r for r in committed)
    assert not any(field in r for r in committed for field in ("answer", "answer_reply", "current_values"))
    errors = Console(record=True, width=200)
    same = [*argv[:-1], "ollama:x", "--judge-model", "ollama:x"]
    assert main(same, console=errors) == 2 and "must differ from the reader" in errors.export_text()
