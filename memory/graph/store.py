"""`FactStore`: the fact graph's public face, binding a connection pool, an embedder and the splitter.

The store is synchronous; `AsyncFactStore` runs the same methods on a small thread pool sized to the
connection pool. One implementation, two faces: the logic and SQL exist once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar, Unpack

import numpy as np
import psycopg
from psycopg.rows import DictRow
from psycopg_pool import ConnectionPool

from memory import retrieval
from memory.embedders.base import Embedder, embed_query
from memory.errors import SchemaMissingError
from memory.graph import consolidate as consolidation
from memory.graph import earlier_claims, reads, restatements, revisions, supersession
from memory.graph import facts as fact_sql
from memory.graph import namespaces as ns_sql
from memory.graph import pins as pin_sql
from memory.graph.audit import Audit, Review
from memory.graph.facts import NewFact, Provenance, ProvenanceArgs
from memory.graph.importing import ImportMessage, ImportReport, batched
from memory.graph.indexer import BackgroundIndexer
from memory.graph.refs import FactRef, SessionRef, fact_id_of, plain_id, session_of
from memory.graph.thresholds import Thresholds, thresholds_for
from memory.ids import fact_id
from memory.model import (
    AutoSupersession,
    CaptureResult,
    Deleted,
    Fact,
    Kind,
    Namespace,
    Relation,
    SearchResult,
    Source,
)
from memory.postgres import vectors
from memory.postgres.migrate import setup as migrate
from memory.postgres.prepared import forget as forget_prepared
from memory.postgres.prepared import worth_preparing
from memory.retrieval import SearchOptions
from memory.rules import clean_text
from memory.rules.splitting import Claim, passage_for, split_message

# a message of more claims than this is written in several transactions of this many claims each:
# what one capture holds at once (vectors, rows, the rules' candidates) stays bounded
CAPTURE_CHUNK_CLAIMS = 64


@dataclass(frozen=True, slots=True)
class _Message:
    """A message made ready to write: cleaned, clipped, split into claims, keyed; no vectors yet."""

    claims: list[Claim]
    passage: str | None
    source_key: str
    clipped_from: int | None
    notes: tuple[str, ...]

    def chunks(self) -> list[list[Claim]]:
        return [
            self.claims[i : i + CAPTURE_CHUNK_CLAIMS]
            for i in range(0, len(self.claims), CAPTURE_CHUNK_CLAIMS)
        ]

    def items(
        self,
        chunk: Sequence[Claim],
        vecs: Sequence[Sequence[float]],
        source: Source,
        passage_vector: Sequence[float] | None,
        speaker: str | None,
    ) -> list[NewFact]:
        items = fact_sql.claim_facts(chunk, vecs, source, self.source_key, self.passage, passage_vector)
        if speaker is None:
            return items
        return [replace(item, metadata={**(item.metadata or {}), "speaker": speaker}) for item in items]


@dataclass(frozen=True, slots=True)
class _ImportBatch:
    """A batch of an import, ready to write: its messages not stored yet, and their texts' vectors."""

    size: int  # messages read
    todo: list[_PlannedImport]
    vectors_of: Mapping[str, Sequence[float]]


@dataclass(frozen=True, slots=True)
class _PlannedImport:
    """One message of an import: a message to split (user, tool) or one conclusion (assistant)."""

    ns: Namespace
    provenance: Provenance
    message: _Message | None
    source: Source | None
    speaker: str | None
    conclusion: tuple[str, Kind, Source, str] | None  # body, kind, source, source key
    # the ids its facts get: known before anything is embedded (what a rerun skips by); computed once,
    # since an import asks for them at each step of a batch
    ids: tuple[uuid.UUID, ...] = field(init=False)

    def __post_init__(self) -> None:
        sid, nsid = self.ns.session_id, self.ns.id
        if self.conclusion is not None:
            body, _, source, key = self.conclusion
            ids = [fact_id(sid, nsid, source.value, key, body)] if body else []
        else:
            assert self.message is not None and self.source is not None
            key = self.message.source_key
            ids = [
                fact_id(sid, nsid, self.source.value, f"{key}:{c.start}", c.text) for c in self.message.claims
            ]
        object.__setattr__(self, "ids", tuple(ids))

    @property
    def own_key(self) -> str | None:
        return None if self.message is None else self.message.source_key

    def texts(self) -> list[str]:
        if self.conclusion is not None:
            return [self.conclusion[0]]
        assert self.message is not None
        return [c.text for c in self.message.claims]

    def item_chunks(self, vectors_of: Mapping[str, Sequence[float]]) -> list[list[NewFact]]:
        if self.conclusion is not None:
            body, kind, source, key = self.conclusion
            return [
                [NewFact(body=body, kind=kind, source=source, source_key=key, claim_vector=vectors_of[body])]
            ]
        assert self.message is not None and self.source is not None
        m = self.message
        passage_vector = fact_sql.passage_vector_of(
            m.claims, [vectors_of[c.text] for c in m.claims], m.passage
        )
        return [
            m.items(chunk, [vectors_of[c.text] for c in chunk], self.source, passage_vector, self.speaker)
            for chunk in m.chunks()
        ]


