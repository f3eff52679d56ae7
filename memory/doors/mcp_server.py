"""`beads-memory mcp`: the memory as a Model Context Protocol server, for any MCP client (a desktop
assistant, an IDE, an agent in another language), over stdio or streamable HTTP.

Tools: capture a message, search (the hits, the pinned facts and the block a model would read), list
a session's facts page by page, get one, remember a fact, correct one, show a fact's history, pin and
unpin, delete one fact, and forget a session. Each says what it does to the memory (read-only,
destructive, idempotent: the MCP annotations), declares its answer's schema, and refuses an argument
it does not know. What they accept and how they capture is memory.doors.intake's, which the playground's
HTTP API uses too: a message sent here is stored exactly as the API (and the middleware) would store
it, and a session the API refuses to forget is refused here too. A server started with a session
serves that session only; otherwise every call names its own. Forgetting always takes the session
id spelled out, so that no call forgets a memory by default.

Over HTTP the server listens on a loopback address only and asks every request for a bearer key
(`BEADS_MCP_KEY`, the same rules as the API's key: memory.doors.keys); the SDK's Host and Origin checks
(against DNS rebinding) are on for whichever loopback address it listens on.
"""

# No `from __future__ import annotations` here: the tools' argument types are built per server (the
# longest text is a server's setting) and the SDK reads them from the signatures as objects.

from memory.extras import require_extra

require_extra("mcp", ("mcp",), "the MCP server (beads-memory mcp)")

# after the check, so a missing SDK is named by its extra rather than failing here
import importlib.metadata  # noqa: E402
import inspect  # noqa: E402
import ipaddress  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Annotated, Any, Literal, ParamSpec, TypeVar, cast, get_args  # noqa: E402

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp.server.mcpserver.tools.base import Tool  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402
from pydantic_settings import BaseSettings, SettingsConfigDict  # noqa: E402
from starlette.datastructures import Headers  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from memory.context.block import hit_line, shown_as_outdated  # noqa: E402
from memory.context.recall import plan_query  # noqa: E402
from memory.doors import intake  # noqa: E402
from memory.doors.intake import FactIdText, Identifier, Moment, RememberKind, Role, SessionIdText, Text  # noqa: E402
from memory.doors.keys import key_matches, key_problem  # noqa: E402
from memory.errors import BeadsMemoryError, ConfigurationError  # noqa: E402
from memory.flags import Untrusted, texts  # noqa: E402
from memory.graph.audit import MAX_PAGE  # noqa: E402
from memory.graph.store import FactStore  # noqa: E402
from memory.model import UNTRUSTED_SOURCES, Fact, Hit, Kind, Source, Status  # noqa: E402

SERVER_NAME = "beads-memory"
PACKAGE = "langgraph-beads-memory"
Transport = Literal["stdio", "http"]
DEFAULT_PORT = 8766
MCP_PATH = "/mcp"
KEY_VARIABLE = "BEADS_MCP_KEY"
#: the longest text `capture` takes at all: a tool's result may exceed the message limit (capture
#: clips it), but not this
CAPTURE_CEILING = 100_000

P = ParamSpec("P")
R = TypeVar("R")


def server_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


# -- what the tools answer -----------------------------------------------------------------------


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _fact_fields(fact: Fact) -> dict[str, Any]:
    """What every fact the tools return says of itself: its ids, words, kind, status, source, when it
    was said and stored, and where (FactOut and HitOut alike)."""
    return {
        "id": str(fact.id),
        "short_id": fact.short_id,
        "text": fact.body,
        "kind": fact.kind,
        "status": fact.status,
        "source": fact.source,
        "said_at": fact.valid_from.isoformat(),
        "recorded_at": fact.recorded_at.isoformat(),
        "thread_id": fact.thread_id,
        "message_id": fact.message_id,
    }


