"""What a front door to the memory accepts, and how it stores what it is sent: one validation and one
capture policy for every door that is not the middleware (the playground's HTTP API, the MCP server
in memory.doors.mcp_server), so a message sent over either is stored exactly as the other would store it.

Text that Postgres cannot store is refused before it reaches the store, never passed on to fail
there: a NUL character (U+0000), and a lone surrogate (memory.rules.clean_text decides, for every door).
Blank text is refused too. Messages are captured as `BeadsMemoryMiddleware` captures them
(memory.doors.capture): a user's message is split into claims verbatim, a tool's result is untrusted
content (a failed call's, and the memory's own tools', are skipped), an assistant's answer is kept as
a conclusion when it is one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, StringConstraints

from memory.doors.capture import answer_key, capture_answer, capture_said
from memory.doors.tools import MEMORY_TOOL_NAMES
from memory.errors import BeadsMemoryError, FactNotFoundError, NamespaceNotFoundError, SupersedeRefusedError
from memory.graph.store import FactStore
from memory.model import AutoSupersession, CaptureResult, Deleted, Fact, Kind, Namespace, Relation, Source
from memory.rules import clean_text
from memory.rules.clean_text import DEFAULT_MAX_MESSAGE_CHARS

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
SESSION_ID_RULE = "1 to 128 letters, digits, '-' or '_', starting with a letter or digit"
# a fact's full id (a UUID) or its 8-hex-digit short id, as the block shows it
FACT_ID_PATTERN = (
    r"^(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})$"
)
MAX_MESSAGES = 50

Role = Literal["user", "tool", "assistant"]
RememberKind = Literal["conclusion", "user_input"]


def storable(text: str) -> str:
    if (why := clean_text.problem(text)) is not None:
        raise ValueError(why)
    return text


def not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("is empty (or only whitespace)")
    return text


def written_time(value: Any) -> Any:
    """A time arrives as text (ISO 8601 with its offset), never as a number pydantic would read as
    seconds since 1970: the schema says a date-time string, and a number is not one."""
    if isinstance(value, int | float):
        raise ValueError("is a number; send a time as text with its offset, e.g. 2026-01-01T09:00:00+00:00")
    return value


def readable_time(moment: datetime) -> datetime:
    """A time the store can give back: within years 1 to 9999 once in UTC. Postgres keeps an earlier
    one (0001-01-01T00:00+14:00 is a day in 1 BC), which no read could then load into a datetime."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("falls outside the years 1 to 9999 once converted to UTC") from None
    return moment


# pydantic field types, for any door that declares its inputs with pydantic (both do)
Text = Annotated[str, AfterValidator(storable), AfterValidator(not_blank)]
Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"),
    AfterValidator(storable),
]
FactIdText = Annotated[str, StringConstraints(pattern=FACT_ID_PATTERN)]
Moment = Annotated[AwareDatetime, BeforeValidator(written_time), AfterValidator(readable_time)]
SessionIdText = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]


