"""Text from a tool or a web page never ranks above what the user said about the same thing
(memory.retrieval.below_the_users_claims), on a real database with the seeded fake embedder."""

from __future__ import annotations

from memory.block import render_block
from memory.model import Kind, Source
from memory.store import FactStore

USER_FACT = "Our budget is $100k per year."


def test_a_page_titled_with_the_topic_ranks_below_the_users_fact(store: FactStore) -> None:
    root = store.root("ranking")
    user = store.capture_message(root, USER_FACT, message_id="u1").facts[0]
    # a title that states nothing but shares the query's words more closely than the user's fact
    store.capture_message(root, "Budget news: our budget", source=Source.TOOL_RESULT, message_id="t1")
    store.capture_message(
        root, "Budgets for 2027 (https://example.com/b)", source=Source.TOOL_RESULT, message_id="t2"
    )
    result = store.search(root, "our budget")
    ids = [h.fact.id for h in result.hits]
    assert user.id in ids
    first_untrusted = min(i for i, h in enumerate(result.hits) if h.fact.source is Source.TOOL_RESULT)
    assert ids.index(user.id) < first_untrusted
    block = render_block(result)
    for hit in result.hits:
        line = next(x for x in block.splitlines() if x.startswith(f"- [{hit.fact.short_id}]"))
        assert ("not the user's words" in line) == (hit.fact.source is Source.TOOL_RESULT)


def test_a_page_about_something_else_keeps_its_place(store: FactStore) -> None:
    root = store.root("ranking-2")
    store.capture_message(root, "We deploy on Kubernetes in eu-west-1.", message_id="u1")
    page = store.capture_message(
        root, "pgvector 0.8 adds iterative index scans.", source=Source.TOOL_RESULT, message_id="t1"
    ).facts[0]
    result = store.search(root, "pgvector iterative index scans", relevance_floor=-1.0)
    assert result.hits[0].fact.id == page.id  # no shared word with the user's claim: relevance decides
    assert result.hits[0].fact.kind is not Kind.DIRECTIVE
