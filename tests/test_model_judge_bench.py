"""The model-judge bench's own parts: pairs from a sequence file, the yes/no read-out, the tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.model_judge import p_yes, prompt, sequence_pairs, summarize


def test_a_sequence_becomes_the_pair_of_messages_that_hold_its_two_values(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rows = [
        {
            "id": "u",
            "kind": "update",
            "messages": [
                "rent is $900",
                "any soup recipes?",
                "landlord raised it to $950",
                "thanks, $950 it is",
            ],
            "question": "rent?",
            "current": "$950",
            "stale": "$900",
        },
        {
            "id": "l",
            "kind": "lookalike",
            "messages": ["I drive a Civic", "my wife drives a Golf"],
            "question": "my car?",
            "current": "Civic",
            "other": "Golf",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    update, lookalike = sequence_pairs(path)
    # the first message with the old value, the last with the new one
    assert (update["old"], update["new"], update["label"]) == (
        "rent is $900",
        "thanks, $950 it is",
        "supersede",
    )
    assert (lookalike["old"], lookalike["new"], lookalike["label"]) == (
        "I drive a Civic",
        "my wife drives a Golf",
        "keep_both",
    )


def test_the_answer_is_yes_against_no_from_the_logits() -> None:
    logits = np.array([0.0, 2.0, 0.0, 2.0, 9.0])  # token 4 (neither) is the most likely: it is ignored
    assert p_yes(logits, yes=[1], no=[3]) == 0.5
    assert p_yes(np.array([3.0, 0.0, 1.0]), yes=[0], no=[2]) > 0.85
    assert "Earlier fact: A\nLater message: B\n" in prompt("A", "B")


def test_the_tables_count_found_and_kept_at_each_threshold() -> None:
    rows = [
        {"set": "ours-blind-7", "label": "supersede", "rules": False, "score": 0.8},
        {"set": "ours-blind-7", "label": "supersede", "rules": True, "score": 0.4},
        {"set": "ours-blind-7", "label": "keep_both", "rules": False, "score": 0.6},
        {"dataset": "beam", "cited_update": True, "rules": False, "score": 0.95},
        {"dataset": "beam", "cited_update": False, "rules": True, "score": 0.1},
    ]
    lines = summarize(rows)
    pairs = next(line for line in lines if line.startswith("| blind-7"))
    # rules: 1 of 2 found, 1 of 1 kept; at 0.5: 1/2 found, 0/1 kept; at 0.7 and 0.9: 1/2 and 0/2 found, kept
    assert pairs.split(" | ")[2:] == ["1/2 / 1/1", "1/2 / 0/1", "1/2 / 1/1", "0/2 / 1/1 |"]
    beam = next(line for line in lines if line.startswith("| beam"))
    assert "1 (1/1 cited updates)" in beam
