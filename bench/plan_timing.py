"""What one model call's memory costs, and the reading order's share of it: the harness's `run`, with the
middleware's `plan_call` and the reading order it puts the lines in (`newest_first`, the default, or
`later_first`, memory.rules.slots, for `read_order=rank`) timed around every call.

    uv run --extra dev python -m bench.plan_timing run --beam $DATA/beam/500K --split results/split.json \\
        --only tune --conversations 1 --arms beads --budgets 12000 --no-progress --out /tmp/plan-timing

Takes `bench.eval run`'s arguments, runs it, then prints the calls and the mean and slowest time of
each function. Timings on a shared machine: compare only within one run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from bench.eval.cli import main as harness
from memory.context import recall
from memory.doors import middleware


def _timed(fn: Callable[..., Any], seconds: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    return wrapper


def main(argv: list[str]) -> int:
    timed: dict[str, list[float]] = {"plan_call": [], "newest_first": [], "later_first": []}
    # the middleware calls plan_call by the name it imported, plan_call the reading orders by their own
    middleware.plan_call = _timed(middleware.plan_call, timed["plan_call"])  # type: ignore[assignment]
    recall.newest_first = _timed(recall.newest_first, timed["newest_first"])  # type: ignore[assignment]
    recall.later_first = _timed(recall.later_first, timed["later_first"])  # type: ignore[assignment]
    code = harness(argv)
    for name, seconds in timed.items():
        if seconds:
            mean = 1000 * sum(seconds) / len(seconds)
            print(f"{name}: {len(seconds)} calls, {mean:.1f} ms a call, at most {1000 * max(seconds):.0f} ms")
        else:
            print(f"{name}: not called")  # later_first, with the lines read newest first
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