class FactOut(Out):
    """One fact, every field a client may sort or filter on."""

    id: str
    short_id: str = Field(description="what the block shows, and what the other tools accept")
    text: str
    kind: Kind
    status: Status = Field(description="active; superseded (replaced: see current_id); archived")
    source: Source = Field(description="how it was stored: passive_capture, remember_tool, tool_result, ...")
    current: bool = Field(description="this is the current version of its claim")
    current_id: str = Field(description="the id of its claim's current version")
    pinned: bool = Field(description="its claim is pinned into every prompt")
    said_at: str = Field(description="when it was said (ISO 8601): it holds from then")
    valid_to: str | None = Field(description="when a later version replaced it")
    recorded_at: str = Field(description="when the memory stored it (ISO 8601)")
    thread_id: str | None
    message_id: str | None

    @classmethod
    def of(cls, fact: Fact, pinned: bool = False) -> "FactOut":
        return cls(
            **_fact_fields(fact),
            current=fact.id == fact.head_id,
            current_id=str(fact.head_id),
            pinned=pinned,
            valid_to=None if fact.valid_to is None else fact.valid_to.isoformat(),
        )


class FactBrief(Out):
    short_id: str
    text: str
    kind: Kind
    status: Status

    @classmethod
    def of(cls, fact: Fact) -> "FactBrief":
        return cls(short_id=fact.short_id, text=fact.body, kind=fact.kind, status=fact.status)


class HitOut(Out):
    """One search hit: the fact in its current version, why it ranks, and where it came from."""

    id: str
    short_id: str
    text: str
    kind: Kind
    status: Status
    source: Source
    said_at: str
    recorded_at: str
    pinned: bool
    score: float = Field(description="what hits are ordered by, higher first")
    distance: float = Field(description="1 - cosine similarity to the query")
    outdated: bool = Field(description="the block marks it as an old value")
    untrusted: bool = Field(description="a tool's result or a web page, not the user's words")
    flags: list[str]
    resolved_from: FactBrief | None = Field(description="the older version that matched, when it did")
    line: str = Field(description="the hit's line in the block")
    thread_id: str | None
    message_id: str | None

    @classmethod
    def of(cls, hit: Hit, pinned: bool) -> "HitOut":
        fact = hit.fact
        return cls(
            **_fact_fields(fact),
            pinned=pinned,
            score=round(hit.score, 4),
            distance=round(hit.distance, 4),
            outdated=shown_as_outdated(hit),
            untrusted=fact.source in UNTRUSTED_SOURCES or any(isinstance(f, Untrusted) for f in hit.flags),
            flags=texts(hit.flags),
            resolved_from=None if hit.resolved_from is None else FactBrief.of(hit.resolved_from),
            line=hit_line(hit),
        )


class Replaced(Out):
    new: FactBrief
    old: FactBrief
    reason: str
    kept: list[FactBrief] = Field(
        default_factory=list, description="the parts of old the correction did not address, kept as facts"
    )


class CaptureOut(Out):
    session_id: str
    captured: bool = Field(description="false: nothing was stored (see note)")
    written: int = Field(description="facts this call wrote")
    duplicate: bool = Field(description="already stored: nothing written")
    note: str | None
    facts: list[FactBrief]
    superseded: list[Replaced] = Field(description="earlier claims the message replaced")


class SearchOut(Out):
    session_id: str
    not_in_memory: bool = Field(description="nothing relevant is stored")
    block: str = Field(description="what a model would be given: the hits, then the pinned facts")
    hits: list[HitOut]
    pinned: list[FactOut] = Field(
        description="the session's pinned facts: those a person pinned go into every prompt, the"
        " standing rules capture pinned into the prompts they are nearest (`block` shows which)"
    )


class PageOut(Out):
    session_id: str
    facts: list[FactOut] = Field(description="newest first")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last")


class GetOut(Out):
    session_id: str
    fact: FactOut


class LinkOut(Out):
    relation: str
    target: FactBrief
    ok: bool
    detail: str | None


class RememberOut(Out):
    session_id: str
    written: bool = Field(description="false: this exact fact was already stored")
    fact: FactOut
    links: list[LinkOut]


class HistoryOut(Out):
    session_id: str
    current_id: str
    versions: list[FactOut] = Field(description="oldest first, the current one last")


class PinOut(Out):
    session_id: str
    pinned: FactOut = Field(description="the pinned claim's current version")


class UnpinOut(Out):
    session_id: str
    unpinned: int = Field(description="pins removed (0: it was not pinned)")


