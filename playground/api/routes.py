"""The memory over HTTP: capture, search, history, remember, pin and forget, as JSON under /api/.

A session here is one memory (`FactStore.root(session_id)`): everything one user told the agent, over
as many conversations as they had (each conversation is a `thread_id`). Routes call the library's
public store (`FactStore` through its async face) and nothing else writes the fact graph: messages are
captured exactly as `BeadsMemoryMiddleware` captures them, and the search answers with the block the
middleware would inject, hit by hit (memory.context.block).

Reads of a session that holds nothing answer 404 (a read never creates a session); writes create it.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Response

from memory.context.block import hit_line, shown_as_outdated
from memory.context.recall import plan_query
from memory.doors import intake
from memory.doors.intake import FACT_ID_PATTERN, SESSION_ID_PATTERN, SESSION_ID_RULE
from memory.errors import BeadsMemoryError
from memory.flags import Untrusted, texts
from memory.graph.audit import MAX_PAGE
from memory.graph.store import AsyncFactStore, FactStore
from memory.model import (
    UNTRUSTED_SOURCES,
    Deleted,
    Fact,
    FactPage,
    Hit,
    Kind,
    Namespace,
    Source,
    Status,
)
from memory.postgres.migrate import LIBRARY_MIGRATIONS
from playground.api.auth import require_api_access
from playground.api.errors import ApiError, library_error
from playground.api.models import (
    CaptureRequest,
    CaptureResponse,
    Check,
    CountRow,
    DeleteFactResponse,
    Dropped,
    ErrorBody,
    FactBrief,
    FactOut,
    FactPageResponse,
    FactResponse,
    ForgetResponse,
    HealthResponse,
    HistoryResponse,
    Link,
    ListedFact,
    MessageOutcome,
    NamespaceOut,
    PinResponse,
    Provenance,
    RememberRequest,
    RememberResponse,
    ResolvedFrom,
    SearchHit,
    SearchRequest,
    SearchResponse,
    SessionStats,
    StatsResponse,
    Supersession,
    UnpinResponse,
)
from playground.db import PLAYGROUND_MIGRATIONS
from playground.deps import RuntimeDep
from playground.runtime import Runtime

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description=f"one memory: {SESSION_ID_RULE}")]
FactId = Annotated[str, Path(pattern=FACT_ID_PATTERN, description="a fact's id, or its 8-character short id")]
HEALTH_TIMEOUT_S = 5.0

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "a body that is not JSON, or a Host header this app does not answer to"),
        (401, "no key, or the wrong one (when PLAYGROUND_API_KEY is set)"),
        (403, "served off loopback without PLAYGROUND_API_KEY, or a browser's cross-origin request"),
        (413, "a body over the size limit"),
        (415, "a body sent as anything but application/json"),
        (422, "a malformed request: the detail says which field and why"),
        (429, "too many wrong keys from this address: try again after Retry-After seconds"),
        (503, "the database is unreachable"),
    )
}


def listed(fact: Fact, pinned: bool) -> ListedFact:
    return ListedFact(**FactOut.of(fact).model_dump(), pinned=pinned)


def _not_found(what: str) -> dict[int | str, dict[str, Any]]:
    return {404: {"model": ErrorBody, "description": f"no such {what}"}}


# -- shared steps --------------------------------------------------------------------------------


async def _call(coroutine: Any) -> Any:
    """Await a store call; the library's refusals become client errors (see playground.api.errors)."""
    try:
        return await coroutine
    except BeadsMemoryError as exc:
        raise library_error(exc) from None


async def existing_root(facts: AsyncFactStore, session_id: str) -> Namespace:
    """The session's root namespace, or 404: a read never creates a session."""
    namespaces: list[Namespace] = await facts.session_namespaces(session_id)
    root = next((ns for ns in namespaces if ns.parent_id is None), None)
    if root is None:
        raise ApiError(404, f"No session {session_id!r} in memory: nothing was stored under it.")
    return root


