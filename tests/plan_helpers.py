"""Reading EXPLAIN (ANALYZE, FORMAT JSON) plans in tests that pin how a statement is planned."""

from __future__ import annotations

from typing import Any


def indexes_read(plan: dict[str, Any], *, loops_over: int = 0) -> set[str]:
    """The indexes the plan's nodes read from, counting only nodes that ran more than `loops_over`
    times (0: every node that ran; 1: those run once per row of another node)."""
    ran = plan.get("Actual Loops", 0) > loops_over
    found = {plan["Index Name"]} if plan.get("Index Name") and ran else set()
    for child in plan.get("Plans", ()):
        found |= indexes_read(child, loops_over=loops_over)
    return found