class DeleteOut(Out):
    session_id: str
    deleted: FactOut = Field(description="the fact as it was")
    current: FactOut | None = Field(
        description="the version of its claim that is current now (null: the claim had no other version)"
    )
    restored: list[FactOut] = Field(description="versions the delete made current again")
    note: str


class ForgetOut(Out):
    session_id: str
    deleted_facts: int


# -- tools that say what they do -----------------------------------------------------------------

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def short_errors(exc: ValidationError) -> str:
    """A validation error as one line per argument, without pydantic's input echo and link."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            parts.append(f"{where}: not an argument of this tool")
        else:
            parts.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


class StrictTool(Tool):
    """A tool whose arguments are checked strictly (an unknown one is refused), and whose refusals
    read as one short sentence."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"{self.name}: {short_errors(cause)}") from cause
            if isinstance(cause, ToolError):  # our own refusal: its sentence, without the SDK's prefix
                raise ToolError(str(cause)) from cause
            raise


def strict_tool(fn: Callable[..., Any], title: str, annotations: ToolAnnotations) -> Tool:
    tool = StrictTool.from_function(
        fn,
        title=title,
        description=inspect.cleandoc(fn.__doc__ or ""),
        annotations=annotations.model_copy(update={"title": title}),
        structured_output=True,
    )
    loose = tool.fn_metadata.arg_model
    config = ConfigDict(**{**loose.model_config, "extra": "forbid"})
    strict = cast(type[BaseModel], type(loose.__name__, (loose,), {"model_config": config}))
    metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
    return tool.model_copy(
        update={"fn_metadata": metadata, "parameters": strict.model_json_schema(by_alias=True)}
    )