async def fact_in_session(facts: AsyncFactStore, session_id: str, fact_id: str) -> Fact:
    """The fact `fact_id` (full or short id) of this session; another session's is as if absent."""
    return await _call(facts.run(intake.fact_in_session, facts.sync, session_id, fact_id))  # type: ignore[no-any-return]


def capture_batch(store: FactStore, session_id: str, body: CaptureRequest) -> CaptureResponse:
    """The messages, captured as the middleware captures them (memory.doors.intake's policy)."""
    captured = intake.capture_messages(store, session_id, body.messages, body.thread_id)
    outcomes = [
        MessageOutcome(
            index=index,
            role=message.role,
            message_id=message.message_id,
            captured=c.captured,
            written=c.written,
            duplicate=c.duplicate,
            note=c.note,
            facts=[FactBrief.of(f) for f in c.facts],
            superseded=[
                Supersession(
                    new=FactBrief.of(s.new),
                    old=FactBrief.of(s.old),
                    reason=s.reason,
                    kept=[FactBrief.of(k) for k in s.kept],
                )
                for s in c.superseded
            ],
        )
        for index, (message, c) in enumerate(zip(body.messages, captured, strict=True))
    ]
    return CaptureResponse(
        session_id=session_id,
        written=sum(o.written for o in outcomes),
        duplicates=sum(o.duplicate for o in outcomes),
        messages=outcomes,
    )


def search_session(store: FactStore, ns: Namespace, body: SearchRequest) -> SearchResponse:
    """The ranked hits (at most k), and the block: what the model would read for the query asked with
    no conversation in its window (memory.context.recall.plan_query), pinned facts included."""
    result = store.search(ns, body.query, replace(store.search_options, k=body.k), as_of=body.as_of)
    passage_ids = sorted({h.fact.passage_id for h in result.hits if h.fact.passage_id is not None})
    passages = store.passages(passage_ids) if passage_ids else {}
    return SearchResponse(
        session_id=ns.session_id,
        query=body.query,
        as_of=body.as_of,
        not_in_memory=result.not_in_memory,
        best_score=result.best_score,
        block=plan_query(store, ns, body.query, as_of=body.as_of).block,
        hits=[_hit(h, passages) for h in result.hits],
        dropped=[Dropped(short_id=s, reason=r) for s, r in result.dropped],
    )


def _hit(hit: Hit, passages: dict[uuid.UUID, str]) -> SearchHit:
    fact = hit.fact
    resolved = hit.resolved_from
    return SearchHit(
        id=fact.id,
        short_id=fact.short_id,
        text=fact.body,
        kind=fact.kind,
        status=fact.status,
        distance=round(hit.distance, 4),
        score=round(hit.score, 4),
        claim_similarity=round(hit.claim_similarity, 4),
        passage_similarity=None if hit.passage_similarity is None else round(hit.passage_similarity, 4),
        demoted=hit.demoted,
        flags=texts(hit.flags),
        outdated=shown_as_outdated(hit),
        untrusted=fact.source in UNTRUSTED_SOURCES or any(isinstance(f, Untrusted) for f in hit.flags),
        resolved_from=None
        if resolved is None
        else ResolvedFrom(
            id=resolved.id,
            short_id=resolved.short_id,
            text=resolved.body,
            status=resolved.status,
            recorded_at=resolved.recorded_at,
        ),
        line=hit_line(hit),
        provenance=Provenance(
            source=fact.source,
            agent_id=fact.agent_id,
            acting_on_behalf_of=fact.acting_on_behalf_of,
            thread_id=fact.thread_id,
            message_id=fact.message_id,
            valid_from=fact.valid_from,
            recorded_at=fact.recorded_at,
            passage_id=fact.passage_id,
            span=fact.span,
            passage=passages.get(fact.passage_id) if fact.passage_id is not None else None,
        ),
    )


