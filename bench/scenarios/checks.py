"""The objective checks, read off a lane's replies and tool calls: no model, no judgement.

A value counts as named when its digits stand alone ("$200" and "200 per month", not "2000 ms"); a
choice is the first of the scenario's options the reply names, once any verbatim repeat of the
user's own list of them is taken out. A reply that names nothing passes no
check but `names_stale`'s inverse, which is why `current_not_stale` (the corrected value named, the
replaced one not) is the check the report leads with.
"""

from __future__ import annotations

import re
from typing import Any

from bench.scenarios.script import Scenario

RESEARCH_TOOL = "delegate_research"
_WORD = re.compile(r"[A-Za-z]{2,}")


def names_value(reply: str, value: str) -> bool:
    """`value` in `reply`, not as part of a longer number ("200" is not in "2000" nor in "1.200")."""
    if not value:
        return False
    escaped = re.escape(value.lower())
    if value[:1].isdigit():
        escaped = r"(?<![\d.,:])" + escaped
    if value[-1:].isdigit():
        escaped += r"(?![\d]|[.,:]\d)"
    return re.search(escaped, reply.lower()) is not None


def first_named(reply: str, options: tuple[str, ...]) -> str | None:
    """The option named first in `reply`, or None."""
    text = reply.lower()
    found = [(text.find(option), option) for option in options if option in text]
    return min(found)[1] if found else None


def answered(reply: str) -> bool:
    """A reply in words: at least three of them (an empty reply or a tool call written out is not)."""
    return len(_WORD.findall(reply)) >= 3 and not reply.lstrip().startswith(("{", "<tool_call>", "["))


def delegate_checks(tool_calls: list[str], tool_log: list[str]) -> dict[str, bool]:
    """The delegation step: did the lane hand the task to its sub-agent, and was the tool called
    (by the lane or by its sub-agent)."""
    return {"delegated": RESEARCH_TOOL in tool_calls, "looked_up": bool(tool_log)}


def final_checks(scenario: Scenario, reply: str) -> dict[str, bool]:
    """The last step's reply against the corrected value, the replaced one and the finding."""
    current, stale = names_value(reply, scenario.current), names_value(reply, scenario.stale)
    checks = {
        "answered": answered(reply),
        "names_current": current,
        "names_stale": stale,
        "current_not_stale": current and not stale,
        "names_finding": any(names_value(reply, token) for token in scenario.finding),
    }
    if scenario.choices:
        # the user's own list, repeated, names the options in the user's order: it is not a choice
        choice = first_named(reply.lower().replace(scenario.listing.lower(), " "), scenario.choices)
        checks["picks_fitting"] = choice == scenario.fitting_choice
        checks["picks_stale"] = choice == scenario.stale_choice
    return checks


def step_checks(
    scenario: Scenario, index: int, reply: str, tool_calls: list[str], tool_log: list[str]
) -> dict[str, Any]:
    role = scenario.steps[index].role
    if role == "delegate":
        return delegate_checks(tool_calls, tool_log)
    if role == "final":
        return final_checks(scenario, reply)
    return {}


#: every check, in the order the report shows them; lower is better for those in LOWER_IS_BETTER
CHECKS = (
    "current_not_stale",
    "names_current",
    "names_stale",
    "names_finding",
    "picks_fitting",
    "picks_stale",
    "answered",
    "delegated",
    "looked_up",
)
LOWER_IS_BETTER = frozenset({"names_stale", "picks_stale"})