def build_server(
    store: FactStore,
    *,
    session_id: str | None = None,
    max_message_chars: int = intake.DEFAULT_MAX_MESSAGE_CHARS,
) -> MCPServer[Any]:
    """The MCP server over `store`; with `session_id`, every call is that session's."""
    if session_id is not None and not re.fullmatch(intake.SESSION_ID_PATTERN, session_id):
        raise ConfigurationError(f"session {session_id!r}: {intake.SESSION_ID_RULE}")
    fixed = f" This server serves session {session_id!r} only." if session_id else ""
    limit = max_message_chars

    SessionArg = Annotated[
        SessionIdText | None,
        Field(description=f"whose memory ({intake.SESSION_ID_RULE}); leave out on a server started with one"),
    ]
    FactArg = Annotated[FactIdText, Field(description="a fact's id, or the 8-character short id a hit shows")]

    def bounded(longest: int) -> Any:
        # the length checked as a string's (before memory.doors.intake's rules, which Text adds after)
        return Annotated[str, Field(min_length=1, max_length=longest), *get_args(Text)[1:]]

    LimitedText = bounded(limit)

    def session(given: str | None) -> str:
        if session_id is not None:
            if given is not None and given != session_id:
                raise ToolError(f"this server serves session {session_id!r} only, not {given!r}")
            return session_id
        if given is None:
            raise ToolError("say whose memory: pass session_id (or start the server with --session)")
        return given

    async def call(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a blocking store call on the store's threads; a library refusal is the tool's error."""
        try:
            return await store.aio.run(fn, *args, **kwargs)
        except BeadsMemoryError as exc:
            raise ToolError(str(exc)) from None

    def refuse(problem: str | None) -> None:
        if problem:
            raise ToolError(problem)

    async def pinned_heads(sid: str) -> set[str]:
        return {str(p.fact.id) for p in await call(store.pinned, sid)}

    async def capture(
        text: Annotated[
            bounded(CAPTURE_CEILING),  # type: ignore[valid-type]
            Field(
                description=f"the message, verbatim: at most {limit} characters (a tool's result may be "
                "longer: it is clipped)",
            ),
        ],
        role: Annotated[
            Role,
            Field(
                description="user: split into the user's claims; tool: a tool's result, stored as untrusted "
                "content; assistant: a final answer, kept as a conclusion when it is one"
            ),
        ] = "user",
        session_id: SessionArg = None,
        thread_id: Annotated[Identifier | None, Field(description="the conversation it belongs to")] = None,
        message_id: Annotated[
            Identifier | None, Field(description="the message's id: sending it again writes nothing")
        ] = None,
        time: Annotated[Moment | None, Field(description="when it was said, with its offset")] = None,
        tool_name: Annotated[Identifier | None, Field(description="for a tool result: the tool")] = None,
        is_error: Annotated[bool, Field(description="for a tool result: the tool failed (skipped)")] = False,
    ) -> CaptureOut:
        """Capture one message as the memory middleware would: the user's words are stored verbatim as
        claims, and a claim that changes an earlier one's value replaces it (the old one stays as
        history). Sending the same message again writes nothing."""
        message = intake.Message(role, text, time, message_id, tool_name, is_error)
        refuse(intake.message_problem("text", message, limit))
        sid = session(session_id)
        [done] = await call(intake.capture_messages, store, sid, [message], thread_id)
        return CaptureOut(
            session_id=sid,
            captured=done.captured,
            written=done.written,
            duplicate=done.duplicate,
            note=done.note,
            facts=[FactBrief.of(f) for f in done.facts],
            superseded=[
                Replaced(
                    new=FactBrief.of(s.new),
                    old=FactBrief.of(s.old),
                    reason=s.reason,
                    kept=[FactBrief.of(k) for k in s.kept],
                )
                for s in done.superseded
            ],
        )

    async def search(
        query: Annotated[LimitedText, Field(description="what to look for, in words")],  # type: ignore[valid-type]
        session_id: SessionArg = None,
        k: Annotated[int, Field(ge=1, le=50, description="the most facts to return")] = 8,
    ) -> SearchOut:
        """The facts that answer `query`, ranked, each in its current version (a match on an old value
        returns the value that replaced it, flagged); the session's pinned facts; and `block`, the
        text a model would be given. To browse everything instead, use list."""
        sid = session(session_id)
        ns = await call(intake.existing_root, store, sid)
        result = await call(store.search, ns, query, k=k)
        pins = [p for p in await call(store.pinned, sid, ns) if p.excluded_because is None]
        heads = {p.fact.id for p in pins}
        # what the model would read for the query (memory.context.recall.plan_query): the middleware's block
        plan = await call(plan_query, store, ns, query)
        return SearchOut(
            session_id=sid,
            not_in_memory=result.not_in_memory,
            block=plan.block,
            hits=[HitOut.of(h, h.fact.id in heads) for h in result.hits],
            pinned=[FactOut.of(p.fact, pinned=True) for p in pins],
        )

    async def list_facts(
        session_id: SessionArg = None,
        kind: Annotated[Kind | None, Field(description="only facts of this kind")] = None,
        source: Annotated[Source | None, Field(description="only facts stored this way")] = None,
        status: Annotated[
            Status | Literal["any"],
            Field(
                description="active: current facts (the default); superseded or archived: retired ones; any"
            ),
        ] = Status.ACTIVE,
        pinned: Annotated[
            bool | None, Field(description="true: only pinned claims; false: only unpinned")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="facts per page")] = 20,
        cursor: Annotated[
            str | None,
            Field(max_length=200, description="next_cursor of the page before; leave out for the first"),
        ] = None,
    ) -> PageOut:
        """A session's facts, newest first, a page at a time, filtered by kind, source, status or
        pinned: what is in memory, without a query to match."""
        sid = session(session_id)
        await call(intake.existing_root, store, sid)
        page = await call(
            store.audit.list_facts,
            sid,
            kind=kind,
            source=source,
            status=None if status == "any" else status,
            pinned=pinned,
            limit=limit,
            cursor=cursor,
        )
        return PageOut(
            session_id=sid,
            facts=[FactOut.of(item.fact, item.pinned) for item in page.facts],
            next_cursor=page.next_cursor,
        )

    async def get(fact_id: FactArg, session_id: SessionArg = None) -> GetOut:
        """One fact by its id or short id, whichever version it is (current_id names the current one)."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        return GetOut(session_id=sid, fact=FactOut.of(fact, str(fact.head_id) in await pinned_heads(sid)))

    async def remember(
        text: Annotated[LimitedText, Field(description="the fact, as it should be stored")],  # type: ignore[valid-type]
        session_id: SessionArg = None,
        kind: Annotated[
            RememberKind,
            Field(description="conclusion: the agent concluded it; user_input: the user said it"),
        ] = "conclusion",
        time: Annotated[Moment | None, Field(description="valid from then, with its offset")] = None,
    ) -> RememberOut:
        """Store one fact as it is written (unsplit)."""
        sid = session(session_id)
        done = await call(intake.remember_linked, store, sid, text, kind=kind, time=time)
        return await remembered(sid, done)

    async def remembered(sid: str, done: intake.Remembered) -> RememberOut:
        links = [
            LinkOut(relation=k.relation.value, target=FactBrief.of(k.target), ok=k.ok, detail=k.detail)
            for k in done.links
        ]
        pinned = str(done.fact.head_id) in await pinned_heads(sid)
        return RememberOut(
            session_id=sid, written=done.written, fact=FactOut.of(done.fact, pinned), links=links
        )

    async def correct(
        fact_id: FactArg,
        text: Annotated[LimitedText, Field(description="the fact as it is now")],  # type: ignore[valid-type]
        session_id: SessionArg = None,
        kind: Annotated[
            RememberKind,
            Field(description="user_input: the user said so (the default); conclusion: the agent"),
        ] = "user_input",
    ) -> RememberOut:
        """Correct a fact: `text` replaces its current version, which stays as history. Refused, with
        nothing stored, when `text` is not about the same thing (use remember for a new fact)."""
        sid = session(session_id)
        done = await call(intake.correct_fact, store, sid, fact_id, text, kind=kind)
        return await remembered(sid, done)

    async def history(fact_id: FactArg, session_id: SessionArg = None) -> HistoryOut:
        """Every version of a fact's claim, oldest first, the current one last."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        versions = await call(store.audit.history, fact)
        pinned = str(fact.head_id) in await pinned_heads(sid)
        return HistoryOut(
            session_id=sid,
            current_id=str(versions[-1].id),
            versions=[FactOut.of(v, pinned) for v in versions],
        )

    async def pin(fact_id: FactArg, session_id: SessionArg = None) -> PinOut:
        """Pin a fact's claim into every prompt (a later correction stays pinned); a tool's result
        never is."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        pinned = await call(store.pin, fact, pinned_by="mcp")
        return PinOut(session_id=sid, pinned=FactOut.of(pinned, pinned=True))

    async def unpin(fact_id: FactArg, session_id: SessionArg = None) -> UnpinOut:
        """Unpin a fact's claim, whichever of its versions was pinned."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        return UnpinOut(session_id=sid, unpinned=await call(store.unpin, fact))

    async def delete(fact_id: FactArg, session_id: SessionArg = None) -> DeleteOut:
        """Delete one fact for good: the fact, its links and its vectors. The rest of its claim stays:
        when it had replaced an earlier version, that version is current again (`current` says which
        version is current now)."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        done = await call(store.delete, fact)
        heads = await pinned_heads(sid)
        current = (
            None if done.current is None else FactOut.of(done.current, str(done.current.head_id) in heads)
        )
        return DeleteOut(
            session_id=sid,
            deleted=FactOut.of(done.fact, pinned=False),
            current=current,
            restored=[FactOut.of(f, str(f.head_id) in heads) for f in done.restored],
            note=intake.deleted_note(done),
        )

    async def forget(
        session_id: Annotated[SessionIdText, Field(description="the session to delete, spelled out")],
    ) -> ForgetOut:
        """Forget a session: a real delete of every fact, edge and namespace it holds."""
        sid = session(session_id)
        await call(intake.existing_root, store, sid)
        refuse(await call(intake.forget_refusal, store, sid))
        return ForgetOut(session_id=sid, deleted_facts=await call(store.forget, sid))

    list_facts.__name__ = "list"
    tools = [
        strict_tool(capture, "Capture a message", WRITE),
        strict_tool(search, "Search the memory", READ),
        strict_tool(list_facts, "List a session's facts", READ),
        strict_tool(get, "Get one fact", READ),
        strict_tool(remember, "Remember a fact", WRITE),
        strict_tool(correct, "Correct a fact", WRITE),
        strict_tool(history, "A fact's versions", READ),
        strict_tool(pin, "Pin a fact", WRITE),
        strict_tool(unpin, "Unpin a fact", WRITE),
        strict_tool(delete, "Delete one fact", DELETE),
        strict_tool(forget, "Forget a session", DELETE),
    ]
    return MCPServer(
        SERVER_NAME,
        title="Beads memory",
        version=server_version(),
        instructions="Durable memory of typed claims: capture what the user says, search before you answer, "
        "correct a fact when its value changed (the old value stays as history), list to browse." + fixed,
        tools=tools,
    )