def session_stats(store: FactStore, session_id: str) -> SessionStats:
    rows = [CountRow.model_validate(r) for r in store.audit.stats(session_id)]
    by: dict[str, dict[str, int]] = {"kind": {}, "source": {}, "status": {}}
    for row in rows:
        for field, counts in by.items():
            value = str(getattr(row, field).value)
            counts[value] = counts.get(value, 0) + row.facts
    return SessionStats(
        session_id=session_id,
        facts=sum(r.facts for r in rows),
        by_kind=by["kind"],
        by_source=by["source"],
        by_status=by["status"],
        rows=rows,
        namespaces=[
            NamespaceOut(id=n.id, parent_id=n.parent_id, path=list(n.path), agent_id=n.agent_id)
            for n in store.session_namespaces(session_id)
        ],
        edges=store.audit.edge_counts(session_id),
        pinned=len(store.pinned(session_id)),
    )


async def check_health(rt: Runtime) -> HealthResponse:
    checks: dict[str, Check] = {}
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S), rt.pool.connection(timeout=HEALTH_TIMEOUT_S) as conn:
            await conn.execute("SELECT 1")
            checks["database"] = Check(ok=True, detail="reachable")
            pending = {
                "library": await LIBRARY_MIGRATIONS.apending(conn),
                "playground": await PLAYGROUND_MIGRATIONS.apending(conn),
            }
        late = {name: versions for name, versions in pending.items() if versions}
        checks["migrations"] = Check(
            ok=not late,
            detail="current" if not late else "; ".join(f"{n}: {v} not applied" for n, v in late.items()),
        )
    except Exception as exc:  # whatever stops the check is the answer
        checks.setdefault("database", Check(ok=False, detail=f"unreachable: {type(exc).__name__}: {exc}"))
        checks.setdefault("migrations", Check(ok=False, detail="unknown: the database is unreachable"))
    try:
        embedder = rt.embedder
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            [vector] = await rt.facts.aio.run(embedder.embed, ["health check"])
        ready = len(vector) == embedder.dims
        detail = (
            f"{embedder.name}: ready"
            if ready
            else f"{embedder.name}: {len(vector)} dimensions, not {embedder.dims}"
        )
        checks["embedder"] = Check(ok=ready, detail=detail)
    except Exception as exc:
        checks["embedder"] = Check(ok=False, detail=f"{rt.embedder.name}: {type(exc).__name__}: {exc}")
    return HealthResponse(ok=all(c.ok for c in checks.values()), checks=checks)


# -- the routes ----------------------------------------------------------------------------------


