"""`beads-memory mcp`: the memory as a Model Context Protocol server, for any MCP client (a desktop
assistant, an IDE, an agent in another language), over stdio or streamable HTTP.

Tools: capture a message, search (the hits and the block a model would read), remember a fact,
correct one, show a fact's history, pin and unpin, and forget a session. What they accept and how
they capture is memory.intake's, which the playground's HTTP API uses too: a message sent here is
stored exactly as the API (and the middleware) would store it. A server started with a session
serves that session only; otherwise every call names its own. Forgetting always takes the session id
spelled out, so that no call forgets a memory by default.

The HTTP transport has no authentication of its own, so it serves loopback addresses only (the SDK
then also refuses requests whose Host or Origin is not loopback, against DNS rebinding).
"""

from __future__ import annotations

from memory.extras import require_extra

require_extra("mcp", ("mcp",), "the MCP server (beads-memory mcp)")

# after the check, so a missing SDK is named by its extra rather than failing here
import ipaddress  # noqa: E402
import re  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import datetime  # noqa: E402
from typing import Annotated, Any, Literal, ParamSpec, TypeVar  # noqa: E402

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from pydantic import Field  # noqa: E402

from memory import intake  # noqa: E402
from memory.block import hit_line, render_block, shown_as_outdated  # noqa: E402
from memory.errors import BeadsMemoryError, ConfigurationError  # noqa: E402
from memory.intake import FactIdText, Identifier, Moment, RememberKind, Role, SessionIdText, Text  # noqa: E402
from memory.model import UNTRUSTED_SOURCES, Fact, Hit  # noqa: E402
from memory.store import FactStore  # noqa: E402

SERVER_NAME = "beads-memory"
Transport = Literal["stdio", "http"]
DEFAULT_PORT = 8766
MCP_PATH = "/mcp"

P = ParamSpec("P")
R = TypeVar("R")

SessionArg = Annotated[
    SessionIdText | None,
    Field(description=f"whose memory ({intake.SESSION_ID_RULE}); leave out on a server started with one"),
]
FactArg = Annotated[FactIdText, Field(description="a fact's id, or the 8-character short id a hit shows")]


def fact_out(fact: Fact) -> dict[str, Any]:
    return {
        "id": str(fact.id),
        "short_id": fact.short_id,
        "text": fact.body,
        "kind": fact.kind.value,
        "status": fact.status.value,
        "source": fact.source.value,
        "current": fact.id == fact.head_id,
        "valid_from": fact.valid_from.isoformat(),
        "valid_to": None if fact.valid_to is None else fact.valid_to.isoformat(),
        "recorded_at": fact.recorded_at.isoformat(),
        "thread_id": fact.thread_id,
        "message_id": fact.message_id,
    }


def brief(fact: Fact) -> dict[str, Any]:
    return {
        "short_id": fact.short_id,
        "text": fact.body,
        "kind": fact.kind.value,
        "status": fact.status.value,
    }


