"""`store.audit` and `store.review`: the reads for looking back, apart from the store's verbs, with
the same async face as the verbs (`store.aio.audit`, `store.aio.review`)."""

from __future__ import annotations

import asyncio
import inspect

from memory.graph.audit import Audit, Review
from memory.graph.store import AsyncAudit, AsyncReview, FactStore


def _public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)}


def test_every_read_has_its_async_face() -> None:
    assert _public(Audit) == {n for n in vars(AsyncAudit) if not n.startswith("_")}
    assert _public(Review) == {n for n in vars(AsyncReview) if not n.startswith("_")}


def test_the_async_reads_answer_as_the_sync_ones(store: FactStore) -> None:
    root = store.root("audit")
    store.capture_message(root, "Our budget is $100k per year.")
    store.capture_message(root, "Correction: our budget is $120k per year.")
    [new] = [f for f in store.audit.session_facts("audit") if "120k" in f.body]

    async def read() -> tuple[object, ...]:
        aio = store.aio
        return (
            await aio.audit.session_facts("audit"),
            await aio.audit.history(new),
            await aio.audit.sessions(),
            await aio.review.automatic_edges("audit"),
        )

    facts, history, sessions, edges = asyncio.run(read())
    assert facts == store.audit.session_facts("audit")
    assert [f.body for f in history] == [
        "Our budget is $100k per year.",
        "Correction: our budget is $120k per year.",
    ]
    assert sessions == ["audit"]
    assert edges == store.review.automatic_edges("audit")
    assert len(edges) == 1
