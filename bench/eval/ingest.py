"""Write conversations into the fact graph and the document store once, and reuse them across runs.

One database per dataset, embedder and version of the library's write path holds both memories; a
marker table records a fingerprint of each conversation as ingested (its turns, the embedder, this
module's capture policy and the source of the library's write path), so a later run skips what is
already there and re-ingests only a conversation whose fingerprint changed. Any change to the code
capture runs re-ingests: a cached conversation is one the code of this run wrote.

The fact graph is written as the middleware's capture writes it, through the bulk import
(`FactStore.import_messages`, the same rows as `capture_message` turn by turn, batched): a user turn is
captured verbatim (split into claims), as is a tool's result (source tool_result), an assistant turn is
one conclusion (one that calls a tool is not captured), each with the turn id as `message_id` (how
evidence maps facts back to turns) and the turn's time as `valid_from`.
Passive capture never supersedes anything: that is the library's behaviour, measured as it is.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow

import memory
from bench.eval.arms import docstore_namespace
from bench.eval.conversation import Conversation, Dataset
from memory.embedders.cache import CachedEmbedder
from memory.graph.importing import ImportMessage
from memory.model import Namespace
from memory.rules.splitting import split_message

if TYPE_CHECKING:
    from langgraph.store.postgres import PostgresStore

    from memory.embedders.base import Embedder
    from memory.graph.store import FactStore

# Bump when what ingestion writes changes: every conversation's fingerprint changes with it.
INGEST_VERSION = "23"  # 23: a fenced code block is one claim; 22: a request to keep a statement in mind ("remind me that ...") is a claim; 21: what the user thinks of the help is framing ("This is really helpful"); 20: a question keeps the claim it carries, a replaced claim keeps the parts its correction does not address, a message said again writes nothing, an acknowledgement is no conclusion; 19: conjoined statements cut ("X and it must be Y"), a clause that only continues kept whole, a message never compared with its own claims; 18: the user's claim that adds a value restates nothing; 17: a claim that changes a value of a kind the old one states restates nothing; 16: a chat turn of up to 30 words is a short message; 12: reactions are framing, echoes linked; 13: only short echoes retire; 14: comma splices, every accepted replacement; 15: more reactions; 2: capture supersedes corrections, statements cut from requests; 3: speakers; 4: rules; 5, 6: a sign of a correction; 7: goals with a value are claims; 8: goals never supersede; 9: short claims, frames, clause subjects; 10: spoken times and counts; 11: "grew up in", units of worded counts
DOCSTORE_BATCH = 200

# two statements, run one by one: the store's connection prepares every statement it sends
_MARKER_DDL = (
    "CREATE SCHEMA IF NOT EXISTS beads_eval",
    """
CREATE TABLE IF NOT EXISTS beads_eval.ingested (
    conversation_id  text PRIMARY KEY,
    fingerprint      text NOT NULL,
    turns            integer NOT NULL,
    facts_written    integer NOT NULL,
    documents        integer NOT NULL,
    seconds          double precision NOT NULL,
    ingested_at      timestamptz NOT NULL DEFAULT now()
)
""",
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def database_name(dataset: str, source: str, embedder_name: str) -> str:
    """`beads_eval_<dataset>_<hash of the source path>_<embedder>`, within Postgres' 63 characters."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    return f"beads_eval_{_slug(dataset)}_{digest}_{_slug(embedder_name)}"[:63]


def dataset_database(dataset: Dataset, embedder_name: str) -> str:
    """The name of the database the harness ingests `dataset` into with that embedder and this
    version of capture (`write_path_digest`): what every reader of the harness's rows opens
    (bench.session_search, bench.edge_audit). Two versions of the library run side by side (a
    worktree each) write databases of their own instead of re-ingesting each other's conversations
    under each other's reads; an earlier version's database stays until dropped."""
    source = f"{Path(dataset.source).resolve()}\x00{write_path_digest()}"
    return database_name(dataset.name, source, embedder_name)


