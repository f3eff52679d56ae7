"""What a scenario does over HTTP: make chats, send messages, and read a turn's server-sent events.

Every request carries a timeout; a stream read is bounded by a number of events and a deadline.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import httpx

#: connect, read and pool timeouts of every request a scenario makes
TIMEOUT = httpx.Timeout(30.0, connect=10.0)

_TOKEN = re.compile(
    r'<div hx-swap-oob="beforeend:#text-[0-9a-f-]+-(stock|beads)"><span id="e-[^"]+">(.*?)</span></div>', re.S
)
_REPLY = re.compile(
    r'<div id="text-[0-9a-f-]+-(stock|beads)" class="reply" hx-swap-oob="true">(.*?)</div>', re.S
)
_TURN_DONE = re.compile(r'id="turn-status-[0-9a-f-]+" class="badge badge-done"')


def origin(base: str) -> dict[str, str]:
    return {"origin": base}


def htmx(base: str) -> dict[str, str]:
    return {"origin": base, "hx-request": "true"}


@dataclass
class SseEvent:
    id: int | None
    event: str
    data: str

    @property
    def tokens(self) -> list[tuple[str, str]]:
        """(lane, text) of the token fragments this event carries."""
        return [(lane, html.unescape(text)) for lane, text in _TOKEN.findall(self.data)]

    @property
    def reply(self) -> tuple[str, str] | None:
        """(lane, final text) when this is a lane's `done` (or `resume`) fragment."""
        found = _REPLY.search(self.data)
        return (found[1], html.unescape(found[2])) if found else None

    @property
    def turn_done(self) -> bool:
        return bool(_TURN_DONE.search(self.data))


@dataclass
class StreamRead:
    events: list[SseEvent] = field(default_factory=list)
    first_event_seconds: float | None = None
    ended: bool = False  # the server closed the stream (a turn stream ends after its turn)


class _Parser:
    def __init__(self) -> None:
        self.id: int | None = None
        self.event = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        if line == "":
            if not self.data and self.id is None:
                self.event = "message"
                return None
            event = SseEvent(self.id, self.event, "\n".join(self.data))
            self.id, self.event, self.data = None, "message", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            self.id = int(value) if value.isdigit() else None
        elif name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        return None


def parse_sse(lines: Iterator[str]) -> Iterator[SseEvent]:
    parser = _Parser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


async def aparse_sse(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    parser = _Parser()
    async for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


def _created(response: httpx.Response) -> None:
    if response.status_code != 303:
        raise httpx.HTTPStatusError(
            f"creating a chat answered {response.status_code}", request=response.request, response=response
        )


# -- sync -------------------------------------------------------------------------------------------


def new_chat(client: httpx.Client, base: str) -> str:
    response = client.post(f"{base}/chats", headers=origin(base), follow_redirects=False)
    _created(response)
    return response.headers["location"].rsplit("/", 1)[1]


def send(client: httpx.Client, base: str, chat_id: str, text: str, key: str | None = None) -> str:
    form = {"text": text, **({"idempotency_key": key} if key else {})}
    response = client.post(f"{base}/chats/{chat_id}/messages", data=form, headers=htmx(base))
    response.raise_for_status()
    return response.headers["x-turn-id"]


def read_turn(
    client: httpx.Client,
    base: str,
    chat_id: str,
    turn_id: str,
    *,
    after: int = 0,
    by_header: bool = False,
    max_events: int | None = None,
    deadline_seconds: float = 120.0,
) -> StreamRead:
    """Read a turn's stream from after `after`; stop after `max_events` events (a drop) or at its end."""
    url = f"{base}/chats/{chat_id}/turns/{turn_id}/events"
    headers, params = ({"last-event-id": str(after)}, {}) if by_header else ({}, {"after": after})
    read = StreamRead()
    started = time.monotonic()
    with client.stream("GET", url, headers=headers, params=params, timeout=TIMEOUT) as response:
        response.raise_for_status()
        for event in parse_sse(response.iter_lines()):
            if time.monotonic() - started > deadline_seconds:
                raise TimeoutError(f"turn {turn_id}: its stream ran past {deadline_seconds:.0f} s")
            if event.id is None:
                continue
            if read.first_event_seconds is None:
                read.first_event_seconds = time.monotonic() - started
            read.events.append(event)
            if max_events is not None and len(read.events) >= max_events:
                return read  # hang up mid-stream
        read.ended = True
    return read


# -- async ------------------------------------------------------------------------------------------


async def anew_chat(client: httpx.AsyncClient, base: str) -> str:
    response = await client.post(f"{base}/chats", headers=origin(base), follow_redirects=False)
    _created(response)
    return response.headers["location"].rsplit("/", 1)[1]


async def asend(client: httpx.AsyncClient, base: str, chat_id: str, text: str, key: str) -> str:
    response = await client.post(
        f"{base}/chats/{chat_id}/messages", data={"text": text, "idempotency_key": key}, headers=htmx(base)
    )
    response.raise_for_status()
    return response.headers["x-turn-id"]


async def aread_turn(client: httpx.AsyncClient, base: str, chat_id: str, turn_id: str) -> StreamRead:
    """A whole turn's stream, from its first event to its end."""
    url = f"{base}/chats/{chat_id}/turns/{turn_id}/events"
    read = StreamRead()
    started = time.monotonic()
    async with client.stream("GET", url, timeout=TIMEOUT) as response:
        response.raise_for_status()
        async for event in aparse_sse(response.aiter_lines()):
            if event.id is None:
                continue
            if read.first_event_seconds is None:
                read.first_event_seconds = time.monotonic() - started
            read.events.append(event)
        read.ended = True
    return read
