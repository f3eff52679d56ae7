"""A long session asks the same question many times: the copies must not crowd out the answers.

Directives (questions, requests) are held out of recall, and ranking drops them; the nearest claims
to a question are that question asked before. Before they took no place among the nearest
candidates, a session holding more copies of a question than the candidates fetched returned blocks
of one fact or none for it (the 1M growth run of bench.search_latency: 7.8 facts a search on
average, as few as 0). Real Postgres, the fake embedder (texts sharing words are near).
"""

from __future__ import annotations

from memory.graph.store import FactStore
from memory.model import Kind
from memory.retrieval import SearchOptions, candidate_count

QUESTION = "What is the owner of the billing api?"
CLAIMS = [
    "The owner of the billing api meets the auditors every Monday.",
    "The owner of the billing api keeps the runbook in the wiki.",
    "The billing api owner signs off every schema change.",
    "The owner of the billing api moved the alerts to the pager.",
    "The billing api owner wants the error budget reviewed monthly.",
    "The owner of the billing api hired two contractors in spring.",
    "The billing api owner prefers canary releases over big bangs.",
    "The owner of the billing api archived the old dashboards.",
    "The billing api owner asked for a load test before launch.",
    "The owner of the billing api rotates the keys by hand.",
]


def test_copies_of_a_question_leave_the_nearest_places_to_claims(store: FactStore) -> None:
    root = store.root("long-session")
    for i, claim in enumerate(CLAIMS):
        store.remember(root, claim, message_id=f"claim-{i}")
    copies = candidate_count(store.search_options) + 8  # more than a search fetches
    for i in range(copies):  # in a group chat, each asks it (one person asking again writes nothing)
        store.capture_message(root, QUESTION, message_id=f"asked-{i}", speaker=f"member-{i}")
    held = [f for f in store.audit.facts_in_namespace(root.id) if f.kind is Kind.DIRECTIVE]
    assert len(held) == copies  # each copy is a directive, held out of recall

    result = store.search(root, QUESTION)
    assert len(result.hits) == store.search_options.k
    assert {h.fact.body for h in result.hits} <= set(CLAIMS)
    # vectors alone (no keyword candidates) find them too
    assert len(store.search(root, QUESTION, SearchOptions(keyword=False)).hits) == store.search_options.k


def test_directives_asked_for_are_still_candidates(store: FactStore) -> None:
    root = store.root("asks")
    store.remember(root, CLAIMS[0], message_id="claim")
    store.capture_message(root, QUESTION, message_id="asked")
    found = store.search(root, QUESTION, SearchOptions(include_directives=True, keyword=False))
    assert QUESTION in {h.fact.body for h in found.hits}
    assert QUESTION not in {
        h.fact.body for h in store.search(root, QUESTION, SearchOptions(keyword=False)).hits
    }
