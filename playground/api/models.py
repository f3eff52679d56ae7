"""The API's request and response bodies (pydantic), as the OpenAPI schema at /openapi.json shows them.

Text that Postgres cannot store is refused here with a 422, never passed on to fail as a 500 (the
rules are memory.doors.intake's, which the MCP server applies too).
Times must carry their offset: a naive time would be read in whatever zone the server runs in.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

# the validation every door shares (the MCP server's too): one rule, not a copy
from memory.doors.intake import MAX_MESSAGES, FactIdText, Identifier, Moment, Text
from memory.model import Fact, Kind, Source, Status

#: what memory.doors.intake's Text refuses, said in the schema: text that is empty or only whitespace
#: (str.strip's, which is Python's \s), or holds a NUL. Its longest length is the app's setting,
#: added to the schema where this pattern is (playground.api.docs).
NOT_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
BodyText = Annotated[Text, Field(json_schema_extra={"minLength": 1, "pattern": NOT_BLANK})]


def _json_number(value: object) -> object:
    """JSON Schema's integer: 3 or 3.0, never "3" or true (pydantic would read both as a number)."""
    if isinstance(value, str | bool):
        raise ValueError("is not a number")
    return value


JsonInteger = Annotated[int, BeforeValidator(_json_number)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    error: str = Field(description="a short code to branch on: not_found, invalid_request, unauthorized, ...")
    detail: str = Field(description="what was wrong, and how to fix it")


# -- capture -------------------------------------------------------------------------------------


class MessageIn(_Strict):
    # memory.doors.intake.message_problem's rule, said in the schema: tool_name and is_error belong to a
    # tool result (the text's length limit, which a tool result is exempt from, is added by
    # playground.api.docs under "else")
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"role": {"const": "tool"}}},
            "else": {"properties": {"tool_name": {"type": "null"}, "is_error": {"const": False}}},
        },
    )

    role: Literal["user", "tool", "assistant"] = Field(
        description="user: captured as the user's claims; tool: a tool result, stored as untrusted content "
        "(never a directive, never pinnable, never above the user's own claim); assistant: a final answer, "
        "kept as a conclusion when it is one (not a tool call written as text, an error or empty)"
    )
    text: BodyText
    time: Moment | None = Field(
        default=None, description="when it was said (with its offset); the claims are valid from then"
    )
    message_id: Identifier | None = Field(
        default=None,
        description="the message's id: sending it again writes nothing. Without one, the text itself is "
        "the key, so the same text in the same role is stored once",
    )
    tool_name: Identifier | None = Field(
        default=None, description="for a tool result: the tool's name (the memory's own tools are skipped)"
    )
    # strict: 0 or "false" is not a boolean (the schema says boolean)
    is_error: StrictBool = Field(default=False, description="for a tool result: the tool failed (skipped)")


class CaptureRequest(_Strict):
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    thread_id: Identifier | None = Field(default=None, description="the conversation they belong to")


class FactBrief(BaseModel):
    id: uuid.UUID
    short_id: str
    text: str
    kind: Kind
    status: Status
    source: Source

    @classmethod
    def of(cls, fact: Fact) -> FactBrief:
        return cls(
            id=fact.id,
            short_id=fact.short_id,
            text=fact.body,
            kind=fact.kind,
            status=fact.status,
            source=fact.source,
        )


class Supersession(BaseModel):
    new: FactBrief
    old: FactBrief
    reason: str
    kept: list[FactBrief] = Field(
        default_factory=list, description="the parts of old the correction did not address, kept as facts"
    )


class MessageOutcome(BaseModel):
    index: int
    role: str
    message_id: str | None
    captured: bool = Field(description="false: the message was not stored (see note)")
    written: int = Field(description="facts this request wrote for it")
    duplicate: bool = Field(description="true: already stored (a repeat), nothing written")
    note: str | None = None
    facts: list[FactBrief]
    superseded: list[Supersession] = Field(
        description="earlier claims the new ones corrected as they were captured"
    )


class CaptureResponse(BaseModel):
    session_id: str
    written: int
    duplicates: int
    messages: list[MessageOutcome]


# -- facts ---------------------------------------------------------------------------------------


class FactOut(FactBrief):
    agent_id: str
    current: bool = Field(description="this version is the head of its claim's chain")
    head_id: uuid.UUID
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    message_id: str | None
    thread_id: str | None

    @classmethod
    def of(cls, fact: Fact) -> FactOut:
        return cls(
            **FactBrief.of(fact).model_dump(),
            agent_id=fact.agent_id,
            current=fact.id == fact.head_id,
            head_id=fact.head_id,
            valid_from=fact.valid_from,
            valid_to=fact.valid_to,
            recorded_at=fact.recorded_at,
            message_id=fact.message_id,
            thread_id=fact.thread_id,
        )