@dataclass(frozen=True, slots=True)
class _Written:
    """What one write sent: every item's fact id, the facts it inserted, the supersessions it made."""

    queued: fact_sql.QueuedFacts
    new: dict[uuid.UUID, Fact]
    auto: list[AutoSupersession]

    @property
    def ids(self) -> list[uuid.UUID]:
        return self.queued.ids

    def result(self, conn: psycopg.Connection[DictRow]) -> CaptureResult:
        """The write as a CaptureResult, once its transaction is done (a replay's facts read back,
        and the facts that a message said again repeats)."""
        known = dict(self.new)
        if missing := [i for i in dict.fromkeys(self.ids) if i not in known]:  # a replay: already stored
            known.update(self.queued.known(conn, missing))
        # a repeat maps to a fact another item may map to as well: each once, in order
        facts = {known[i].id: known[i] for i in self.ids if i in known}
        return CaptureResult(
            facts=tuple(facts.values()),
            written=len(self.new),
            superseded=tuple(a for a in self.auto if not a.proposed),
            proposed=tuple(a for a in self.auto if a.proposed),
        )


class FactStore:
    """Facts as individual claims in Postgres, with kinds, statuses, provenance, edges and validity.

    Similarity thresholds the caller does not set (the relevance floor of the default
    `search_options`, `supersede_min_similarity`, consolidation's merge threshold) are the embedder's
    (memory.graph.thresholds): each model's cosines live on their own scale. A `SearchOptions` passed in
    carries its own floor; derive it from `store.search_options` to keep the embedder's.
    """

    def __init__(
        self,
        pool: ConnectionPool[psycopg.Connection[DictRow]],
        embedder: Embedder,
        *,
        search_options: SearchOptions | None = None,
        supersede_min_similarity: float | None = None,
        index_in_background: bool = True,
        auto_supersede: bool = True,
        max_message_chars: int | None = None,
    ) -> None:
        self.pool = pool
        self.embedder = embedder
        self.thresholds: Thresholds = thresholds_for(embedder)
        self.search_options = search_options or SearchOptions(relevance_floor=self.thresholds.relevance_floor)
        self.supersede_min_similarity = (
            self.thresholds.supersede_min_similarity
            if supersede_min_similarity is None
            else supersede_min_similarity
        )
        # True: writes return before their vectors join the HNSW indexes (see memory.graph.indexer);
        # False: each write indexes them before returning (slower writes, no background thread)
        self.index_in_background = index_in_background
        # a user's claim that gives an earlier claim's slot another value supersedes it as it is
        # captured (memory.graph.supersession); False leaves every correction to remember_fact
        self.auto_supersede = auto_supersede
        # capture keeps at most this much of one message (None: all of it, in bounded chunks); the
        # middleware, the HTTP API and MCP have their own limit (memory.rules.clean_text)
        self.max_message_chars = max_message_chars
        self._indexer = BackgroundIndexer(pool)
        self._embedder_id: int | None = None
        self._owns_pool = False
        # the reads for looking back, apart from the verbs (memory.graph.audit)
        self.audit = Audit(self._connection)
        self.review = Review(self._connection)

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def connect(cls, url: str | None = None, embedder: Embedder | None = None, **settings: Any) -> FactStore:
        """A store on its own pool to `url` (else DATABASE_URL), set up and ready; `close()` (or the
        end of a `with` block) closes the pool too. `embedder`: default the bundled MiniLM."""
        from memory.embedders.minilm import MiniLMEmbedder
        from memory.postgres.connection import open_pool

        store = cls(open_pool(url), embedder or MiniLMEmbedder(), **settings)
        store._owns_pool = True
        try:
            store.setup()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Stop what this store started (the background indexer, the async face's threads), and the
        pool if `connect` opened it; a pool you passed in stays yours to close."""
        self._indexer.stop()
        if "aio" in self.__dict__:
            self.aio.close()
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> FactStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        """A pooled connection; a read of a table the migrations have not made yet says what to do."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.errors.UndefinedTable as exc:
            if "beads." not in str(exc):
                raise
            raise SchemaMissingError(SchemaMissingError.__doc__) from exc

    @functools.cached_property
    def aio(self) -> AsyncFactStore:
        """The async face of this store (one small thread pool, shared by every caller)."""
        return AsyncFactStore(self)

    def setup(self) -> None:
        """Apply migrations and register the embedder's space (idempotent; run once at start)."""
        with self.pool.connection() as conn:
            migrate(conn)
            self._embedder_id = vectors.register_embedder(conn, self.embedder.name, self.embedder.dims)

    @property
    def embedder_id(self) -> int:
        if self._embedder_id is None:
            with self._connection() as conn:
                return self._embedder_id_on(conn)
        return self._embedder_id

    def _embedder_id_on(self, conn: psycopg.Connection[DictRow]) -> int:
        """`embedder_id`, registered on `conn` the first time (for a caller that holds a connection)."""
        if self._embedder_id is None:
            self._embedder_id = vectors.register_embedder(conn, self.embedder.name, self.embedder.dims)
        return self._embedder_id

    # -- namespaces --------------------------------------------------------------------------------

    def root(self, session_id: str, agent_id: str = "root") -> Namespace:
        with self._connection() as conn:
            return ns_sql.root_namespace(conn, session_id, agent_id)

    def fork(self, parent: Namespace, label: str, agent_id: str | None = None) -> Namespace:
        with self._connection() as conn:
            return ns_sql.fork_namespace(conn, parent, label, agent_id or label)

    def namespace(self, ns_id: uuid.UUID) -> Namespace:
        with self._connection() as conn:
            return ns_sql.get_namespace(conn, ns_id)

    def children(self, ns_id: uuid.UUID) -> list[Namespace]:
        with self._connection() as conn:
            return ns_sql.children(conn, ns_id)

    def session_namespaces(self, session: SessionRef) -> list[Namespace]:
        with self._connection() as conn:
            return ns_sql.session_namespaces(conn, session_of(session))

    # -- writes ------------------------------------------------------------------------------------

    def capture_message(
        self,
        ns: Namespace,
        text: str,
        *,
        source: Source = Source.PASSIVE_CAPTURE,
        speaker: str | None = None,
        source_key: str | None = None,
        max_chars: int | Literal["store"] | None = "store",
        **provenance: Unpack[ProvenanceArgs],
    ) -> CaptureResult:
        """Split `text` verbatim into claims and store one fact per claim (questions as directives).

        Untrusted sources (tool results) never yield directives: their questions and instructions are
        stored as plain content, so a web page cannot plant an instruction in memory. `speaker` names
        who said it where several people share a session (a group chat): it is kept in each fact's
        metadata, and one person's claim never supersedes another's. The facts' ids derive from
        `source_key` (default: `message_id`, else the text), so capturing under the same key again
        writes nothing. `provenance`: who said it, on whose behalf, where and from when
        (memory.graph.facts.ProvenanceArgs).

        Any text is taken: what Postgres cannot store (NUL, lone surrogates) and control characters
        are cleaned out (memory.rules.clean_text), and a message longer than `max_chars` (default: the
        store's `max_message_chars`; None: no limit) is clipped at a sentence edge; the result's
        `cleaned` and `clipped_from` say so. A long message is written in chunks of
        CAPTURE_CHUNK_CLAIMS claims, each its own transaction, so that memory and time stay linear in
        its length; a replay under the same key completes one that stopped between chunks.
        """
        message = self._plan_message(text, max_chars, source_key or provenance.get("message_id"))
        said = Provenance.of(ns, provenance)
        parts: list[CaptureResult] = []
        # embedded before any transaction opens, a chunk a call; the passage's vector is the claims'
        # (their mean), written with the first chunk, so every chunk's claims are embedded first.
        # Held as float4, as they are stored: as lists of Python floats a 256 KB message's 4,520
        # claims held 55 MB until its last chunk was written.
        chunks = message.chunks()
        vectors = [
            np.asarray(self.embedder.embed([c.text for c in chunk]), dtype=np.float32) for chunk in chunks
        ]
        passage_vector = (
            None
            if message.passage is None
            else fact_sql.passage_vector_of(message.claims, np.concatenate(vectors), message.passage)
        )
        for n, (chunk, vecs) in enumerate(zip(chunks, vectors, strict=True)):
            items = message.items(chunk, vecs.tolist(), source, passage_vector, speaker)
            last = n == len(chunks) - 1
            parts.append(
                self._write(ns, items, said, own_key=message.source_key, passage_stored=n > 0, index=last)
            )
        return CaptureResult(
            facts=tuple(f for part in parts for f in part.facts),
            written=sum(part.written for part in parts),
            superseded=tuple(a for part in parts for a in part.superseded),
            proposed=tuple(a for part in parts for a in part.proposed),
            clipped_from=message.clipped_from,
            cleaned=message.notes,
        )

    def _plan_message(self, text: str, max_chars: int | Literal["store"] | None, key: str | None) -> _Message:
        """`text` made ready to write: cleaned, clipped to the limit, split, keyed."""
        tidy = clean_text.cleaned(text)
        text = tidy.text
        limit = self.max_message_chars if max_chars == "store" else max_chars
        clipped_from = None
        if limit is not None and len(text) > limit:
            clipped_from, text = len(text), clean_text.clip(text, limit)
        claims = split_message(text)
        return _Message(
            claims=claims,
            passage=passage_for(text, claims),
            source_key=key or fact_sql.body_sha256(text).hex(),
            clipped_from=clipped_from,
            notes=tidy.notes,
        )

    def import_messages(
        self,
        ns: Namespace | str,
        messages: Iterable[ImportMessage],
        *,
        batch_messages: int = 64,
        max_chars: int | Literal["store"] | None = "store",
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportReport:
        """Write a whole conversation, in order, as capturing each message in turn would (the same
        rows: memory.graph.importing), with embedding batched across `batch_messages` messages and one
        transaction per batch; a rerun skips what is stored. A user's message is split into claims,
        a tool's result is untrusted content, an assistant's turn is one conclusion. `progress` is
        called after each batch with (messages done, facts written)."""
        if isinstance(ns, str):
            ns = self.root(ns)
        started = time.perf_counter()
        done = skipped = written = superseded = 0
        analyzed_at: float | None = None  # the facts the planner's statistics counted at the last ANALYZE
        written_at_analyze = 0  # the facts this import had written at its last ANALYZE
        stored_here: set[uuid.UUID] = set()  # facts this import wrote (a message said twice in one file)
        # One batch ahead: while a batch is written (the client waits on the server most of that
        # time), a worker splits the next one, asks which of its messages are stored already and
        # embeds the rest (a model releases the GIL while it runs), so that neither waits on the other.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="beads-import") as ahead:
            batches = batched(messages, batch_messages)
            first = next(batches, None)
            coming = None if first is None else ahead.submit(self._prepare_import, ns, first, max_chars)
            while coming is not None:
                prepared = coming.result()
                following = next(batches, None)
                coming = (
                    None
                    if following is None
                    else ahead.submit(self._prepare_import, ns, following, max_chars)
                )
                todo = [p for p in prepared.todo if not set(p.ids) <= stored_here]
                written_before = written
                skipped += prepared.size - len(todo)
                with self._connection() as conn:
                    # statistics this import made are current (it analyzes again before they are half
                    # the truth, and each ANALYZE plans prepared statements again): the generic plans
                    # memory.postgres.prepared guards against are made from them
                    prepare = analyzed_at is not None or worth_preparing(conn)
                    with conn.transaction():
                        # a crash loses at most this batch, which a rerun writes again (its facts are
                        # not all stored): no message needs its own durable flush
                        conn.execute("SET LOCAL synchronous_commit = off")
                        for plan in todo:
                            for n, items in enumerate(plan.item_chunks(prepared.vectors_of)):
                                with conn.pipeline():
                                    w = self._write_in(
                                        conn, ns, items, plan.provenance, plan.own_key, n > 0, prepare
                                    )
                                written += len(w.new)
                                superseded += sum(1 for a in w.auto if not a.proposed)
                            stored_here.update(plan.ids)
                if written > written_before:
                    self._vectors_written()
                    analyzed_at, analyzed = self._analyze_grown(analyzed_at)
                    if analyzed:
                        written_at_analyze = written
                done += prepared.size
                if progress is not None:
                    progress(done, written)
        if written > written_at_analyze:  # what the last batches wrote, in the statistics too
            self._analyze_grown(analyzed_at, finished=True)
        if written:
            self._merge_keyword_entries()
        return ImportReport(
            messages=done,
            skipped=skipped,
            written=written,
            superseded=superseded,
            seconds=round(time.perf_counter() - started, 3),
        )

    def _prepare_import(
        self, ns: Namespace, batch: list[ImportMessage], max_chars: int | Literal["store"] | None
    ) -> _ImportBatch:
        """A batch of an import made ready to write: split, what is stored already left out (a
        rerun's, before anything of it is embedded), the rest embedded in one call."""
        planned = [self._plan_import(ns, m, max_chars) for m in batch]
        with self._connection() as conn:
            ids = [i for p in planned for i in p.ids]
            stored = {r["id"] for r in conn.execute("SELECT id FROM beads.facts WHERE id = ANY(%s)", (ids,))}
        todo = [p for p in planned if p.ids and not set(p.ids) <= stored]
        texts = list(dict.fromkeys(t for p in todo for t in p.texts()))
        vectors_of = dict(zip(texts, self.embedder.embed(texts), strict=True)) if texts else {}
        return _ImportBatch(len(batch), todo, vectors_of)

    def _analyze_grown(self, analyzed_at: float | None, *, finished: bool = False) -> tuple[float, bool]:
        """Statistics for the tables an import fills, each time it has doubled them (and after its
        first batch, where they had none), and once more when it is `finished`: what ANALYZE after a
        bulk load is for. Without them, each claim's nearest-earlier-claims scan in a new database
        was planned for empty tables, walking every fact of the namespace to find the few vectors
        waiting for the index (12 ms a scan at 900 facts, 1.8 ms analyzed); and a session imported
        beside others, too few facts to double the table, was planned as the one row the statistics
        gave an unknown session, so that its first searches read all its claims and compared every
        vector by hand (a 500K chat beside two others: 17 ms a search, 3 times PostgresStore's, until
        autovacuum analyzed it; results/long-sessions-24). Autovacuum comes too late for an import,
        which takes seconds. Returns the fact count the statistics now hold, and whether this call
        analyzed."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT c.reltuples AS planned, (SELECT count(*) FROM beads.facts) AS stored"
                " FROM pg_class c WHERE c.oid = 'beads.facts'::regclass"
            ).fetchone()
            assert row is not None  # the table exists: the batch just wrote into it
            planned = max(float(row["planned"]), analyzed_at or 0.0)  # -1: never analyzed
            if planned > 0 and row["stored"] < 2 * planned and not finished:
                return planned, False
            conn.execute("ANALYZE beads.facts, beads.fact_vectors, beads.passages, beads.passage_vectors")
            # statements prepared on the old statistics are planned again; ask anew whether to prepare
            forget_prepared(conn)
            return float(row["stored"]), True

    def _merge_keyword_entries(self) -> None:
        """Merge what an import added to the keyword indexes' pending lists into the indexes, as
        VACUUM would. A GIN index keeps new entries in an unsorted list that every lookup reads whole
        (up to 4 MB); after a bulk load the planner, costing that list, counted a search's words by
        reading the session's claims one by one instead (4 ms of a 14 ms search on a 500K chat, 0.14
        ms merged; results/long-sessions-24). Where this role may not maintain the indexes, the next
        VACUUM merges them."""
        with self._connection() as conn, contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "SELECT gin_clean_pending_list('beads.facts_body_tsv'::regclass),"
                " gin_clean_pending_list('beads.passages_body_tsv'::regclass)"
            )

    def _plan_import(
        self, ns: Namespace, m: ImportMessage, max_chars: int | Literal["store"] | None
    ) -> _PlannedImport:
        provenance = Provenance.of(
            ns,
            {
                "message_id": m.message_id,
                "thread_id": m.thread_id,
                "valid_from": m.time,
                "acting_on_behalf_of": m.acting_on_behalf_of,
            },
        )
        if m.role == "assistant":  # what remember(kind=CONCLUSION, source=PASSIVE_CAPTURE) writes
            body = clean_text.cleaned(m.text).text.strip()
            item = (body, Kind.CONCLUSION, Source.PASSIVE_CAPTURE, m.message_id or "")
            return _PlannedImport(ns, provenance, None, None, None, item)
        source = Source.PASSIVE_CAPTURE if m.role == "user" else Source.TOOL_RESULT
        message = self._plan_message(m.text, max_chars, m.message_id)
        speaker = m.speaker if m.role == "user" else None
        return _PlannedImport(ns, provenance, message, source, speaker, None)

    def remember(
        self,
        ns: Namespace,
        text: str,
        *,
        kind: Kind = Kind.CONCLUSION,
        source: Source = Source.REMEMBER_TOOL,
        source_key: str = "",
        metadata: dict[str, Any] | None = None,
        **provenance: Unpack[ProvenanceArgs],
    ) -> Fact:
        """Store `text` as one fact, unsplit (an agent's deliberate note, a conclusion, a summary)."""
        return self.remember_result(
            ns, text, kind=kind, source=source, source_key=source_key, metadata=metadata, **provenance
        ).facts[0]

    def remember_result(
        self,
        ns: Namespace,
        text: str,
        *,
        kind: Kind = Kind.CONCLUSION,
        source: Source = Source.REMEMBER_TOOL,
        source_key: str = "",
        metadata: dict[str, Any] | None = None,
        **provenance: Unpack[ProvenanceArgs],
    ) -> CaptureResult:
        """`remember`, answered as a capture is: the fact, and whether this call wrote it (a replay
        writes nothing) or superseded anything."""
        body = clean_text.cleaned(text).text.strip()  # as capture does: no NUL reaches the server
        if not body:
            raise ValueError("a fact needs some text")
        [vec] = self.embedder.embed([body])
        item = NewFact(
            body=body,
            kind=kind,
            source=source,
            source_key=source_key or (provenance.get("message_id") or ""),
            claim_vector=vec,
            metadata=metadata,
        )
        return self._write(ns, [item], Provenance.of(ns, provenance))

    def _write(
        self,
        ns: Namespace,
        items: Sequence[NewFact],
        provenance: Provenance,
        *,
        own_key: str | None = None,
        passage_stored: bool = False,
        index: bool = True,
    ) -> CaptureResult:
        """Write `items` and apply what they supersede and restate, in one transaction. `own_key`: the
        message's source key, whose claims (this chunk's and any other's) the new facts are never
        compared with; `passage_stored`: an earlier chunk wrote the passage already; `index=False`:
        leave the new vectors out of the HNSW index for now (a long message's chunks but its last:
        indexed, its own claims would fill each later claim's nearest few, and the index scan walk
        on past them, all of them filtered out, for every claim)."""
        with self._connection() as conn:
            prepare = worth_preparing(conn)
            # the facts and what they supersede land together, or not at all
            with conn.pipeline(), conn.transaction():
                written = self._write_in(conn, ns, items, provenance, own_key, passage_stored, prepare)
            result = written.result(conn)
        if index and (result.written or passage_stored):
            self._vectors_written()
        return result

    def _write_in(
        self,
        conn: psycopg.Connection[DictRow],
        ns: Namespace,
        items: Sequence[NewFact],
        provenance: Provenance,
        own_key: str | None,
        passage_stored: bool,
        prepare: bool,
    ) -> _Written:
        """`_write`'s statements, in the caller's transaction and pipeline: the INSERTs and the nearest
        earlier claims of each new fact (what supersession and restatements compare it with) travel
        in one round trip, and the edges written after the rules decide travel with what the caller
        sends next (its COMMIT, or the next message of an import)."""
        embedder_id = self.embedder_id
        queued = fact_sql.queue_facts(
            conn, ns, items, provenance, embedder_id, passages=not passage_stored, prepare=prepare
        )
        checked = [
            earlier_claims.Query(
                fid,
                item.claim_vector,
                (item.metadata or {}).get("speaker"),
                correct=self.auto_supersede and supersession.may_correct(item),
                restate=restatements.may_restate(item),
            )
            for fid, item in zip(queued.ids, items, strict=True)
        ]
        sent = earlier_claims.send(
            conn,
            ns,
            checked,
            valid_from=provenance.valid_from,
            min_similarity=min(
                self.thresholds.relevance_floor,
                self.supersede_min_similarity,
                self.thresholds.short_claim_similarity,
            ),
            embedder_id=embedder_id,
            dims=self.embedder.dims,
            own_key=own_key,
            prepare=prepare,
        )
        new = queued.written()
        nearest = {fid: earlier_claims.read(ns, cursor, new) for fid, cursor in sent.items() if fid in new}
        applied = (
            supersession.apply(
                conn,
                ns,
                list(new.values()),
                nearest,
                embedder_id,
                self.supersede_min_similarity,
                self.thresholds.short_claim_similarity,
                {fid: item.passage or item.body for fid, item in zip(queued.ids, items, strict=True)},
                self.embedder.embed,
            )
            if self.auto_supersede and new
            else supersession.Applied([], {})
        )
        if new:
            restatements.link(
                conn, ns, list(new.values()), nearest, self.thresholds.relevance_floor, applied.new_heads
            )
            pin_sql.pin_said(conn, list(new.values()))
        return _Written(queued, new, applied.done)

    def _vectors_written(self, conn: psycopg.Connection[DictRow] | None = None) -> None:
        """After a commit that wrote vectors: wake the indexer, or (not in the background) index them
        now, on `conn` where the caller still holds one."""
        if self.index_in_background:
            self._indexer.poke()
        else:
            self._indexer.drain(conn)

    def index_pending(self) -> int:
        """Move every vector still waiting for the HNSW indexes into them now; returns how many.
        (Search finds waiting vectors anyway; this is for bulk loads and benchmarks.)"""
        return self._indexer.drain()

    def supersede(self, new: FactRef, old: FactRef, *, by_person: bool = False) -> Fact:
        """`new` replaces the current version of `old`'s claim; refused unless the two are close.
        `by_person`: a person said so (the inspector's "this replaces that"), so two short claims need
        only the closeness capture asks of them, not the guard an agent's supersede is held to."""
        floor = self.supersede_min_similarity
        if by_person:
            floor = min(floor, self.thresholds.short_claim_similarity)
        with self._connection() as conn:
            new_id, old_id = fact_id_of(new), fact_id_of(old)
            return revisions.supersede(conn, new_id, old_id, self.embedder_id, floor)

    def undo_supersede(self, new: FactRef, old: FactRef) -> Fact:
        """Take back `new` superseding `old` (an automatic edge that was wrong, say): `old` is current
        again and the edge stays, marked undone, as history."""
        with self._connection() as conn:
            return revisions.undo_supersede(conn, fact_id_of(new), fact_id_of(old))

    def settle_proposal(self, new: FactRef, old: FactRef, *, accept: bool) -> Fact | None:
        """Accept a proposal (`new` replaces `old`; returns the retired fact) or dismiss it."""
        with self._connection() as conn, conn.transaction():
            new_id = fact_id_of(new)
            retired = revisions.settle_proposal(
                conn,
                new_id,
                fact_id_of(old),
                accept=accept,
                embedder_id=self.embedder_id,
                # a person decided: the closeness capture asked of two short claims is enough
                min_similarity=min(self.supersede_min_similarity, self.thresholds.short_claim_similarity),
            )
            if retired is not None:  # what the accepted correction does not address stays
                supersession.keep_standing(
                    conn,
                    ns_sql.get_namespace(conn, retired.namespace_id),
                    fact_sql.get_facts(conn, [new_id])[0],
                    retired,
                    self.embedder.embed,
                    self.embedder_id,
                )
            return retired

    def relate(self, src: FactRef, relation: Relation | str, dst: FactRef) -> None:
        with self._connection() as conn:
            fact_sql.relate(conn, fact_id_of(src), Relation(relation), fact_id_of(dst))

    def relate_many(self, src: FactRef, relation: Relation | str, dsts: Sequence[FactRef]) -> None:
        with self._connection() as conn:
            targets = [fact_id_of(d) for d in dsts]
            fact_sql.relate_many(conn, fact_id_of(src), Relation(relation), targets)

    def compact(
        self, ns: Namespace, members: Sequence[FactRef], summary: str, agent_id: str | None = None
    ) -> Fact:
        """Archive `members` behind one summary fact that is derived_from each of them."""
        fact = self.remember(
            ns,
            summary,
            kind=Kind.SUMMARY,
            source=Source.COMPACTION,
            agent_id=agent_id,
            source_key="compaction:" + ",".join(sorted(str(plain_id(m)) for m in members)),
        )
        with self._connection() as conn:
            fact_sql.archive(conn, [fact_id_of(m) for m in members], fact.id)
            return fact_sql.get_fact(conn, fact.id)

    def note_retrieved(self, ids: Sequence[uuid.UUID], now: datetime | None = None) -> int:
        """Record that these facts reached a model (what expiry reads); separate from `search` so a
        search stays a pure read and callers record only what they actually injected."""
        with self._connection() as conn:
            return consolidation.note_retrieved(conn, ids, now)

    def consolidate(
        self,
        session: SessionRef,
        *,
        merge: bool = True,
        merge_threshold: float | None = None,
        horizon: timedelta | None = None,
        now: datetime | None = None,
        dry_run: bool = False,
    ) -> consolidation.ConsolidationReport:
        """Merge near-duplicate facts and expire unused ones (see memory.graph.consolidate); off the hot path.
        `merge_threshold` defaults to the embedder's (memory.graph.thresholds)."""
        return consolidation.consolidate(
            self,
            session_of(session),
            merge=merge,
            merge_threshold=self.thresholds.merge_threshold if merge_threshold is None else merge_threshold,
            horizon=horizon,
            now=now,
            dry_run=dry_run,
        )

    def pin(self, ref: FactRef, pinned_by: str = "user") -> Fact:
        """Pin `ref`'s claim into every prompt; a later correction (supersede) stays pinned.
        Refused for untrusted content (tool results, web pages). Returns the pinned current version."""
        with self._connection() as conn:
            return pin_sql.pin(conn, fact_id_of(ref), pinned_by)

    def unpin(self, ref: FactRef) -> int:
        """Unpin `ref`'s claim, whichever of its versions was pinned; returns the pins removed."""
        with self._connection() as conn:
            return pin_sql.unpin(conn, fact_id_of(ref))

    def pinned(self, session: SessionRef, ns: Namespace | None = None) -> list[pin_sql.PinnedFact]:
        """The session's pinned claims (current versions), oldest pin first; with `ns` (or a namespace
        given as `session`), only those that namespace may read (its own and its ancestors')."""
        if ns is None and isinstance(session, Namespace):
            ns = session
        with self._connection() as conn:
            return pin_sql.pinned_facts(conn, session_of(session), None if ns is None else ns.lineage)

    def forget(self, session: SessionRef) -> int:
        """Delete everything this session stored (a real delete, unlike retirement)."""
        with self._connection() as conn:
            return fact_sql.forget_session(conn, session_of(session))

    def delete(self, ref: FactRef) -> Deleted:
        """Delete one fact for good (its edges, vectors and pin with it; its message's text when no
        other fact was cut from it). The rest of its claim stays: when it had replaced another version,
        that version is current again, and `Deleted.current` says which version is current now."""
        with self._connection() as conn:
            return revisions.delete_fact(conn, fact_id_of(ref))

    # -- reads -------------------------------------------------------------------------------------

    def search(
        self,
        /,  # `overrides` takes any keyword: self positional-only lets the async face copy this signature
        ns: Namespace | str,
        query: str,
        options: SearchOptions | None = None,
        *,
        as_of: datetime | None = None,
        **overrides: Any,
    ) -> SearchResult:
        """Ranked facts for `query` as `ns` may see them (see memory.retrieval for the pipeline); a
        session id searches that session's root namespace. `as_of`: as the memory stood then, each hit
        in the version current then, flagged so (memory.retrieval.as_of_view); today's search is asked
        for `AS_OF_WIDEN` times k, since some of today's hits did not exist then."""
        if isinstance(ns, str):
            ns = self.root(ns)
        query = clean_text.cleaned(query).text  # a query is matched as text too: no NUL reaches the server
        options = (
            replace(options or self.search_options, **overrides)
            if overrides
            else (options or self.search_options)
        )
        if not query.strip():
            return SearchResult(hits=(), query=query, not_in_memory=True, best_score=None)
        qvec = embed_query(self.embedder, query)  # a model may embed a query apart (e5's prefixes)
        wide = options if as_of is None else replace(options, k=options.k * retrieval.AS_OF_WIDEN)
        with self._connection() as conn:
            # a session last written with another embedder gets its vectors here, once
            backfilled = vectors.ensure_coverage(conn, ns.session_id, self.embedder, self.embedder_id)
            result = retrieval.search(conn, ns, query, qvec, self.embedder_id, self.embedder.dims, wide)
            if as_of is not None:
                then = {f.head_id: f for f in reads.facts_as_of(conn, ns.session_id, as_of)}
                result = retrieval.as_of_view(result, then, options.k)
        if backfilled:
            self._vectors_written()
        return result

    def nearest(self, ids: Sequence[uuid.UUID], query: str, n: int) -> list[uuid.UUID]:
        """Of the facts `ids`, the `n` nearest `query` by their stored claim vectors, nearest first
        (the standing rules a call shows: memory.context.recall)."""
        qvec = embed_query(self.embedder, query)
        with self._connection() as conn:
            return reads.nearest_of(conn, ids, qvec, self.embedder_id, self.embedder.dims, n)

    def get(self, ref: FactRef, session_id: str | None = None) -> Fact:
        with self._connection() as conn:
            if isinstance(ref, str) and session_id is not None:
                return fact_sql.resolve_short_id(conn, session_id, ref)
            return fact_sql.get_fact(conn, fact_id_of(ref))

    def passages(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The messages claims were cut from (`Fact.passage_id`), by id: what a thin claim is shown with."""
        with self._connection() as conn:
            return reads.passage_texts(conn, ids)

    def standing_passages(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """`passages` less those a replaced claim was cut from: what the block may show of a message
        beyond its claim (a replaced value must not come back with it)."""
        with self._connection() as conn:
            return reads.standing_passage_texts(conn, ids)

    def rollup_from(self, child: Namespace) -> Fact | None:
        """The summary `child` (a fork) wrote into its parent, if it has concluded."""
        if child.parent_id is None:
            return None
        with self._connection() as conn:
            return reads.rollup_from(conn, child.id, child.parent_id)

    def link_rollup(self, summary: Fact, child_id: uuid.UUID) -> int:
        """Link `summary` (rollup_of) to every fact namespace `child_id` recorded, directives aside;
        links already there are skipped. Returns how many facts it covers."""
        raw = [f.id for f in self.audit.facts_in_namespace(child_id) if f.kind is not Kind.DIRECTIVE]
        self.relate_many(summary, Relation.ROLLUP_OF, raw)
        return len(raw)


P = ParamSpec("P")
R = TypeVar("R")


class _Threads(Protocol):
    """An async face: the sync object it wraps, and the threads it runs its calls on."""

    @property
    def sync(self) -> object: ...

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...


def _threaded(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[_Threads, P], Awaitable[R]]:
    """The async face of a sync method: same parameters, same result, awaited."""
    name = method.__name__

    @functools.wraps(method)
    async def run(self: _Threads, /, *args: P.args, **kwargs: P.kwargs) -> R:
        # looked up on the instance, so a subclass's override is the one that runs
        bound: Callable[P, R] = getattr(self.sync, name)
        return await self.run(bound, *args, **kwargs)

    return run


class AsyncFactStore:
    """The same store for async code: each call runs on a worker thread, never on the event loop."""

    def __init__(self, store: FactStore, max_workers: int | None = None) -> None:
        self.sync = store
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers or store.pool.max_size, thread_name_prefix="beads-store"
        )
        self.audit = AsyncAudit(self)
        self.review = AsyncReview(self)

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run any blocking function that uses this store on the store's threads."""
        loop = asyncio.get_running_loop()
        # carry the caller's context (LangGraph's config and stream writer live in context variables)
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, functools.partial(context.run, fn, *args, **kwargs))

    setup = _threaded(FactStore.setup)
    root = _threaded(FactStore.root)
    fork = _threaded(FactStore.fork)
    namespace = _threaded(FactStore.namespace)
    children = _threaded(FactStore.children)
    session_namespaces = _threaded(FactStore.session_namespaces)
    capture_message = _threaded(FactStore.capture_message)
    remember = _threaded(FactStore.remember)
    remember_result = _threaded(FactStore.remember_result)
    supersede = _threaded(FactStore.supersede)
    undo_supersede = _threaded(FactStore.undo_supersede)
    settle_proposal = _threaded(FactStore.settle_proposal)
    relate = _threaded(FactStore.relate)
    relate_many = _threaded(FactStore.relate_many)
    compact = _threaded(FactStore.compact)
    forget = _threaded(FactStore.forget)
    delete = _threaded(FactStore.delete)
    pin = _threaded(FactStore.pin)
    unpin = _threaded(FactStore.unpin)
    pinned = _threaded(FactStore.pinned)
    note_retrieved = _threaded(FactStore.note_retrieved)
    consolidate = _threaded(FactStore.consolidate)
    search = _threaded(FactStore.search)
    get = _threaded(FactStore.get)
    rollup_from = _threaded(FactStore.rollup_from)


class AsyncAudit:
    """`store.audit`, awaited on the async store's threads."""

    def __init__(self, store: AsyncFactStore) -> None:
        self.sync = store.sync.audit
        self.run = store.run

    facts_in_namespace = _threaded(Audit.facts_in_namespace)
    subtree_facts = _threaded(Audit.subtree_facts)
    session_facts = _threaded(Audit.session_facts)
    facts_as_of = _threaded(Audit.facts_as_of)
    history = _threaded(Audit.history)
    edges = _threaded(Audit.edges)
    stats = _threaded(Audit.stats)
    edge_counts = _threaded(Audit.edge_counts)
    list_facts = _threaded(Audit.list_facts)
    sessions = _threaded(Audit.sessions)


class AsyncReview:
    """`store.review`, awaited on the async store's threads."""

    def __init__(self, store: AsyncFactStore) -> None:
        self.sync = store.sync.review
        self.run = store.run

    proposals = _threaded(Review.proposals)
    automatic_edges = _threaded(Review.automatic_edges)
