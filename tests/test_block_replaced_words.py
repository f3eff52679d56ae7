"""A line that shows more of a message than its claim never shows a claim of that message that was
replaced: the whole message at a large budget, or the part of it around a claim."""

from __future__ import annotations

from typing import Any

import pytest
from agent_helpers import injection_events, system_text
from langchain.agents import create_agent

from memory.context.block import TierSettings
from memory.doors.middleware import BeadsMemoryMiddleware
from memory.graph.store import FactStore
from memory.scripted import ScriptedChatModel

STATE = "Our budget is $100k per year. It must be self-hostable."
CORRECT = "Correction: our budget is $120k per year."
ASK = "What is our budget, and where must it run?"


def block_after_correction(store: FactStore, **options: Any) -> str:
    root = store.root("s")
    store.capture_message(root, STATE, message_id="m1")
    store.capture_message(root, CORRECT, message_id="m2")
    model = ScriptedChatModel(replies=["ok"])
    middleware = BeadsMemoryMiddleware(store, root, **options)
    injection_events(create_agent(model, tools=[], middleware=[middleware]), ASK)
    return system_text(model.prompts[0])


@pytest.mark.parametrize(
    "tier",
    [
        TierSettings(),  # a line may take 250 tokens: a message that fits is shown whole
        TierSettings(excerpt_share=0.5),  # the claim in the part of its message around it
        TierSettings(thin_tokens=40, passage_chars=200),  # a thin claim with its passage
    ],
)
def test_a_replaced_claim_is_not_shown_again_with_its_message(store: FactStore, tier: TierSettings) -> None:
    block = block_after_correction(store, retrieved_tokens=3_000, tier=tier)
    assert "$120k" in block and "self-hostable" in block
    assert "$100k" not in block, block
