"""What a turn looks like, folded from its event log: the page renders the same state the stream builds.

A lane's text is the concatenation of its tokens, reset by `resume` (a restart re-runs the step that
was cut off, so its half-streamed tokens are replaced by what the checkpoint kept) and replaced by
`done` (the final reply). Tool calls are keyed by their id, so a re-run tool updates its row instead
of adding one; injected facts are those of the lane's latest model call.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from playground.db import AppPool
from playground.events import LANES, EventRow

LANE_TITLES = {"stock": "LangGraph stock memory", "beads": "Fact-graph memory"}
LANE_BLURBS = {
    "stock": "create_agent + PostgresStore + LangMem manage_memory / search_memory",
    "beads": "create_agent + BeadsMemoryMiddleware (ranked facts injected per call)",
}


@dataclass
class ToolCallView:
    id: str
    name: str
    args: str = ""
    result: str | None = None
    status: str = "success"


@dataclass
class LaneView:
    lane: str
    status: str = "pending"  # pending, running, done, error
    text: str = ""
    #: the model the lane ran on (its spec's label), from its start event
    model: str = ""
    #: why the lane's final text is no answer, and that text, shown only behind a disclosure
    no_answer: str | None = None
    raw: str = ""
    resumed: bool = False
    error: str | None = None
    tool_calls: dict[str, ToolCallView] = field(default_factory=dict)
    injection: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None  # running totals while the lane works
    metrics: dict[str, Any] | None = None  # final figures once it is done

    @property
    def title(self) -> str:
        return LANE_TITLES[self.lane]

    @property
    def blurb(self) -> str:
        return LANE_BLURBS[self.lane]


@dataclass
class TurnView:
    id: uuid.UUID
    chat_id: uuid.UUID
    turn_no: int
    user_text: str
    status: str = "queued"
    lanes: dict[str, LaneView] = field(default_factory=lambda: {lane: LaneView(lane) for lane in LANES})
    last_event_no: int = 0
    notice: str = ""  # why an attempt at the turn stopped (the database went away), if one did


def tool_args(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True) if not isinstance(args, str) else args


def apply(turn: TurnView, event: EventRow) -> None:
    """Fold one event into the turn (the same rules the live stream's fragments follow)."""
    turn.last_event_no = max(turn.last_event_no, event.event_no)
    payload = event.payload
    if event.lane == "turn":
        if event.kind == "turn":
            turn.user_text = payload.get("text", turn.user_text)
        elif event.kind == "turn_done":
            turn.status = "done"
        elif event.kind == "interrupted":
            turn.notice = payload.get("message", "")
        return
    lane = turn.lanes[event.lane]
    kind = event.kind
    if kind == "start":
        lane.status, turn.status = "running", "running"
        lane.model = payload.get("model", lane.model)
    elif kind == "token":
        lane.text += payload.get("text", "")
    elif kind == "resume":
        lane.text, lane.resumed, lane.status = payload.get("text", ""), True, "running"
    elif kind == "injection":
        lane.injection = payload
    elif kind == "tool_call":
        call = lane.tool_calls.setdefault(payload["id"], ToolCallView(payload["id"], payload.get("name", "")))
        call.name, call.args = payload.get("name", call.name), tool_args(payload.get("args", {}))
    elif kind == "tool_result":
        call = lane.tool_calls.setdefault(payload["id"], ToolCallView(payload["id"], payload.get("name", "")))
        call.result, call.status = payload.get("content", ""), payload.get("status", "success")
    elif kind == "usage":
        lane.usage = payload
    elif kind == "done":
        lane.status, lane.text, lane.metrics = "done", payload.get("text", ""), payload.get("metrics")
        lane.no_answer, lane.raw = payload.get("no_answer"), payload.get("raw", "")
    elif kind == "error":
        lane.status, lane.error = "error", payload.get("message", "failed")


_TURNS = """
SELECT t.id, t.chat_id, t.turn_no, t.status, t.stock_status, t.beads_status, m.body AS user_text
  FROM playground.turn_worker t
  JOIN playground.messages m ON m.turn_id = t.id AND m.author = 'user'
 WHERE t.chat_id = %(chat)s AND (%(turn)s::uuid IS NULL OR t.id = %(turn)s)
 ORDER BY t.turn_no
"""
# A finished lane's reply is in its `done` event: its tokens need not be read again.
_EVENTS = """
SELECT e.chat_id, e.event_no, e.turn_id, e.seq, e.lane, e.kind, e.payload
  FROM playground.events e JOIN playground.turn_worker t ON t.id = e.turn_id
 WHERE e.chat_id = %(chat)s AND (%(turn)s::uuid IS NULL OR e.turn_id = %(turn)s)
   AND NOT (e.kind = 'token' AND CASE e.lane WHEN 'stock' THEN t.stock_status WHEN 'beads' THEN t.beads_status END = 'done')
 ORDER BY e.event_no
"""


async def load_turns(
    pool: AppPool, chat_id: uuid.UUID, turn_id: uuid.UUID | None = None
) -> tuple[list[TurnView], int]:
    """The chat's turns (or one of them) as of one snapshot, and the last event number they include."""
    params = {"chat": chat_id, "turn": turn_id}
    async with pool.connection() as conn, conn.transaction():
        # one snapshot for both reads: the stream resumes exactly after what this page shows
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        turn_rows = await (await conn.execute(_TURNS, params)).fetchall()
        event_rows = await (await conn.execute(_EVENTS, params)).fetchall()
        last = await (
            await conn.execute("SELECT last_event_no FROM playground.chats WHERE id = %s", (chat_id,))
        ).fetchone()
    turns: dict[uuid.UUID, TurnView] = {}
    for row in turn_rows:
        view = TurnView(row["id"], row["chat_id"], row["turn_no"], row["user_text"], row["status"])
        turns[view.id] = view
    for row in event_rows:
        event = EventRow.from_row(row)
        if event.turn_id in turns:
            apply(turns[event.turn_id], event)
    for row in turn_rows:  # the row's statuses are the truth (the log can lag a crashed attempt)
        view = turns[row["id"]]
        view.status = row["status"]
        for lane in LANES:
            status = row[f"{lane}_status"]
            if status in ("done", "error"):
                view.lanes[lane].status = status
    return list(turns.values()), int(last["last_event_no"]) if last else 0
