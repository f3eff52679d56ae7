"""The four arms: the playground's two lanes, and two settings of ours that take one mechanism out.

An arm is a lane and the playground settings it runs under; everything else (model, embedder, tools,
prompts, the sub-agent, the turn runner) is the playground's, the same for all four.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Arm:
    name: str
    lane: Literal["stock", "beads"]
    about: str
    settings: dict[str, Any] = field(default_factory=dict)


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("stock", "stock", "create_agent + LangGraph's PostgresStore + LangMem's memory tools"),
        Arm("ours", "beads", "BeadsMemoryMiddleware as the playground runs it"),
        Arm(
            "ours-no-supersede",
            "beads",
            "ours with automatic supersession off: a correction is captured beside the value it replaces",
            {"auto_supersede": False},
        ),
        Arm(
            "ours-no-injection",
            "beads",
            "ours with injection off: capture runs, nothing recalled reaches the model",
            {"injection": "never"},
        ),
    )
}