class IncomingMessage(Protocol):
    """One message sent to be captured (the API's `MessageIn` is one)."""

    @property
    def role(self) -> Role: ...
    @property
    def text(self) -> str: ...
    @property
    def time(self) -> datetime | None: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def is_error(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Message:
    """An `IncomingMessage` for doors that do not bring their own type."""

    role: Role
    text: str
    time: datetime | None = None
    message_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False


def message_problem(field: str, message: IncomingMessage, limit: int) -> str | None:
    """Why `message` is refused (a sentence naming `field`), or None. A tool's result is exempt from
    the length limit: capture clips it (memory.doors.capture)."""
    if message.role != "tool" and len(message.text) > limit:
        return f"{field}.text: {len(message.text)} characters, and the limit is {limit}."
    if message.role != "tool" and (message.tool_name is not None or message.is_error):
        return f"{field}: tool_name and is_error are for tool results only."
    return None


def text_problem(field: str, text: str, limit: int) -> str | None:
    """Why a query or a fact's text is refused, or None."""
    return f"{field}: longer than {limit} characters." if len(text) > limit else None


@dataclass(frozen=True, slots=True)
class Captured:
    """What capturing one message did."""

    captured: bool  # False: the message was not stored (see note)
    written: int  # facts this call wrote for it
    duplicate: bool  # already stored (a repeat): nothing written
    note: str | None
    facts: tuple[Fact, ...] = ()
    superseded: tuple[AutoSupersession, ...] = ()


def _outcome(
    captured: bool,
    written: int,
    facts: tuple[Fact, ...] = (),
    note: str | None = None,
    superseded: tuple[AutoSupersession, ...] = (),
) -> Captured:
    duplicate = captured and written == 0 and bool(facts)
    if duplicate and note is None:
        note = "already stored: nothing written"
    return Captured(captured, written, duplicate, note, facts, superseded)


def capture_incoming(
    store: FactStore,
    ns: Namespace,
    message: IncomingMessage,
    thread_id: str | None,
    asked: str | None,
    asked_text: str = "",
) -> Captured:
    """One message, captured as the middleware captures it (memory.doors.capture's policy). `asked` is the
    id of the user message an assistant's answer replies to, which keys an answer sent without an id;
    `asked_text` its text (an answer that only says it back is no conclusion)."""
    where: dict[str, Any] = {
        "agent_id": ns.agent_id,
        "acting_on_behalf_of": "user",
        "thread_id": thread_id,
        "message_id": message.message_id,
        "valid_from": message.time,
    }
    result: CaptureResult | None
    if message.role == "assistant":
        # keyed by its own id when it has one (a client's ids are stable); else as the middleware
        # keys a final answer, by its turn
        key = f"final:{message.message_id}" if message.message_id else answer_key(thread_id, asked)
        result = capture_answer(store, ns, message.text, key=key, asked=asked_text, **where)
        if result is None:
            note = (
                "not kept: a tool call written as text, an error, or the user's message said back is no"
                " conclusion (memory.rules.conclusions)"
            )
            return _outcome(False, 0, note=note)
    elif message.role == "tool":
        if message.is_error:
            return _outcome(False, 0, note="not kept: a failed tool call's output is not captured")
        if message.tool_name in MEMORY_TOOL_NAMES:
            return _outcome(False, 0, note=f"not kept: {message.tool_name} is the memory's own tool")
        result = capture_said(store, ns, message.text, by="tool", **where)
    else:
        result = capture_said(store, ns, message.text, by="user", **where)
    if not result.facts:
        return _outcome(False, 0, note="nothing to store: no claim in it")
    return _outcome(True, result.written, result.facts, superseded=result.superseded)


def capture_messages(
    store: FactStore, session_id: str, messages: Sequence[IncomingMessage], thread_id: str | None
) -> list[Captured]:
    """Capture `messages` in order into the session's root; an answer replies to the last user message."""
    ns = store.root(session_id)
    outcomes = []
    asked: str | None = None
    asked_text = ""
    for message in messages:
        outcomes.append(capture_incoming(store, ns, message, thread_id, asked, asked_text))
        if message.role == "user":
            asked, asked_text = message.message_id, message.text
    return outcomes


def existing_root(store: FactStore, session_id: str) -> Namespace:
    """The session's root namespace; a read never creates a session, so one that holds nothing is
    refused (NamespaceNotFoundError)."""
    root = next((ns for ns in store.session_namespaces(session_id) if ns.parent_id is None), None)
    if root is None:
        raise NamespaceNotFoundError(f"No session {session_id!r} in memory: nothing was stored under it.")
    return root


def fact_in_session(store: FactStore, session_id: str, fact_id: str) -> Fact:
    """The fact `fact_id` (full or short id) of this session; another session's is as if absent."""
    missing = FactNotFoundError(f"No fact {fact_id!r} in session {session_id!r}.")
    if len(fact_id) == 8:
        try:
            return store.get(fact_id.lower(), session_id=session_id)
        except BeadsMemoryError as exc:  # none, or several ("give more digits")
            raise FactNotFoundError(f"{exc} (session {session_id!r}).") from None
    try:
        fact = store.get(uuid.UUID(fact_id))
    except (BeadsMemoryError, ValueError):
        raise missing from None
    if fact.session_id != session_id:
        raise missing
    return fact


def forget_refusal(store: FactStore, session_id: str) -> str | None:
    """Why a door refuses to forget `session_id`, or None: the session is a playground chat's memory,
    which only deleting the chat forgets (it also forgets the chat's stock lane, its threads and its
    own rows, which a door that forgot the session alone would leave behind, pointing at nothing).
    The chat table is looked up by name, so that this library never imports the playground; on a
    database the playground never used it does not exist and nothing is refused."""
    with store.pool.connection() as conn:
        present = conn.execute("SELECT to_regclass('playground.chats') IS NOT NULL AS present").fetchone()
        if present is None or not present["present"]:
            return None
        chat = conn.execute("SELECT id FROM playground.chats WHERE session_id = %s", (session_id,)).fetchone()
    if chat is None:
        return None
    return (
        f"Session {session_id!r} is the memory of playground chat {chat['id']}: delete the chat "
        "(it forgets both lanes and its threads too)."
    )


@dataclass(frozen=True, slots=True)
class Link:
    """One link a remember asked for, and whether the library made it."""

    relation: Relation
    target: Fact
    ok: bool
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Remembered:
    written: bool  # False: this exact fact was already stored
    fact: Fact  # its current version
    links: tuple[Link, ...]


def remember_linked(
    store: FactStore,
    session_id: str,
    text: str,
    *,
    kind: RememberKind = "conclusion",
    time: datetime | None = None,
    supersedes: str | None = None,
    contradicts: Sequence[str] = (),
    relates_to: Sequence[str] = (),
) -> Remembered:
    """Store one fact unsplit (as the remember_fact tool does), optionally correcting one (`supersedes`)
    or linked to others. Every target must be a fact of the session before anything is written; a link
    the library refuses (a supersede of something unrelated, say) is reported, not raised."""
    wanted = [(Relation.SUPERSEDES, t) for t in ([supersedes] if supersedes else [])]
    wanted += [(Relation.CONTRADICTS, t) for t in contradicts]
    wanted += [(Relation.RELATES_TO, t) for t in relates_to]
    targets = [(relation, fact_in_session(store, session_id, t)) for relation, t in wanted]
    result = store.remember_result(
        store.root(session_id),
        text,
        kind=Kind(kind),
        source=Source.REMEMBER_TOOL,
        acting_on_behalf_of="user",
        valid_from=time,
    )
    fact = result.facts[0]
    links = []
    for relation, target in targets:
        try:
            if relation is Relation.SUPERSEDES:
                store.supersede(fact, target)
            else:
                store.relate(fact, relation, target)
            links.append(Link(relation, target, ok=True))
        except BeadsMemoryError as exc:
            links.append(Link(relation, target, ok=False, detail=str(exc)))
    return Remembered(written=bool(result.written), fact=store.get(fact.id), links=tuple(links))


def correct_fact(
    store: FactStore, session_id: str, fact_id: str, text: str, *, kind: RememberKind = "user_input"
) -> Remembered:
    """`text` replaces the current version of `fact_id`'s claim, or nothing is stored: the library's
    guard (FactStore.supersede refuses two facts that are not about the same thing) decides, and a
    refused correction leaves no stray fact behind (SupersedeRefusedError, saying why)."""
    fact_in_session(store, session_id, fact_id)  # a missing target refuses before anything is written
    done = remember_linked(store, session_id, text, kind=kind, supersedes=fact_id)
    refused = [link for link in done.links if not link.ok]
    if refused:
        if done.written:
            store.delete(done.fact)
        raise SupersedeRefusedError(
            f"Not corrected, and nothing stored: {refused[0].detail}. To keep it as a fact of its own, "
            "use remember."
        )
    return done


def deleted_note(done: Deleted) -> str:
    """One sentence on what a delete left current."""
    gone = done.fact.short_id
    if done.current is None:
        return f"Deleted {gone}; its claim had no other version."
    current = f"{done.current.short_id} ({done.current.body[:60]!r})"
    if any(f.id == done.current.id for f in done.restored):
        return f"Deleted {gone}; {current}, the version it had replaced, is current again."
    return f"Deleted {gone}, an earlier version; {current} is still current."


__all__ = [
    "DEFAULT_MAX_MESSAGE_CHARS",
    "FACT_ID_PATTERN",
    "MAX_MESSAGES",
    "SESSION_ID_PATTERN",
    "SESSION_ID_RULE",
    "Captured",
    "FactIdText",
    "Identifier",
    "IncomingMessage",
    "Link",
    "Message",
    "Moment",
    "RememberKind",
    "Remembered",
    "Role",
    "SessionIdText",
    "Text",
    "capture_incoming",
    "capture_messages",
    "correct_fact",
    "deleted_note",
    "existing_root",
    "fact_in_session",
    "forget_refusal",
    "message_problem",
    "not_blank",
    "readable_time",
    "remember_linked",
    "storable",
    "text_problem",
    "written_time",
]