def api_router() -> APIRouter:
    router = APIRouter(
        prefix="/api", tags=["memory"], dependencies=[Depends(require_api_access)], responses=_ERRORS
    )

    @router.get(
        "/health",
        response_model=HealthResponse,
        responses={503: {"model": HealthResponse, "description": "a check failed"}},
    )
    async def health(rt: RuntimeDep, response: Response) -> HealthResponse:
        """Whether the database answers, its migrations are current and the embedder embeds."""
        result = await check_health(rt)
        if not result.ok:
            response.status_code = 503
        return result

    @router.get("/stats", response_model=StatsResponse, responses=_not_found("session"))
    async def stats(
        rt: RuntimeDep,
        session_id: Annotated[str | None, Query(pattern=SESSION_ID_PATTERN)] = None,
    ) -> StatsResponse:
        """Per session: facts by kind, source and status; its namespaces; its edges; its pins."""
        facts = rt.facts.aio
        if session_id is not None:
            await existing_root(facts, session_id)
            sessions = [session_id]
        else:
            sessions = await facts.audit.sessions()
        return StatsResponse(sessions=[await facts.run(session_stats, rt.facts, s) for s in sessions])

    @router.post("/sessions/{session_id}/messages", response_model=CaptureResponse)
    async def capture(session_id: SessionId, body: CaptureRequest, rt: RuntimeDep) -> CaptureResponse:
        """Capture messages as the middleware does: a user's message is split into claims verbatim
        (questions kept as directives), a tool result is untrusted content, an assistant's final
        answer is kept as a conclusion when it is one. Sending a message again writes nothing."""
        limit = rt.settings.max_message_chars
        for i, message in enumerate(body.messages):
            if problem := intake.message_problem(f"messages.{i}", message, limit):
                raise ApiError(422, problem)
        return await _call(rt.facts.aio.run(capture_batch, rt.facts, session_id, body))  # type: ignore[no-any-return]

    @router.post(
        "/sessions/{session_id}/search", response_model=SearchResponse, responses=_not_found("session")
    )
    async def search(session_id: SessionId, body: SearchRequest, rt: RuntimeDep) -> SearchResponse:
        """The ranked block for a query, hit by hit: distance, flags (outdated, untrusted), the
        superseded version a hit resolved from, and where each claim came from."""
        if problem := intake.text_problem("query", body.query, rt.settings.max_message_chars):
            raise ApiError(422, problem)
        facts = rt.facts.aio
        ns = await existing_root(facts, session_id)
        return await _call(facts.run(search_session, rt.facts, ns, body))  # type: ignore[no-any-return]

    @router.get(
        "/sessions/{session_id}/facts",
        response_model=FactPageResponse,
        responses={
            404: {"model": ErrorBody, "description": "no such session, or a cursor no listing handed out"}
        },
    )
    async def list_facts(
        session_id: SessionId,
        rt: RuntimeDep,
        kind: Annotated[Kind | None, Query(description="only facts of this kind")] = None,
        source: Annotated[Source | None, Query(description="only facts stored this way")] = None,
        status: Annotated[
            Status | Literal["any"],
            Query(description="active: current facts (the default); superseded or archived: retired; any"),
        ] = Status.ACTIVE,
        pinned: Annotated[
            bool | None, Query(description="true: pinned claims only; false: unpinned only")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="facts per page")] = 20,
        cursor: Annotated[
            str | None, Query(max_length=200, description="next_cursor of the page before")
        ] = None,
    ) -> FactPageResponse:
        """The session's facts, newest first, a page at a time, filtered by kind, source, status or
        pinned (the MCP server's list tool)."""
        facts = rt.facts.aio
        await existing_root(facts, session_id)
        page: FactPage = await _call(
            facts.audit.list_facts(
                session_id,
                kind=kind,
                source=source,
                status=None if status == "any" else status,
                pinned=pinned,
                limit=limit,
                cursor=cursor,
            )
        )
        return FactPageResponse(
            session_id=session_id,
            facts=[listed(item.fact, item.pinned) for item in page.facts],
            next_cursor=page.next_cursor,
        )

    @router.get(
        "/sessions/{session_id}/facts/{fact_id}", response_model=FactResponse, responses=_not_found("fact")
    )
    async def get_fact(session_id: SessionId, fact_id: FactId, rt: RuntimeDep) -> FactResponse:
        """One fact, whichever version it is (head_id names its claim's current version)."""
        facts = rt.facts.aio
        fact = await fact_in_session(facts, session_id, fact_id)
        pins = await _call(facts.pinned(session_id))
        return FactResponse(
            session_id=session_id, fact=listed(fact, any(p.fact.id == fact.head_id for p in pins))
        )

    @router.delete(
        "/sessions/{session_id}/facts/{fact_id}",
        response_model=DeleteFactResponse,
        responses=_not_found("fact"),
    )
    async def delete_fact(session_id: SessionId, fact_id: FactId, rt: RuntimeDep) -> DeleteFactResponse:
        """Delete one fact for good (its edges, vectors and pin with it). The rest of its claim stays:
        when it had replaced an earlier version, that version is current again; `current` says which
        version is current now."""
        facts = rt.facts.aio
        fact = await fact_in_session(facts, session_id, fact_id)
        done: Deleted = await _call(facts.delete(fact))
        return DeleteFactResponse(
            session_id=session_id,
            deleted=FactOut.of(done.fact),
            current=None if done.current is None else FactOut.of(done.current),
            restored=[FactOut.of(f) for f in done.restored],
            note=intake.deleted_note(done),
        )

    @router.get(
        "/sessions/{session_id}/facts/{fact_id}/history",
        response_model=HistoryResponse,
        responses=_not_found("fact"),
    )
    async def history(session_id: SessionId, fact_id: FactId, rt: RuntimeDep) -> HistoryResponse:
        """Every version of the claim, oldest first, the current one last."""
        facts = rt.facts.aio
        fact = await fact_in_session(facts, session_id, fact_id)
        versions: list[Fact] = await _call(facts.audit.history(fact))
        return HistoryResponse(
            session_id=session_id,
            fact_id=fact.id,
            current_id=versions[-1].id,
            versions=[FactOut.of(v) for v in versions],
        )

    @router.post(
        "/sessions/{session_id}/facts",
        response_model=RememberResponse,
        status_code=201,
        responses={200: {"model": RememberResponse, "description": "already stored"}, **_not_found("fact")},
    )
    async def remember(
        session_id: SessionId, body: RememberRequest, rt: RuntimeDep, response: Response
    ) -> RememberResponse:
        """Store one fact unsplit (as the remember_fact tool does), optionally correcting one
        (supersedes) or linked to others (contradicts, relates_to)."""
        if problem := intake.text_problem("text", body.text, rt.settings.max_message_chars):
            raise ApiError(422, problem)
        remembered: intake.Remembered = await _call(
            rt.facts.aio.run(
                intake.remember_linked,
                rt.facts,
                session_id,
                body.text,
                kind=body.kind,
                time=body.time,
                supersedes=body.supersedes,
                contradicts=body.contradicts,
                relates_to=body.relates_to,
            )
        )
        links = [
            Link(relation=k.relation.value, target=FactBrief.of(k.target), ok=k.ok, detail=k.detail)
            for k in remembered.links
        ]
        if not remembered.written:
            response.status_code = 200
        return RememberResponse(
            session_id=session_id, written=remembered.written, fact=FactOut.of(remembered.fact), links=links
        )

    @router.post(
        "/sessions/{session_id}/facts/{fact_id}/pin", response_model=PinResponse, responses=_not_found("fact")
    )
    async def pin(session_id: SessionId, fact_id: FactId, rt: RuntimeDep) -> PinResponse:
        """Pin the claim into every prompt (its current version; a later correction stays pinned).
        Tool results and web pages are never pinned (422)."""
        facts = rt.facts.aio
        fact = await fact_in_session(facts, session_id, fact_id)
        pinned: Fact = await _call(facts.pin(fact, pinned_by="api"))
        return PinResponse(session_id=session_id, pinned=FactOut.of(pinned))

    @router.delete(
        "/sessions/{session_id}/facts/{fact_id}/pin",
        response_model=UnpinResponse,
        responses=_not_found("fact"),
    )
    async def unpin(session_id: SessionId, fact_id: FactId, rt: RuntimeDep) -> UnpinResponse:
        """Unpin the claim, whichever of its versions was pinned."""
        facts = rt.facts.aio
        fact = await fact_in_session(facts, session_id, fact_id)
        removed: int = await _call(facts.unpin(fact))
        return UnpinResponse(session_id=session_id, fact_id=fact.id, unpinned=removed)

    @router.delete(
        "/sessions/{session_id}",
        response_model=ForgetResponse,
        responses={
            **_not_found("session"),
            409: {"model": ErrorBody, "description": "the session is a playground chat's: delete the chat"},
        },
    )
    async def forget(session_id: SessionId, rt: RuntimeDep) -> ForgetResponse:
        """Forget the session: a real delete of every fact, edge, passage and namespace it holds."""
        facts = rt.facts.aio
        await existing_root(facts, session_id)
        # the rule every door applies (the MCP server's and the command line's too)
        if refusal := await facts.run(intake.forget_refusal, rt.facts, session_id):
            raise ApiError(409, refusal)
        deleted: int = await _call(facts.forget(session_id))
        return ForgetResponse(session_id=session_id, deleted_facts=deleted)

    return router