# -- HTTP: loopback, a key, and the Host/Origin checks -------------------------------------------


class McpSettings(BaseSettings):
    """What `beads-memory mcp --transport http` reads from the environment."""

    model_config = SettingsConfigDict(env_prefix="BEADS_MCP_", env_file=".env", extra="ignore")

    key: str | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_names(host: str) -> list[str]:
    """The Host header values a client of a server bound to `host` sends (without the port)."""
    if host == "localhost":
        return ["localhost", "127.0.0.1", "[::1]"]
    address = ipaddress.ip_address(host)
    literal = f"[{address.compressed}]" if address.version == 6 else address.compressed
    # localhost resolves to these two, and to no other loopback address
    return [literal, "localhost"] if address.compressed in ("127.0.0.1", "::1") else [literal]


def rebinding_checks(host: str, port: int) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for a server on `host`:`port`, exact values only. The SDK turns
    them on by itself for 127.0.0.1, localhost and ::1 alone; bound to 127.0.0.2 it would serve a
    page whose name was rebound to that address."""
    names = loopback_names(host)
    hosts = [f"{n}:{port}" for n in names] + (names if port == 80 else [])
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


class BearerKey:
    """Every HTTP request needs `Authorization: Bearer <key>` (compared in constant time). No
    lockout after wrong keys: the key is long enough that guessing is hopeless, and a lockout would let
    any local page lock the real client out."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan
            await self.app(scope, receive, send)
            return
        scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            detail = f"This server needs 'Authorization: Bearer <key>' with the key set in {KEY_VARIABLE}."
        elif not key_matches(token, self.key):
            detail = "Wrong key."
        else:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def http_key(key: str | None) -> str:
    """The key HTTP needs: refused when missing or too weak, saying how to make one."""
    if key is None or not key.strip():
        raise ConfigurationError(
            f"--transport http needs a key: set {KEY_VARIABLE} (clients send it as 'Authorization: "
            "Bearer <key>'); make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if problem := key_problem(key, KEY_VARIABLE):
        raise ConfigurationError(problem)
    return key


def http_app(server: MCPServer[Any], *, host: str, port: int, key: str) -> ASGIApp:
    """The streamable HTTP app at MCP_PATH, behind the key and the Host/Origin checks."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=rebinding_checks(host, port), host=host
    )
    return BearerKey(app, key)


def serve(
    store: FactStore,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    session_id: str | None = None,
    max_message_chars: int = intake.DEFAULT_MAX_MESSAGE_CHARS,
    key: str | None = None,
) -> None:
    """Serve until the client hangs up (stdio) or the process is stopped (HTTP, at `MCP_PATH`, with
    `key`: by default BEADS_MCP_KEY)."""
    if transport == "http":
        if not is_loopback(host):
            raise ConfigurationError(
                f"--host {host}: the MCP server serves loopback addresses only; put it behind a proxy "
                "that terminates TLS for anything else"
            )
        key = http_key(key if key is not None else McpSettings().key)
    server = build_server(store, session_id=session_id, max_message_chars=max_message_chars)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn  # the SDK's own dependency

    assert key is not None
    app = http_app(server, host=host, port=port, key=key)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


__all__ = [
    "DEFAULT_PORT",
    "KEY_VARIABLE",
    "MCP_PATH",
    "SERVER_NAME",
    "BearerKey",
    "build_server",
    "http_app",
    "is_loopback",
    "rebinding_checks",
    "serve",
    "server_version",
]