def hit_out(hit: Hit) -> dict[str, Any]:
    fact = hit.fact
    return {
        "short_id": fact.short_id,
        "text": fact.body,
        "kind": fact.kind.value,
        "status": fact.status.value,
        "score": round(hit.score, 4),
        "distance": round(hit.distance, 4),
        "outdated": shown_as_outdated(hit),
        "untrusted": fact.source in UNTRUSTED_SOURCES or any(f.startswith("untrusted") for f in hit.flags),
        "flags": list(hit.flags),
        "resolved_from": None if hit.resolved_from is None else brief(hit.resolved_from),
        "line": hit_line(hit),
        "thread_id": fact.thread_id,
        "message_id": fact.message_id,
    }


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
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        instructions="Durable memory of typed claims: capture what the user says, search before you answer, "
        "correct a fact when its value changed (the old value stays as history)." + fixed,
    )

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

    @server.tool()
    async def capture(
        text: Text,
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
    ) -> dict[str, Any]:
        """Capture one message as the memory middleware would: the user's words are stored verbatim as
        claims, and a claim that changes an earlier one's value replaces it."""
        message = intake.Message(role, text, time, message_id, tool_name, is_error)
        refuse(intake.message_problem("message", message, max_message_chars))
        sid = session(session_id)
        [done] = await call(intake.capture_messages, store, sid, [message], thread_id)
        return {
            "session_id": sid,
            "captured": done.captured,
            "written": done.written,
            "duplicate": done.duplicate,
            "note": done.note,
            "facts": [brief(f) for f in done.facts],
            "superseded": [
                {"new": brief(s.new), "old": brief(s.old), "reason": s.reason} for s in done.superseded
            ],
        }

    @server.tool()
    async def search(
        query: Text,
        session_id: SessionArg = None,
        k: Annotated[int, Field(ge=1, le=50, description="the most facts to return")] = 8,
    ) -> dict[str, Any]:
        """The facts that answer `query`, ranked, each in its current version (a match on an old value
        returns the value that replaced it, flagged), and `block`: the text a model would be given."""
        refuse(intake.text_problem("query", query, max_message_chars))
        sid = session(session_id)
        ns = await call(intake.existing_root, store, sid)
        result = await call(store.search, ns, query, k=k)
        return {
            "session_id": sid,
            "not_in_memory": result.not_in_memory,
            "block": render_block(result),
            "hits": [hit_out(h) for h in result.hits],
        }

    async def remembered(
        sid: str, text: str, kind: RememberKind, time: datetime | None, supersedes: str | None
    ) -> dict[str, Any]:
        done = await call(
            intake.remember_linked, store, sid, text, kind=kind, time=time, supersedes=supersedes
        )
        links = [
            {"relation": k.relation.value, "target": brief(k.target), "ok": k.ok, "detail": k.detail}
            for k in done.links
        ]
        return {"session_id": sid, "written": done.written, "fact": fact_out(done.fact), "links": links}

    @server.tool()
    async def remember(
        text: Text,
        session_id: SessionArg = None,
        kind: Annotated[
            RememberKind,
            Field(description="conclusion: the agent concluded it; user_input: the user said it"),
        ] = "conclusion",
        time: Annotated[Moment | None, Field(description="valid from then, with its offset")] = None,
    ) -> dict[str, Any]:
        """Store one fact as it is written (unsplit)."""
        refuse(intake.text_problem("text", text, max_message_chars))
        return await remembered(session(session_id), text, kind, time, None)

    @server.tool()
    async def correct(
        fact_id: FactArg,
        text: Annotated[Text, Field(description="the fact as it is now")],
        session_id: SessionArg = None,
        kind: RememberKind = "user_input",
    ) -> dict[str, Any]:
        """Correct a fact: `text` replaces its current version, which stays as history. Refused (with
        the new fact kept, and the link reported ok=false) when the two are not about the same thing."""
        refuse(intake.text_problem("text", text, max_message_chars))
        return await remembered(session(session_id), text, kind, None, fact_id)

    @server.tool()
    async def history(fact_id: FactArg, session_id: SessionArg = None) -> dict[str, Any]:
        """Every version of a fact's claim, oldest first, the current one last."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        versions = await call(store.history, fact)
        return {
            "session_id": sid,
            "current_id": str(versions[-1].id),
            "versions": [fact_out(v) for v in versions],
        }

    @server.tool()
    async def pin(fact_id: FactArg, session_id: SessionArg = None) -> dict[str, Any]:
        """Pin a fact into every prompt (a later correction stays pinned); tool results never are."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        pinned = await call(store.pin, fact, pinned_by="mcp")
        return {"session_id": sid, "pinned": fact_out(pinned)}

    @server.tool()
    async def unpin(fact_id: FactArg, session_id: SessionArg = None) -> dict[str, Any]:
        """Unpin a fact, whichever of its versions was pinned."""
        sid = session(session_id)
        fact = await call(intake.fact_in_session, store, sid, fact_id)
        return {"session_id": sid, "unpinned": await call(store.unpin, fact)}

    @server.tool()
    async def forget(
        session_id: Annotated[SessionIdText, Field(description="the session to delete, spelled out")],
    ) -> dict[str, Any]:
        """Forget a session: a real delete of every fact, edge and namespace it holds."""
        sid = session(session_id)
        await call(intake.existing_root, store, sid)
        return {"session_id": sid, "deleted_facts": await call(store.forget, sid)}

    return server


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    store: FactStore,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    session_id: str | None = None,
    max_message_chars: int = intake.DEFAULT_MAX_MESSAGE_CHARS,
) -> None:
    """Serve until the client hangs up (stdio) or the process is stopped (HTTP, at `MCP_PATH`)."""
    if transport == "http" and not is_loopback(host):
        raise ConfigurationError(
            f"--host {host}: the MCP server has no authentication of its own, so it serves loopback "
            "addresses only; put it behind a proxy that authenticates"
        )
    server = build_server(store, session_id=session_id, max_message_chars=max_message_chars)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port, streamable_http_path=MCP_PATH)


__all__ = ["DEFAULT_PORT", "MCP_PATH", "SERVER_NAME", "build_server", "is_loopback", "serve"]
