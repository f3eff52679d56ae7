"""Templates: one Jinja environment with autoescape on, and the fragments the live stream sends.

Everything a user or a model wrote is rendered as text by autoescape; no template marks such text
safe. A stream event becomes an htmx out-of-band fragment built from the event alone (never from
the database's current state), so replaying it after a reconnect lands exactly where it did live.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jinja2
from fastapi.templating import Jinja2Templates

from playground.events import EventRow
from playground.views import LANE_BLURBS, LANE_TITLES, LaneView, ToolCallView, TurnView, apply


def _asset_dir(name: str) -> Path:
    # a checkout keeps templates/ and static/ at the top level; an installed wheel puts them in the package
    here = Path(__file__).resolve().parent
    return next((p for p in (here.parent / name, here / name) if p.is_dir()), here.parent / name)


TEMPLATES_DIR = _asset_dir("templates")
STATIC_DIR = _asset_dir("static")

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def dom_id(value: Any) -> str:
    """A value made safe to use inside an element id (tool call ids come from the model)."""
    return _UNSAFE_ID.sub("_", str(value))[:80]


def seconds(ms: Any) -> str:
    try:
        return f"{int(ms) / 1000:.1f} s"
    except (TypeError, ValueError):
        return "-"


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["dom_id"] = dom_id
    env.filters["seconds"] = seconds
    env.globals["LANE_TITLES"] = LANE_TITLES
    env.globals["LANE_BLURBS"] = LANE_BLURBS
    return Jinja2Templates(env=env)


def event_context(event: EventRow) -> dict[str, Any]:
    """What the fragment of one event needs: the event, and the one piece of the turn it changes."""
    turn = TurnView(event.turn_id, event.chat_id, int(event.payload.get("turn_no", 0)), "")
    apply(turn, event)
    lane: LaneView | None = turn.lanes.get(event.lane)
    call: ToolCallView | None = None
    if lane is not None and event.kind in ("tool_call", "tool_result"):
        call = lane.tool_calls[event.payload["id"]]
    return {"e": event, "turn": turn, "lane": lane, "call": call, "oob": True}


def render_event(templates: Jinja2Templates, event: EventRow, extra: str = "") -> str:
    html = templates.get_template("partials/event.html").render(event_context(event))
    return html + extra
