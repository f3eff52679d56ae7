"""How often the instruction or preference a BEAM question depends on is among the few standing rules
("Always ...", "Never ...", "I prefer ...") of its chat nearest the question, read without the store:
each user message cut into claims as capture cuts it, the claims matching the rule kept, embedded with
MiniLM and ranked by cosine similarity to the question.

    uv run --extra dev python results/long-sessions-31/tuning/standing_reach.py $DATA/beam/500K tune
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

import numpy as np

from bench.eval.loaders import load_beam_tiered
from memory.embedders.base import embed_query
from memory.embedders.select import embedder_from_name
from memory.rules.splitting import split_message

STANDING = re.compile(
    r"^\W*(?:(?:and|so|also|please),?\s+)*(?:always|never|from now on|going forward|whenever)\b"
    r"|\bI(?:'ve| have)? (?:\w+ )?(?:prefer|would rather|'d rather)\b|\b(?:my|a) preference\b",
    re.I,
)


def main(beam: str, split: str) -> None:
    chats = set(json.loads(Path("results/split.json").read_text())[split])
    embedder = embedder_from_name("minilm")
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    per_chat = []
    for conversation in load_beam_tiered(beam).conversations:
        if conversation.id not in chats:
            continue
        rules = [
            (turn.id, claim.text)
            for turn in conversation.turns
            if turn.role == "user"
            for claim in split_message(turn.text)
            if STANDING.search(claim.text)
        ]
        per_chat.append(len(rules))
        vectors = np.array(embedder.embed([text for _, text in rules]))
        for question in conversation.questions:
            kind = question.type if question.type.endswith("_following") else "other"
            found[(kind, "questions")] += 1
            order = np.argsort(-(vectors @ np.array(embed_query(embedder, question.question))))
            places = [p for p, i in enumerate(order) if rules[i][0] in set(question.evidence_ids)]
            for n in (1, 2, 3):
                found[(kind, f"evidence among the nearest {n}")] += bool(places and places[0] < n)
    print("standing rules per chat:", per_chat)
    for key, count in sorted(found.items()):
        print(*key, count, sep=" | ")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
