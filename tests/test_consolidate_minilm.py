"""The merge rule on the real bundled MiniLM vectors: restatements merge, changed values never do.

These pairs are why the rule is "same content words and cosine >= 0.9" rather than a cosine alone:
"Use Postgres 16." and "Use Postgres 15." are 0.96 similar on MiniLM, above the 0.95 a cosine-only
rule would need to merge "...last weekend." with "...last weekend!" (0.947).
"""

from __future__ import annotations

import pytest
from psycopg_pool import ConnectionPool

from memory.embedders import MiniLMEmbedder
from memory.graph.store import FactStore
from memory.model import Kind, Status

DIFFERENT_VALUES = [
    ("The budget is $120k.", "The budget is $150k."),
    ("Use Postgres 16.", "Use Postgres 15."),
    ("The deadline is March 3.", "The deadline is March 13."),
    ("The meeting is on Tuesday.", "The meeting is on Thursday."),
    ("I have two kids.", "I have three kids."),
    ("I like coffee.", "I don't like coffee."),
    ("Dog bites man.", "Man bites dog."),
    ("I was a teacher.", "I am a teacher."),
]
RESTATEMENTS = [
    ("Our budget is $120k.", "our budget is $120k"),
    ("The budget is $120k.", "Budget is $120k"),
    ("I went hiking last weekend.", "I went hiking last weekend!"),
]


@pytest.fixture
def store(pool: ConnectionPool, minilm: MiniLMEmbedder) -> FactStore:
    s = FactStore(pool, minilm)
    s.setup()
    return s


def test_paraphrases_of_different_values_are_not_merged(store: FactStore) -> None:
    for i, (a, b) in enumerate(DIFFERENT_VALUES):
        root = store.root(f"values-{i}")
        store.remember(root, a, kind=Kind.USER_INPUT, message_id="a")
        store.remember(root, b, kind=Kind.USER_INPUT, message_id="b")
        assert store.consolidate(f"values-{i}").merges == [], (a, b)
        assert {f.status for f in store.audit.session_facts(f"values-{i}")} == {Status.ACTIVE}


def test_restatements_are_merged(store: FactStore) -> None:
    for i, (a, b) in enumerate(RESTATEMENTS):
        root = store.root(f"same-{i}")
        first = store.remember(root, a, kind=Kind.USER_INPUT, message_id="a")
        store.remember(root, b, kind=Kind.USER_INPUT, message_id="b")
        [merge] = store.consolidate(f"same-{i}").merges
        assert merge.survivor == first.id and merge.min_similarity >= 0.9, (a, b, merge.min_similarity)


def test_a_loose_restatement_below_the_threshold_is_left_alone(store: FactStore) -> None:
    # same content words, but MiniLM puts them 0.85 apart: conservative by design (a missed merge
    # costs a few tokens; a wrong merge would lose a claim)
    root = store.root("loose")
    store.remember(root, "The budget is $120k.", kind=Kind.USER_INPUT, message_id="a")
    store.remember(root, "Budget: $120k!", kind=Kind.USER_INPUT, message_id="b")
    assert store.consolidate("loose").merges == []
    assert len(store.consolidate("loose", merge_threshold=0.85).merges) == 1
