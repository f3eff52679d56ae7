"""Bulk loading: the rows `FactStore.capture_message` and `FactStore.supersede` would write, by COPY.

Writing 100,000 facts one message at a time costs minutes of per-row INSERTs into a live HNSW
graph. The loader writes the same rows instead: claims from the library's own splitter, ids from
`memory.ids` (so a later `capture_message` of a loaded message is a no-op, which the benchmark
checks), passages shared by their claims, one vector per claim and per passage, and supersedes chains
as `supersede()` leaves them (edges new -> old, the old versions `superseded` with `valid_to` closed,
every version's `head_id` on the newest). HNSW indexes are dropped for the load and rebuilt from
their own definitions afterwards, which is how one builds a big pgvector index anyway.

LangGraph's PostgresStore is loaded through its own `batch` of `PutOp`s, one item per fact with the
same claim vector, under ("memories", session) for the main agent and ("memories", session, agent)
for sub-agents, so a search of the session prefix sees what the main agent's scope sees.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
from langgraph.store.base import PutOp
from langgraph.store.postgres import PostgresStore
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from bench.corpus import FORKS, Corpus, Message, Sentence, kinds_for
from memory.graph.store import FactStore
from memory.ids import fact_id, passage_id
from memory.model import Kind, Namespace, Status
from memory.rules.splitting import passage_for, split_message

_FACT_COPY_COLUMNS = (
    "id", "session_id", "namespace_id", "kind", "status", "source", "source_key", "agent_id", "body",
    "passage_id", "thread_id", "message_id", "span_start", "span_end", "head_id", "valid_from", "valid_to",
    "recorded_at",
)  # fmt: skip


@dataclass(slots=True)
class LoadedFact:
    id: uuid.UUID
    namespace: Namespace
    kind: Kind
    sentence: Sentence
    message: Message
    source_key: str
    span: tuple[int, int]
    passage_id: uuid.UUID | None
    head_id: uuid.UUID
    status: Status = Status.ACTIVE
    in_chain: bool = False


@dataclass(slots=True)
class Dataset:
    """What was loaded, as the benchmark needs to know it."""

    session_id: str
    namespaces: dict[str, Namespace]
    facts: list[LoadedFact] = field(default_factory=list)
    passages: dict[uuid.UUID, str] = field(default_factory=dict)
    # (newer, older) fact ids: the supersedes edges
    supersedes: list[tuple[LoadedFact, LoadedFact]] = field(default_factory=list)

    @property
    def root(self) -> Namespace:
        return self.namespaces["root"]

    def counts(self) -> dict[str, int]:
        return {
            "facts": len(self.facts),
            "passages": len(self.passages),
            "directives": sum(f.kind is Kind.DIRECTIVE for f in self.facts),
            "in_supersede_chains": sum(f.in_chain for f in self.facts),
            "superseded": sum(f.status is Status.SUPERSEDED for f in self.facts),
            "in_sub_agent_namespaces": sum(f.namespace.id != self.root.id for f in self.facts),
            "namespaces": len(self.namespaces),
        }


def make_namespaces(store: FactStore, session_id: str) -> dict[str, Namespace]:
    spaces = {"root": store.root(session_id)}
    for label, parent in FORKS:
        spaces[label] = store.fork(spaces[parent], label, label)
    return spaces


def plan_rows(corpus: Corpus, spaces: dict[str, Namespace], session_id: str) -> Dataset:
    """Every fact and passage as capture_message would write it, then the chains as supersede would."""
    data = Dataset(session_id, spaces)
    by_claim: dict[tuple[str, int], LoadedFact] = {}
    for message in corpus.messages:
        ns = spaces[message.agent]
        text = message.text
        claims = split_message(text)
        passage = passage_for(text, claims)
        pid = passage_id(session_id, passage) if passage is not None else None
        if pid is not None:
            data.passages[pid] = passage
        for i, (claim, kind) in enumerate(zip(claims, kinds_for(message, claims), strict=True)):
            source_key = f"{message.message_id}:{claim.start}"
            fid = fact_id(session_id, ns.id, message.source.value, source_key, claim.text)
            fact = LoadedFact(
                fid, ns, kind, message.sentences[i], message, source_key, (claim.start, claim.end), pid, fid
            )
            data.facts.append(fact)
            by_claim[(message.message_id, i)] = fact
    for chain in corpus.chains:
        versions = [by_claim[ref] for ref in chain]
        for old, new in itertools.pairwise(versions):
            old.status = Status.SUPERSEDED
            data.supersedes.append((new, old))
        for version in versions:
            version.head_id = versions[-1].id
            version.in_chain = True
    return data


def _timestamps(corpus: Corpus) -> dict[str, datetime]:
    """One second per message, ending a day ago: revisions are newer than what they revise."""
    start = datetime.now(UTC) - timedelta(days=1, seconds=len(corpus.messages))
    return {m.message_id: start + timedelta(seconds=i) for i, m in enumerate(corpus.messages)}


def copy_ours(
    conn: psycopg.Connection,
    data: Dataset,
    corpus: Corpus,
    vectors: Callable[[str], np.ndarray],
    embedder_id: int,
) -> None:
    """COPY passages, facts, edges and vectors in one transaction."""
    stamps = _timestamps(corpus)
    valid_to = {old.id: stamps[new.message.message_id] for new, old in data.supersedes}
    first = stamps[corpus.messages[0].message_id]
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY beads.passages (id, session_id, body, created_at) FROM STDIN") as copy:
            for pid, body in data.passages.items():
                copy.write_row((pid, data.session_id, body, first))
        columns = sql.SQL(", ").join(map(sql.Identifier, _FACT_COPY_COLUMNS))
        with cur.copy(sql.SQL("COPY beads.facts ({}) FROM STDIN").format(columns)) as copy:
            for f in data.facts:
                m, at = f.message, stamps[f.message.message_id]
                copy.write_row(
                    (
                        f.id, data.session_id, f.namespace.id, f.kind.value, f.status.value, m.source.value,
                        f.source_key, f.namespace.agent_id, f.sentence.text, f.passage_id, m.thread_id,
                        m.message_id, f.span[0], f.span[1], f.head_id, at, valid_to.get(f.id), at,
                    )
                )  # fmt: skip
        with cur.copy("COPY beads.edges (src, relation, dst, session_id) FROM STDIN") as copy:
            for new, old in data.supersedes:
                copy.write_row((new.id, "supersedes", old.id, data.session_id))
        _copy_vectors(
            cur,
            "fact_vectors",
            "fact_id",
            embedder_id,
            ((f.id, vectors(f.sentence.text)) for f in data.facts),
        )
        _copy_vectors(
            cur, "passage_vectors", "passage_id", embedder_id,
            ((pid, vectors(body)) for pid, body in data.passages.items()),
        )  # fmt: skip


def _copy_vectors(
    cur: psycopg.Cursor,
    table: str,
    key: str,
    embedder_id: int,
    rows: Iterable[tuple[uuid.UUID, np.ndarray]],
) -> None:
    # a bulk load builds its HNSW indexes afterwards, so its rows go in as indexed (migration 0006)
    statement = sql.SQL(
        "COPY beads.{} (embedder_id, {}, embedding, indexed) FROM STDIN (FORMAT BINARY)"
    ).format(sql.Identifier(table), sql.Identifier(key))
    with cur.copy(statement) as copy:
        copy.set_types(["int2", "uuid", "vector", "bool"])
        for row_id, vec in rows:
            copy.write_row((embedder_id, row_id, vec, True))


def their_namespace(data: Dataset, fact: LoadedFact) -> tuple[str, ...]:
    base = ("memories", data.session_id)
    return base if fact.namespace.id == data.root.id else (*base, fact.namespace.agent_id)


def load_theirs(
    url: str, data: Dataset, vectors: Callable[[str], np.ndarray], dims: int, chunk: int = 2000
) -> None:
    """PutOps through PostgresStore's own batch, on a loading connection that encodes vectors fast.

    The store's SQL is unchanged; only the embed function returns numpy arrays, which pgvector's
    adapter sends as binary vectors (a list of 768 Python floats is encoded float by float, which
    made loading 100k items take minutes). The benchmark's searches use an ordinary connection.
    """
    with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        register_vector(conn)
        store = PostgresStore(
            conn,
            index={"dims": dims, "embed": lambda texts: [vectors(t) for t in texts], "fields": ["content"]},
        )
        ops = [PutOp(their_namespace(data, f), f.id.hex, {"content": f.sentence.text}) for f in data.facts]
        for start in range(0, len(ops), chunk):
            store.batch(ops[start : start + chunk])


# -- indexes ---------------------------------------------------------------------------------------


def index_definitions(conn: psycopg.Connection, names_like: str) -> dict[tuple[str, str], str]:
    """{(schema, index name): CREATE INDEX statement} of the indexes whose name is LIKE `names_like`."""
    rows = conn.execute(
        "SELECT schemaname, indexname, indexdef FROM pg_indexes WHERE indexname LIKE %s ORDER BY indexname",
        (names_like,),
    ).fetchall()
    return {(r["schemaname"], r["indexname"]): r["indexdef"] for r in rows}


def drop_indexes(conn: psycopg.Connection, definitions: dict[tuple[str, str], str]) -> None:
    for schema, name in definitions:
        conn.execute(sql.SQL("DROP INDEX {}.{}").format(sql.Identifier(schema), sql.Identifier(name)))


def build_indexes(
    conn: psycopg.Connection, definitions: dict[tuple[str, str], str], maintenance_work_mem: str
) -> dict[str, float]:
    """Recreate each index from its own definition; returns seconds per index."""
    seconds = {}
    conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
    for (_, name), definition in definitions.items():
        started = time.perf_counter()
        conn.execute(definition)  # type: ignore[arg-type]  # read back from pg_indexes
        seconds[name] = time.perf_counter() - started
    conn.execute("RESET maintenance_work_mem")
    return seconds


def index_sizes(conn: psycopg.Connection, names: Sequence[str]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT relname, pg_relation_size(oid) AS bytes FROM pg_class WHERE relname = ANY(%s)", (list(names),)
    ).fetchall()
    return {r["relname"]: int(r["bytes"]) for r in rows}