class RememberRequest(_Strict):
    text: BodyText
    kind: Literal["conclusion", "user_input"] = "conclusion"
    time: Moment | None = None
    supersedes: FactIdText | None = Field(
        default=None, description="the fact this one corrects (its current version is retired)"
    )
    contradicts: list[FactIdText] = Field(default_factory=list, max_length=20)
    relates_to: list[FactIdText] = Field(default_factory=list, max_length=20)


class Link(BaseModel):
    relation: str
    target: FactBrief
    ok: bool
    detail: str | None = None


class RememberResponse(BaseModel):
    session_id: str
    written: bool = Field(description="false: this exact fact was already stored")
    fact: FactOut
    links: list[Link] = Field(
        description="each link asked for; one the library refused is listed with ok=false and why"
    )


class HistoryResponse(BaseModel):
    session_id: str
    fact_id: uuid.UUID
    current_id: uuid.UUID
    versions: list[FactOut] = Field(description="every version of the claim, oldest first, current last")


class PinResponse(BaseModel):
    session_id: str
    pinned: FactOut = Field(description="the pinned claim's current version")


class UnpinResponse(BaseModel):
    session_id: str
    fact_id: uuid.UUID
    unpinned: int = Field(description="pins removed (0: it was not pinned)")


class ForgetResponse(BaseModel):
    session_id: str
    deleted_facts: int


class ListedFact(FactOut):
    pinned: bool = Field(description="its claim is pinned into every prompt (on any of its versions)")


class FactPageResponse(BaseModel):
    session_id: str
    facts: list[ListedFact] = Field(description="newest first")
    next_cursor: str | None = Field(description="the cursor of the next page; null on the last")


class FactResponse(BaseModel):
    session_id: str
    fact: ListedFact


class DeleteFactResponse(BaseModel):
    session_id: str
    deleted: FactOut = Field(description="the fact as it was")
    current: FactOut | None = Field(
        description="the version of its claim that is current now (null: the claim had no other version)"
    )
    restored: list[FactOut] = Field(description="versions the delete made current again")
    note: str


# -- search --------------------------------------------------------------------------------------


class SearchRequest(_Strict):
    query: BodyText
    k: JsonInteger = Field(default=8, ge=1, le=50, description="the most facts to return")
    as_of: Moment | None = Field(
        default=None,
        description="answer as the memory stood then: only claims recorded by then, each in the version "
        "that was current then (ranked by today's search; see docs/guide/http-api.md)",
    )


class ResolvedFrom(BaseModel):
    id: uuid.UUID
    short_id: str
    text: str
    status: Status
    recorded_at: datetime


class Provenance(BaseModel):
    source: Source
    agent_id: str
    acting_on_behalf_of: str | None
    thread_id: str | None
    message_id: str | None = Field(description="the message the claim was captured from")
    valid_from: datetime
    recorded_at: datetime
    passage_id: uuid.UUID | None
    span: tuple[int, int] | None = Field(description="where the claim sits in its message's text")
    passage: str | None = Field(
        description="the whole message the claim was cut from (null when the claim is the whole message)"
    )


class SearchHit(BaseModel):
    id: uuid.UUID
    short_id: str
    text: str
    kind: Kind
    status: Status
    distance: float = Field(description="1 - blended cosine similarity")
    score: float = Field(description="what hits are ordered by, higher first")
    claim_similarity: float
    passage_similarity: float | None
    demoted: bool = Field(description="a sub-agent's fact, ranked lower")
    flags: list[str] = Field(description="the search's own words for why the hit is flagged")
    outdated: bool = Field(description="a newer claim about the same thing ranks above it")
    untrusted: bool = Field(description="from a tool result or web page")
    resolved_from: ResolvedFrom | None = Field(
        description="the superseded version the query matched: this hit is its current value"
    )
    line: str = Field(description="the hit as the block shows it to a model")
    provenance: Provenance


class Dropped(BaseModel):
    short_id: str
    reason: str


class SearchResponse(BaseModel):
    session_id: str
    query: str
    as_of: datetime | None
    not_in_memory: bool = Field(description="nothing cleared the relevance floor")
    best_score: float | None
    block: str = Field(description="the ranked block as a model would read it")
    hits: list[SearchHit]
    dropped: list[Dropped]


# -- stats and health ----------------------------------------------------------------------------


class CountRow(BaseModel):
    kind: Kind
    source: Source
    status: Status
    facts: int


class NamespaceOut(BaseModel):
    id: uuid.UUID
    parent_id: uuid.UUID | None
    path: list[str]
    agent_id: str


class SessionStats(BaseModel):
    session_id: str
    facts: int
    by_kind: dict[str, int]
    by_source: dict[str, int]
    by_status: dict[str, int]
    rows: list[CountRow] = Field(description="facts by kind, source and status together")
    namespaces: list[NamespaceOut]
    edges: dict[str, int] = Field(description="edges by relation; undone supersessions apart")
    pinned: int


class StatsResponse(BaseModel):
    sessions: list[SessionStats]


class Check(BaseModel):
    ok: bool
    detail: str


class HealthResponse(BaseModel):
    ok: bool
    checks: dict[str, Check] = Field(description="database, migrations, embedder")
