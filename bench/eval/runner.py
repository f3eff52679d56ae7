"""One evaluation run: load, select questions, ingest (cached), build every arm's window, score, write rows.

Rows are appended to a JSONL file one question at a time, keyed by (dataset, question, arm, budget); a
rerun skips the keys already written, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.eval import arms as arm_lib
from bench.eval.answer_scores import answer_scores
from bench.eval.arms import Arm, budgets_for
from bench.eval.conversation import Conversation, Dataset, Question
from bench.eval.ingest import Ingestor, IngestStats, dataset_database, ensure_database, write_path_digest
from bench.eval.judging import judge
from bench.eval.loaders import LOADERS
from bench.eval.metrics import window_metrics
from bench.eval.reader import read
from bench.eval.toolcalls import with_tool_calls
from bench.eval.window import ConversationView, Window, asked_at
from memory.retrieval import SearchOptions

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from langchain_core.language_models import BaseChatModel
    from langgraph.store.postgres import PostgresStore

    from memory.embedders.base import Embedder
    from memory.graph.store import FactStore
    from memory.model import Namespace

# a frozen dataclass of settings a tuning run may change (SearchOptions, TierSettings)
Options = TypeVar("Options", bound="DataclassInstance")

# 2: BEAM ids say the tier (beam-500k-1); rows of harness 1 are read through legacy_row
HARNESS_VERSION = "2"
ROWS_FILE = "rows.jsonl"  # appended to while running; report() also writes a compressed snapshot
ROWS_SNAPSHOT = "rows.jsonl.gz"
RUN_INFO_FILE = "run-info.json"
Key = tuple[str, str, str, int | None]


@dataclass
class RunConfig:
    datasets: list[tuple[str, Path]]  # (loader name, path)
    out_dir: Path
    budgets: tuple[int, ...] = (1200, 3000, 6000)
    arms: tuple[str, ...] = arm_lib.DEFAULT_ARMS
    embedder: str = "minilm"
    database_url: str | None = None  # a server: one database per dataset and embedder is created on it
    exact_database: bool = False  # use database_url as it is (tests, or a role that cannot create databases)
    sample: int | None = None  # at most this many questions of each type
    # the sample drawn at random within each type with this seed; None: at an even stride (older runs)
    sample_seed: int | None = None
    limit: int | None = None  # at most this many questions per dataset, after sampling
    conversations: int | None = None  # only the first N conversations of each dataset
    facts_share: float = 1 / 3
    # consolidate (merge restated facts) a copy of the ingested database before the questions
    consolidate: bool = False
    # expire facts unused for this many days at the end of each conversation (in a copy of the ingest),
    # after replaying the retrievals the middleware would have recorded while it went on
    expire_days: float | None = None
    # insert a tool call and ~tool_tokens of tool output after every `tool_calls`-th turn (0: none)
    tool_calls: int = 0
    tool_tokens: int = 300
    # when each question is asked: at the end of the conversation, or right after the session that
    # holds its latest evidence (bench.eval.window.asked_at), where shorter histories fit a window
    ask_at: str = "end"
    # the beads arm's middleware settings where they differ from its defaults (tuning runs; None: the
    # default): the retrieved tier's share of the context, thin claims and passages
    retrieved_share: float | None = None
    # the beads arm's search options where they differ from the store's ("keyword=False,rrf_k=10")
    search: str | None = None
    tier: str | None = None  # the beads arm's TierSettings changed ("merge_claims=False")
    thin_tokens: int | None = None
    line_tokens: int | None = None
    passage_chars: int | None = None
    # conversations tagged by split name ({"tune": [ids], "holdout": [ids]}; rows carry the tag) and,
    # with `only_split`, the one split evaluated
    split: dict[str, list[str]] | None = None
    only_split: str | None = None
    # the reader (bench.eval.reader), and a judge that grades its answers (optional: the reader's
    # answers are scored without one, bench.eval.answer_scores)
    answer_model: BaseChatModel | None = None
    judge_model: BaseChatModel | None = None
    answer_model_name: str | None = None
    judge_model_name: str | None = None
    show_progress: bool = True


@dataclass
class DatasetRun:
    name: str
    source: str
    database: str | None
    issues: dict[str, int]
    issue_examples: dict[str, list[str]]
    questions_selected: int
    rows_written: int = 0
    ingest: list[dict[str, Any]] = field(default_factory=list)
    consolidation: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def sample_questions(
    questions: Sequence[Question], per_type: int | None, seed: int | None = None
) -> list[Question]:
    """At most `per_type` questions of each type, order kept: drawn at random within the type with
    `seed` (each type from its own seeded draw, so one type's questions never move another's), or,
    without a seed, spread evenly over the type's questions."""
    if per_type is None:
        return list(questions)
    groups: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        groups[q.type].append(q)
    chosen: set[str] = set()
    for qtype, group in groups.items():
        n = len(group)
        if n <= per_type:
            picks: Iterable[int] = range(n)
        elif seed is None:
            picks = (i * n // per_type for i in range(per_type))
        else:
            picks = random.Random(f"{seed}:{qtype}").sample(range(n), per_type)
        chosen.update(group[i].id for i in picks)
    return [q for q in questions if q.id in chosen]


def _ends_mid_line(path: Path) -> bool:
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def row_key(row: dict[str, Any]) -> Key:
    return (row["dataset"], row["question_id"], row["arm"], row["budget"])


_LEGACY_BEAM_ID = re.compile(r"beam-(\d+)(?=$|:)")


def legacy_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as this harness names it. Harness 1 read one BEAM tier, 100K, as dataset `beam` with
    chats `beam-<n>`; those rows are renamed to `beam-100k` and `beam-100k-<n>` (question ids alike),
    so committed rows stay comparable with runs that read the tiers side by side."""
    if row.get("harness", "1") != "1" or row.get("dataset") not in ("beam", "beam-tools"):
        return row
    renamed = dict(row, dataset=row["dataset"].replace("beam", "beam-100k", 1))
    for key in ("conversation_id", "question_id"):
        if isinstance(row.get(key), str):
            renamed[key] = _LEGACY_BEAM_ID.sub(r"beam-100k-\1", row[key], count=1)
    return renamed


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a rows file (plain or .gz), the last one written winning for a repeated key.

    Torn lines (a run killed mid-write) are skipped; their keys are simply redone by the next run.
    Rows of an older harness are renamed as this one names them (legacy_row).
    """
    rows: dict[Key, dict[str, Any]] = {}
    if not path.exists():
        return []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            try:
                row = legacy_row(json.loads(line))
            except json.JSONDecodeError:
                continue
            rows[row_key(row)] = row
    return list(rows.values())


# row fields that quote the data (a reader's answer repeats the window's words, a judge's reply the
# answer, the update values are the dataset's own): kept in the working file, left out of the
# committed snapshot, whose scores are computed already, so the report needs none of them
DATA_TEXT_FIELDS = ("answer", "answer_reply", "judge_reply", "current_values", "stale_values")


def write_snapshot(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """The deduplicated rows, sorted by key, without the fields that quote the data (DATA_TEXT_FIELDS),
    gzip-compressed with a fixed timestamp (same rows, same bytes)."""
    ordered = sorted(rows, key=lambda r: (r["dataset"], r["question_id"], r["arm"], r["budget"] or 0))
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        for row in ordered:
            kept = {k: v for k, v in row.items() if k not in DATA_TEXT_FIELDS}
            gz.write((json.dumps(kept, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return path


def _encode_window(window: Window) -> tuple[list[str] | str, list[str]]:
    """Window items in priority order: a turn id, or "<turn id>@<short fact id>" for a fact.

    Per-item scores are left out (the order is the rank; best_score is kept): the rows of a full run
    are large enough as it is.
    """
    if window.all_turns:
        return "all", []
    items = [
        item.turn_id if item.fact_id is None else f"{item.turn_id}@{item.fact_id}" for item in window.items
    ]
    return items, [item.turn_id for item in window.items if item.clipped]


def build_row(
    dataset: str, question: Question, window: Window, view: ConversationView | None = None
) -> dict[str, Any]:
    encoded, clipped = _encode_window(window)
    row: dict[str, Any] = {
        "dataset": dataset,
        "conversation_id": question.conversation_id,
        "question_id": question.id,
        "type": question.type,
        "abstention": question.abstention,
        "arm": window.arm,
        "budget": window.budget,
        "evidence_ids": list(question.evidence_ids),
    }
    if question.stale_ids or question.current_ids:
        row.update(stale_ids=list(question.stale_ids), current_ids=list(question.current_ids))
    if question.current_values:  # what a reader's answer is checked against (answer_scores.update_answer)
        row.update(current_values=list(question.current_values), stale_values=list(question.stale_values))
    turns = view.conversation.turn_by_id if view is not None else {}
    evidence_texts = [turns[e].text for e in question.evidence_ids if e in turns]
    row.update(window_metrics(window, question, evidence_texts))
    row.update(window=encoded, clipped=clipped, harness=HARNESS_VERSION)
    if window.retrieved_pushed_out is not None:
        row["retrieved_pushed_out"] = window.retrieved_pushed_out
    if question.stale_ids:  # which of the window's facts it marks outdated: the KU figures can be rechecked
        row["marked_outdated"] = [
            f"{item.turn_id}@{item.fact_id}" for item in window.items if item.marked_outdated and item.fact_id
        ]
    return row


class Evaluation:
    """Runs a RunConfig; `run()` returns the per-dataset record also written to run-info.json."""

    def __init__(self, config: RunConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console()
        self.rows_path = config.out_dir / ROWS_FILE
        self.answering = config.answer_model is not None
        self.judging = self.answering and config.judge_model is not None

    def _done(self) -> set[Key]:
        done = set()
        for row in read_rows(self.rows_path):
            # rows without this reader's answer (or, when judging, a grade) are redone
            answered = (
                row.get("answer") is not None and row.get("answer_model") == self.config.answer_model_name
            )
            if (not self.answering or answered) and (not self.judging or row.get("correct") is not None):
                done.add(row_key(row))
        return done

    def run(self) -> list[DatasetRun]:
        self.config.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._done()
        records = []
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=self.console, disable=not self.config.show_progress) as progress:
            for loader, path in self.config.datasets:
                dataset = LOADERS[loader](path)
                if self.config.tool_calls:
                    dataset = with_tool_calls(dataset, self.config.tool_calls, self.config.tool_tokens)
                records.append(self._run_dataset(dataset, done, progress))
        return records

    def _selected(self, dataset: Dataset) -> list[Question]:
        conversations = dataset.conversations
        if self.config.only_split is not None:
            wanted = set((self.config.split or {}).get(self.config.only_split, ()))
            conversations = [c for c in conversations if c.id in wanted]
        conversations = conversations[: self.config.conversations]
        questions = sample_questions(
            [q for c in conversations for q in c.questions], self.config.sample, self.config.sample_seed
        )
        return questions[: self.config.limit]

    def _pending(self, dataset: Dataset, question: Question, arms: Sequence[str], done: set[Key]) -> bool:
        return any(
            (dataset.name, question.id, name, budget) not in done
            for name in arms
            for budget in (self.config.budgets if name != "full" else [None])
        )

    def _run_dataset(self, dataset: Dataset, done: set[Key], progress: Progress) -> DatasetRun:
        started = time.perf_counter()
        selected = self._selected(dataset)
        pending = [q for q in selected if self._pending(dataset, q, self.config.arms, done)]
        record = DatasetRun(
            dataset.name,
            data_label(dataset.source),
            None,
            dict(dataset.issues.counts),
            dataset.issues.examples,
            len(selected),
        )
        if not pending:
            return record
        by_conversation: dict[str, list[Question]] = defaultdict(list)
        for q in pending:
            by_conversation[q.conversation_id].append(q)
        conversations = [c for c in dataset.conversations if c.id in by_conversation]
        with self._stores(dataset, record, conversations) as (ingestor, arms):
            task = progress.add_task(f"{dataset.name}: ingest", total=len(conversations))
            for conversation in conversations:
                stats: IngestStats = ingestor.ingest(conversation)
                record.ingest.append(asdict(stats))
                progress.advance(task)
            task = progress.add_task(f"{dataset.name}: questions", total=len(pending))
            with self.rows_path.open("a", encoding="utf-8") as out:
                if _ends_mid_line(self.rows_path):
                    out.write("\n")  # a run killed mid-write: keep its torn line off the next row's
                for conversation in conversations:
                    view = ConversationView(conversation)
                    for question in by_conversation[conversation.id]:
                        at = asked_at(view, question, self.config.ask_at)
                        rows = self._evaluate(dataset.name, at, question, arms, done)
                        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                        out.flush()
                        record.rows_written += len(rows)
                        progress.advance(task)
        record.seconds = time.perf_counter() - started
        return record

    def _evaluate(
        self, dataset: str, view: ConversationView, question: Question, arms: Sequence[Arm], done: set[Key]
    ) -> list[dict[str, Any]]:
        rows = []
        for arm in arms:
            for budget in budgets_for(arm, self.config.budgets):
                if (dataset, question.id, arm.name, budget) in done:
                    continue
                window = arm.window(view, question, budget)
                if window.budget is not None and window.tokens > window.budget:
                    raise AssertionError(f"{arm.name} used {window.tokens} tokens of {window.budget}")
                row = build_row(dataset, question, window, view)
                tag = split_of(self.config.split, question.conversation_id)
                if tag is not None:
                    row["split"] = tag
                if self.answering:
                    row.update(self._answer(window, question))
                rows.append(row)
        return rows

    def _answer(self, window: Window, question: Question) -> dict[str, Any]:
        """The reader's answer to one window, its judge-free scores and, with a judge, its grade."""
        assert self.config.answer_model is not None
        out: dict[str, Any] = {"answer_model": self.config.answer_model_name}
        try:
            reading = read(self.config.answer_model, window.text, question)
        except Exception as exc:  # a window too long for the model must not end the run
            return {**out, "answer": None, "answer_error": f"{type(exc).__name__}: {exc}"[:300]}
        out.update(answer=reading.answer, answer_seconds=round(reading.seconds, 2))
        if reading.reply != reading.answer:
            out["answer_reply"] = reading.reply[:500]
        out.update(answer_scores(reading.answer, question))
        if self.judging:
            assert self.config.judge_model is not None
            correct, reply = judge(self.config.judge_model, question, reading.answer)
            out.update(judge_model=self.config.judge_model_name, correct=correct, judge_reply=reply[:200])
        return out

    @contextmanager
    def _stores(
        self, dataset: Dataset, record: DatasetRun, conversations: Sequence[Conversation] = ()
    ) -> Iterator[tuple[Ingestor, list[Arm]]]:
        from memory.embedders.select import embedder_from_name
        from memory.postgres.embedded_postgres import resolve_database_url

        embedder = embedder_from_name(self.config.embedder)
        server = self.config.database_url or resolve_database_url()
        if self.config.exact_database:
            url = server
        else:
            name = dataset_database(dataset, embedder.name)
            url = ensure_database(server, name)
            record.database = name
            if self.config.consolidate or self.config.expire_days is not None:
                # consolidation archives facts: never in the shared ingest, always in a fresh copy of it
                with open_stores(url, embedder) as stores:
                    for conversation in conversations:
                        stores.ingestor.ingest(conversation)
                copy = consolidated_copy_name(name)
                url = clone_database(server, name, copy)
                record.database = copy
        with open_stores(url, embedder) as stores:
            if self.config.consolidate:
                record.consolidation = consolidate_conversations(stores.facts, conversations)
            if self.config.expire_days is not None:
                record.consolidation += expire_conversations(
                    stores.facts, stores.ingestor.root, conversations, self.config.expire_days
                )
            arms = [
                make_arm(
                    name,
                    stores,
                    self.config.facts_share,
                    self.config.budgets,
                    stores.facts.search_options,
                    beads_options(self.config),
                )
                for name in self.config.arms
            ]
            yield stores.ingestor, arms


@dataclass
class Stores:
    facts: FactStore
    docs: PostgresStore
    ingestor: Ingestor


@contextmanager
def open_stores(url: str, embedder: Embedder) -> Iterator[Stores]:
    """The fact graph and LangGraph's PostgresStore on database `url`, set up, plus the ingestor."""
    from langgraph.store.postgres import PostgresStore

    from memory.graph.store import FactStore
    from memory.postgres.connection import open_pool

    with ExitStack() as stack:
        pool = stack.enter_context(open_pool(url, min_size=1, max_size=4))
        facts = FactStore(pool, embedder)
        facts.setup()
        # the connection PostgresStore documents: autocommit (its setup creates indexes concurrently)
        conn = stack.enter_context(
            psycopg.connect(url, autocommit=True, row_factory=dict_row, prepare_threshold=0)
        )
        # LangGraph's store filters by namespace after the HNSW scan; pgvector's iterative scan keeps that
        # from starving a conversation of candidates (FactStore sets the same for its own searches)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute("SET hnsw.ef_search = 1000")
        docs = PostgresStore(
            conn,
            index={
                "dims": embedder.dims,
                "embed": lambda texts: embedder.embed(list(texts)),
                "fields": ["content"],
            },
        )
        ingestor = Ingestor(facts, docs, conn, embedder)
        # two runs started together on a new database (a tune and a holdout split) both ran
        # PostgresStore's migrations, and one failed on the other's row of store_migrations; its
        # setup takes no lock of its own (FactStore's does)
        conn.execute("SELECT pg_advisory_lock(hashtext('beads_eval.setup'))")
        try:
            docs.setup()
            ingestor.setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('beads_eval.setup'))")
        yield Stores(facts, docs, ingestor)


def consolidated_copy_name(name: str) -> str:
    suffix = "_consolidated"
    return name[: 63 - len(suffix)] + suffix


def clone_database(server_url: str, template: str, name: str) -> str:
    """A fresh copy of database `template` named `name` (replacing an earlier copy); its URL."""
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        )
    return make_conninfo(server_url, dbname=name)


def consolidate_conversations(
    facts: FactStore, conversations: Sequence[Conversation]
) -> list[dict[str, Any]]:
    """Merge restated facts in each conversation's session; what it did, per conversation.

    Expiry is not run: on a static benchmark nothing was ever retrieved, so every fact would expire.
    """
    done = []
    for conversation in conversations:
        started = time.perf_counter()
        report = facts.consolidate(conversation.id)
        done.append(
            {
                "conversation_id": conversation.id,
                "merges": len(report.merges),
                "archived": report.archived,
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
    return done


def expire_conversations(
    facts: FactStore,
    namespace_for: Callable[[str], Namespace],
    conversations: Sequence[Conversation],
    horizon_days: float,
    window: int = 10,
) -> list[dict[str, Any]]:
    """Expiry as it would run at the end of each conversation, on the usage the conversation made.

    A static benchmark records no retrievals, so they are replayed: each user turn is a model call
    whose query is that turn, with the last `window` turns in view and nothing said later in memory;
    the facts that search returns are noted as retrieved at the turn's time (what the middleware
    records when it injects them). Facts are dated by their turn (recorded_at = valid_from), then
    consolidation expires, merging nothing, those neither recorded nor retrieved within the horizon
    before the conversation's last turn. Conversations without dates are left as they are.
    """
    done = []
    for conversation in conversations:
        started = time.perf_counter()
        end = arm_lib.conversation_end_of(conversation)
        if end is None:
            done.append({"conversation_id": conversation.id, "expired": 0, "skipped": "no dates"})
            continue
        with facts.pool.connection() as conn:
            conn.execute(
                "UPDATE beads.facts SET recorded_at = valid_from WHERE session_id = %s", (conversation.id,)
            )
        root = namespace_for(conversation.id)
        ids = [t.id for t in conversation.turns]
        retrievals = 0
        for i, turn in enumerate(conversation.turns):
            if turn.role != "user" or turn.timestamp is None:
                continue
            unseen = frozenset(ids[max(0, i - window + 1) :])  # in view, or not said yet
            hits = facts.search(root, turn.text, exclude_message_ids=unseen).hits
            retrievals += facts.note_retrieved([h.fact.id for h in hits], now=arm_lib.aware(turn.timestamp))
        report = facts.consolidate(
            conversation.id, merge=False, horizon=timedelta(days=horizon_days), now=end
        )
        done.append(
            {
                "conversation_id": conversation.id,
                "retrievals_replayed": retrievals,
                "expired": len(report.expired),
                "horizon_days": horizon_days,
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
    return done


def split_of(split: dict[str, list[str]] | None, conversation_id: str) -> str | None:
    """The name of the split that lists `conversation_id` (the first one, in the file's order), if any."""
    return next((name for name, ids in (split or {}).items() if conversation_id in ids), None)


def tag_rows(row: dict[str, Any], split: dict[str, list[str]]) -> dict[str, Any]:
    """`row` tagged by `split` (its own tag replaced; untagged when no split lists its conversation)."""
    tagged = {k: v for k, v in row.items() if k != "split"}
    tag = split_of(split, row["conversation_id"])
    if tag is not None:
        tagged["split"] = tag
    return tagged


def read_split(path: Path) -> dict[str, list[str]]:
    """A split file: a JSON object of split name -> conversation ids ({"tune": [...], "holdout": [...]});
    other top-level keys whose value is not a list (a "description") are ignored."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a split file is a JSON object of split name -> conversation ids")
    split = {str(k): [str(i) for i in v] for k, v in raw.items() if isinstance(v, list)}
    seen: dict[str, str] = {}
    for name, ids in split.items():
        for cid in ids:
            if cid in seen:
                raise ValueError(f"{path}: conversation {cid} is in both {seen[cid]} and {name}")
            seen[cid] = name
    return split


def changed_options(base: Options, assignments: str) -> Options:
    """`base` (SearchOptions, TierSettings) with `option=value,...` applied ("keyword=False,rrf_k=10"):
    for tuning runs."""
    what = type(base).__name__
    types = {
        f.name: type(getattr(base, f.name))
        for f in dataclasses.fields(base)
        if isinstance(getattr(base, f.name), (bool, int, float, str, type(None)))
    }
    changes: dict[str, Any] = {}
    for assignment in filter(None, assignments.split(",")):
        key, _, value = assignment.partition("=")
        if key not in types:
            raise ValueError(f"unknown {what} option {key!r}; options: {', '.join(types)}")
        kind = types[key]
        if value == "None":
            changes[key] = None
        elif kind is type(None):  # an option set to None (per_message=None): a number
            changes[key] = float(value) if "." in value else int(value)
        else:
            changes[key] = value == "True" if kind is bool else kind(value)
    return dataclasses.replace(base, **changes)


def beads_options(config: RunConfig) -> dict[str, Any]:
    """The beads arm's middleware keyword arguments: only what a run changes from the defaults."""
    from memory.context.block import TierSettings

    options: dict[str, Any] = {}
    if config.retrieved_share is not None:
        options["retrieved_share"] = config.retrieved_share
    tier: dict[str, Any] = {
        k: v
        for k, v in (
            ("thin_tokens", config.thin_tokens),
            ("passage_chars", config.passage_chars),
            ("line_tokens", config.line_tokens),
        )
        if v is not None
    }
    if tier or config.tier:
        options["tier"] = changed_options(dataclasses.replace(TierSettings(), **tier), config.tier or "")
    if config.search:
        options["search"] = config.search  # applied to the store's search options in make_arm
    return options


def make_arm(
    name: str,
    stores: Stores,
    facts_share: float = 1 / 3,
    budgets: Sequence[int] = (),
    options: SearchOptions | None = None,
    beads: dict[str, Any] | None = None,
) -> Arm:
    if name in ("beads", "beads_gated"):
        from bench.eval.assembled import BeadsArm

        settings = dict(beads or {})
        if "search" in settings:
            changes = settings.pop("search")
            settings["search_options"] = changed_options(stores.facts.search_options, changes)
        if name == "beads_gated":
            settings["injection"] = "gated"
        return BeadsArm(stores.facts, stores.ingestor.root, settings, name=name)
    if name == "tail":
        return arm_lib.TailArm()
    if name == "full":
        return arm_lib.FullArm()
    if name == "bm25":
        return arm_lib.BM25Arm()
    if name == "docstore":
        # the same embedder's cosines: its own floor (memory.graph.thresholds)
        floor = stores.facts.thresholds.relevance_floor
        return arm_lib.DocstoreArm(stores.docs, floor=floor, budgets=budgets)
    if name in ("facts", "facts_gated"):
        facts = arm_lib.FactsArm(stores.facts, stores.ingestor.root, share=facts_share, options=options)
        return facts if name == "facts" else arm_lib.GatedFactsArm(facts)
    if name.startswith("assembled"):
        from bench.eval.assembled import AssembledArm, standing_rules

        facts = arm_lib.FactsArm(stores.facts, stores.ingestor.root, share=facts_share, options=options)
        return AssembledArm(
            facts,
            name,
            pin_policy=standing_rules if name == "assembled_pinned" else None,
            clear_tool_output=name != "assembled_noclear",
        )
    raise ValueError(f"unknown arm {name!r}; arms: {', '.join(arm_lib.ARM_NAMES)}")


def data_label(source: str) -> str:
    """The data a run read, named by its folder and file ("locomo/locomo_dev.json"): where the data
    lives on one machine is not part of a result."""
    path = Path(source)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def write_run_info(out_dir: Path, config: RunConfig, records: Sequence[DatasetRun], seconds: float) -> Path:
    """What the rows alone cannot say: sources, load issues, databases, ingestion, settings, runtime."""
    path = out_dir / RUN_INFO_FILE
    runs: list[dict[str, Any]] = []
    if path.exists():
        try:
            runs = list(json.loads(path.read_text(encoding="utf-8")).get("runs", []))
        except (json.JSONDecodeError, AttributeError):
            runs = []
    info = {
        "harness": HARNESS_VERSION,
        # the library source the beads rows were captured with (bench.eval.ingest.write_path_digest)
        "write_path": write_path_digest(),
        "embedder": config.embedder,
        "budgets": list(config.budgets),
        "arms": list(config.arms),
        "facts_share": config.facts_share,
        "consolidate": config.consolidate,
        "expire_days": config.expire_days,
        "tool_calls": config.tool_calls,
        "tool_tokens": config.tool_tokens,
        "ask_at": config.ask_at,
        "beads_options": {k: str(v) for k, v in beads_options(config).items()},
        "split": config.split,
        "only_split": config.only_split,
        "conversations": config.conversations,
        "sample_per_type": config.sample,
        "sample_seed": config.sample_seed,
        "limit": config.limit,
        "answer_model": config.answer_model_name if config.answer_model else None,
        "judge_model": config.judge_model_name if config.judge_model else None,
        "seconds": round(seconds, 1),
        "datasets": [asdict(r) for r in records],
    }
    # every invocation is kept: a resumed run's figures rest on the rows of all of them
    runs.append(info)
    path.write_text(json.dumps({"runs": runs}, indent=2, default=str) + "\n", encoding="utf-8")
    return path
