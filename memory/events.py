"""The events the middleware writes to LangGraph's custom stream (`stream_mode="custom"`), typed.

    for chunk in agent.stream(input, config, stream_mode="custom"):
        if chunk.get("type") == INJECTION_EVENT:
            event: InjectionEvent = chunk

One `InjectionEvent` per model call: what memory put into the prompt and why. One `CaptureEvent` per
message that capture could not store as it came: clipped to the length limit, cleaned of characters
Postgres cannot store, or not stored at all because the capture failed (it is tried again on the
thread's next call; the turn goes on either way).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["CAPTURE_EVENT", "INJECTION_EVENT", "CaptureEvent", "InjectedFact", "InjectionEvent"]

INJECTION_EVENT = "beads_injection"
CAPTURE_EVENT = "beads_capture"


class FlagMark(TypedDict):
    """One of a hit's flags (memory.flags): its stable kind and its words."""

    kind: str
    text: str


class InjectedFact(TypedDict):
    """One recalled fact, as the block showed it (memory.context.block.describe_injection)."""

    id: str
    short_id: str
    text: str
    distance: float
    score: float
    kind: str
    source: str
    agent_id: str
    demoted: bool
    resolved_from: str | None  # the older version a search hit resolved to this one
    flags: list[str]  # memory.flags records' texts
    marks: list[FlagMark]  # the same flags, each with its kind
    passage: str | None  # the excerpt of its message shown with it


class InjectionEvent(TypedDict):
    """What memory did for one model call."""

    type: Literal["beads_injection"]
    query: str | None
    not_in_memory: bool
    tokens: int
    chars: int
    facts: list[InjectedFact]
    dropped: list[list[Any]]
    block: str  # the text put into the system prompt, exactly as the model read it
    agent_id: NotRequired[str]
    namespace_id: NotRequired[str]
    window_messages: NotRequired[int]
    history_messages: NotRequired[int]
    pinned: NotRequired[list[dict[str, Any]]]
    gate: NotRequired[dict[str, Any]]
    retrieved_tier: NotRequired[dict[str, Any] | None]
    assembly: NotRequired[dict[str, Any]]
    capture: NotRequired[dict[str, Any]]
    error: NotRequired[str]  # set when the memory could not be read: the call went on without a block


class CaptureEvent(TypedDict):
    """What became of one message capture could not store as it came."""

    type: Literal["beads_capture"]
    message_id: str | None
    outcome: Literal["clipped", "cleaned", "failed"]
    notes: list[str]