def ensure_database(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url`, created if it does not exist."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server_url, dbname=name)


# The library's packages that only read what capture stored (the import contract's top layers):
# a change in them leaves every ingested row as it was. Everything else under memory/ may change a row.
_READ_ONLY_PACKAGES = frozenset({"doors", "context"})
# And search's own steps: the candidate statement, ranking, the hits. Capture reads search's options
# (the thresholds' defaults) and its HNSW settings, which stay in the digest, but never searches
# (tests/test_eval_arms.py runs an import with these steps made to fail). Without this, a change to
# how search orders ties made every tier's chats ingest again, hours of a round for the same rows.
_READ_ONLY_MODULES = frozenset(
    f"retrieval/{name}.py" for name in ("statement", "ranking", "pipeline", "hits", "keywords")
)


def source_digest(root: Path) -> str:
    """A digest of the library source at `root` that capture may run: every module and migration
    but the doors', the context's and search's own steps."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if (
            path.suffix not in (".py", ".sql")
            or relative.parts[0] in _READ_ONLY_PACKAGES
            or relative.as_posix() in _READ_ONLY_MODULES
        ):
            continue
        digest.update(relative.as_posix().encode() + b"\x00" + path.read_bytes() + b"\x00")
    return digest.hexdigest()[:16]


@functools.cache
def write_path_digest() -> str:
    """The installed library's `source_digest`. Part of each conversation's fingerprint, so a run never
    reads rows an earlier version of capture wrote (INGEST_VERSION alone was bumped by hand, and was
    missed: rounds of rule changes were measured on rows written before them)."""
    return source_digest(Path(memory.__file__).parent)


def fingerprint(conversation: Conversation, embedder_name: str) -> str:
    digest = hashlib.sha256(
        f"{INGEST_VERSION}\x00{write_path_digest()}\x00{embedder_name}\x00{conversation.id}".encode()
    )
    for turn in conversation.turns:
        stamp = turn.timestamp.isoformat() if turn.timestamp else ""
        for part in (turn.id, turn.session_id, turn.role, turn.speaker, stamp, turn.text):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()


def texts_to_embed(conversation: Conversation) -> list[str]:
    """Every text ingestion will embed, to compute them in large batches before writing.

    Mirrors FactStore.capture_message (the claims: a passage's vector is theirs, not embedded) and
    FactStore.remember (the stripped text), plus the whole turn for the document store.
    """
    texts: list[str] = []
    for turn in conversation.turns:
        if turn.calls_tool:
            pass  # not captured (below), still a document
        elif turn.role in ("user", "tool"):
            texts.extend(c.text for c in split_message(turn.text))
        else:
            texts.append(turn.text.strip())
        texts.append(turn.text)
    return list(dict.fromkeys(texts))


def capture_conversation(facts: FactStore, root: Namespace, conversation: Conversation) -> int:
    """Write `conversation`'s turns into `root` as the middleware would; returns the facts written.

    A user turn is captured verbatim (split into claims), as is a tool's result (source tool_result);
    an assistant turn is one conclusion; a turn that calls a tool is not captured. Written through
    `FactStore.import_messages`, which writes the rows capturing each turn in turn would
    (tests/test_import.py holds them equal), in batches.
    """
    if isinstance(facts.embedder, CachedEmbedder):
        # one large batch instead of one model call per batch of messages: the import hits the cache
        facts.embedder.embed(texts_to_embed(conversation))
    return facts.import_messages(root, import_messages_of(conversation)).written


def import_messages_of(conversation: Conversation) -> list[ImportMessage]:
    """`conversation`'s turns as the harness imports them (bench.ingest times the same messages)."""
    return [
        ImportMessage(
            text=turn.text,
            role=turn.role,
            message_id=turn.id,
            thread_id=turn.session_id,
            # two people talk in LoCoMo: one's claim never corrects the other's
            speaker=turn.speaker if turn.role == "user" else None,
            time=turn.timestamp,
        )
        for turn in conversation.turns
        if not turn.calls_tool  # the middleware captures a tool call's result, not the call
    ]


@dataclass(frozen=True, slots=True)
class IngestStats:
    conversation_id: str
    cached: bool
    turns: int
    facts_written: int
    documents: int
    seconds: float


class Ingestor:
    """Ingests conversations into `facts` and `docs` (both on the database `conn` points at)."""

    def __init__(
        self, facts: FactStore, docs: PostgresStore, conn: psycopg.Connection[DictRow], embedder: Embedder
    ) -> None:
        self.facts = facts
        self.docs = docs
        self.conn = conn
        self.embedder = embedder
        self._roots: dict[str, Namespace] = {}

    def setup(self) -> None:
        for statement in _MARKER_DDL:
            self.conn.execute(statement)

    def root(self, conversation_id: str) -> Namespace:
        """One memory session per conversation: its id is the conversation id."""
        if conversation_id not in self._roots:
            self._roots[conversation_id] = self.facts.root(conversation_id)
        return self._roots[conversation_id]

    def is_current(self, conversation: Conversation) -> bool:
        row = self.conn.execute(
            "SELECT fingerprint FROM beads_eval.ingested WHERE conversation_id = %s", (conversation.id,)
        ).fetchone()
        return row is not None and row["fingerprint"] == fingerprint(conversation, self.embedder.name)

    def ingest(self, conversation: Conversation) -> IngestStats:
        if self.is_current(conversation):
            return IngestStats(conversation.id, True, len(conversation.turns), 0, 0, 0.0)
        started = time.perf_counter()
        self._forget(conversation.id)
        written = capture_conversation(self.facts, self.root(conversation.id), conversation)
        documents = self._write_documents(conversation)
        seconds = time.perf_counter() - started
        self.conn.execute(
            """
            INSERT INTO beads_eval.ingested (conversation_id, fingerprint, turns, facts_written, documents, seconds)
            VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT (conversation_id) DO UPDATE SET fingerprint = excluded.fingerprint,
                turns = excluded.turns, facts_written = excluded.facts_written,
                documents = excluded.documents, seconds = excluded.seconds, ingested_at = now()
            """,
            (
                conversation.id,
                fingerprint(conversation, self.embedder.name),
                len(conversation.turns),
                written,
                documents,
                seconds,
            ),
        )
        return IngestStats(conversation.id, False, len(conversation.turns), written, documents, seconds)

    def _forget(self, conversation_id: str) -> None:
        """Clear a conversation's earlier ingestion (a changed fingerprint, or a run cut short)."""
        from langgraph.store.base import PutOp

        self.facts.forget(conversation_id)
        self._roots.pop(conversation_id, None)
        namespace = docstore_namespace(conversation_id)
        stale = self.docs.search(namespace, limit=100_000)
        if stale:
            self.docs.batch([PutOp(namespace, item.key, None) for item in stale])

    def _write_documents(self, conversation: Conversation) -> int:
        """One PostgresStore document per turn, keyed by turn id, `content` embedded (whole turns)."""
        from langgraph.store.base import PutOp

        namespace = docstore_namespace(conversation.id)
        ops = [
            PutOp(
                namespace,
                turn.id,
                {
                    "content": turn.text,
                    "speaker": turn.speaker,
                    "session_id": turn.session_id,
                    "timestamp": turn.timestamp.isoformat() if turn.timestamp else None,
                },
            )
            for turn in conversation.turns
        ]
        for start in range(0, len(ops), DOCSTORE_BATCH):
            self.docs.batch(ops[start : start + DOCSTORE_BATCH])
        return len(ops)
