"""Ingest throughput: a whole conversation written message by message, ours against PostgresStore's `put`.

    python -m bench.ingest --locomo $DATA/locomo/locomo_dev.json [--conversations 7] [--rounds 3]
                           [--out results/latency/ingest.json]
    python -m bench.ingest --bulk --locomo $DATA/locomo/locomo_dev.json --rounds 2 \
                           --out results/latency/import.json
    python -m bench.ingest --bulk --embedder minilm --beam $DATA/beam/500K --chats beam-500k-1 \
                           --out results/latency/import-beam.json

Each LoCoMo conversation (read in place; nothing of it is copied) is written turn by turn, as the
evaluation harness ingests it (bench.eval.ingest): ours through `FactStore.capture_message` (split
into claims, each with its passage; automatic supersession and restatement links on; the turn's id,
time and speaker kept), PostgresStore through one `put` per turn under ("memories", conversation), its
`content` the turn's text. Both get every vector computed in advance (bench.embedder's 768-d space), so
what is timed is the store, not a model. The two run interleaved, turn by turn (ours then theirs, then
theirs then ours), each in a fresh database of one embedded Postgres, so that machine noise lands on
both. Ours leaves the HNSW index to its background indexer; its rate is given with the indexer
drained at the end too, since PostgresStore indexes as it writes.

Messages per second = turns / seconds spent in the calls. Medians over conversations and rounds.

`--bulk --beam` times a long BEAM chat the same way: its user messages split into claims and its
assistant answers one conclusion each, as the harness imports them, where PostgresStore puts every
turn whole (and its embedder reads the first 256 tokens of each, where ours reads every claim).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from langgraph.store.base import PutOp
from langgraph.store.postgres import PostgresStore
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from bench.embedder import LookupEmbedder, RemoteEmbedder, TopicEmbedder
from bench.eval.conversation import Turn
from bench.eval.ingest import import_messages_of, texts_to_embed
from bench.eval.loaders import load_beam_tiered, load_locomo
from bench.scratch import scratch_server
from memory.embedders.base import Embedder
from memory.embedders.cache import CachedEmbedder
from memory.embedders.select import embedder_from_name
from memory.graph.store import FactStore
from memory.model import CaptureResult, Kind, Namespace, Source
from memory.postgres.connection import open_pool

RESULTS = Path(__file__).resolve().parent.parent / "results" / "latency"


def _loadavg() -> list[str]:
    try:
        return Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return ["?", "?", "?"]


_TICKS = os.sysconf("SC_CLK_TCK")


def data_directory(server: str) -> Path:
    with psycopg.connect(server, autocommit=True) as admin:
        row = admin.execute("SHOW data_directory").fetchone()
    assert row is not None
    return Path(row[0])


def server_cpu(data_dir: Path) -> float:
    """CPU seconds the embedded server has used so far: the postmaster, every backend and worker it
    runs, and those it has reaped (a connection's backend that ended, an autovacuum worker): what a
    store costs the database, beside what it costs its client."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:  # after the command, which may hold spaces and parentheses: state, ppid, ..., utime, stime
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(pid) == postmaster:
            ticks += sum(int(f) for f in fields[11:15])  # its own, and its reaped children's
        elif int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / _TICKS


class CpuClock:
    """Wall seconds, this process's CPU seconds (all its threads) and the server's, over a block."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.wall = self.client = self.database = 0.0

    def __enter__(self) -> CpuClock:
        # the server's count first and the wall clock last (and the reverse at the end): reading /proc
        # takes a couple of milliseconds, which the block's time must not include
        database = server_cpu(self.data_dir)
        self._start = (time.perf_counter(), time.process_time(), database)
        return self

    def __exit__(self, *exc: object) -> None:
        wall, client, database = self._start
        self.wall = time.perf_counter() - wall
        self.client = time.process_time() - client
        self.database = server_cpu(self.data_dir) - database


def _fresh(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server, dbname=name)


def capture_turn(store: FactStore, ns: Namespace, turn: Turn) -> CaptureResult | None:
    """One turn written as the harness captures it: its id, session, time and speaker kept; an
    assistant's answer as one conclusion (`import_messages` writes the same rows, tests/test_import.py)."""
    said: dict[str, Any] = {"message_id": turn.id, "thread_id": turn.session_id, "valid_from": turn.timestamp}
    if turn.role == "assistant":
        store.remember(ns, turn.text, kind=Kind.CONCLUSION, source=Source.PASSIVE_CAPTURE, **said)
        return None
    return store.capture_message(ns, turn.text, speaker=turn.speaker, **said)


def ingest_once(server: str, conversation: Any, lookup: LookupEmbedder, round_: int) -> dict[str, Any]:
    """One conversation into fresh stores, ours and theirs interleaved turn by turn."""
    turns = [t for s in conversation.sessions for t in s.turns]
    url = _fresh(server, f"ingest_{round_}")
    pool = open_pool(url, min_size=1, max_size=3)
    their_conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        store = FactStore(pool, lookup)
        store.setup()
        ns = store.root(f"locomo-{conversation.id}")
        theirs = PostgresStore(
            their_conn, index={"dims": lookup.dims, "embed": lookup.embed, "fields": ["content"]}
        )
        theirs.setup()
        prefix = ("memories", conversation.id)
        ours_s = theirs_s = 0.0
        written = superseded = 0
        for i, turn in enumerate(turns):
            order = ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")
            for name in order:
                started = time.perf_counter()
                if name == "ours":
                    result = capture_turn(store, ns, turn)
                    ours_s += time.perf_counter() - started
                    if result is not None:  # LoCoMo's turns are all people's messages
                        written += result.written
                        superseded += len(result.superseded)
                else:
                    theirs.put(prefix, turn.id, {"content": turn.text})
                    theirs_s += time.perf_counter() - started
        started = time.perf_counter()
        store.index_pending()
        drain_s = time.perf_counter() - started
    finally:
        their_conn.close()
        pool.close()
    return {
        "conversation": conversation.id,
        "round": round_,
        "turns": len(turns),
        "facts_written": written,
        "auto_superseded": superseded,
        "ours_s": ours_s,
        "ours_drain_s": drain_s,
        "theirs_s": theirs_s,
        "ours_msgs_per_s": len(turns) / ours_s,
        "ours_msgs_per_s_with_drain": len(turns) / (ours_s + drain_s),
        "theirs_msgs_per_s": len(turns) / theirs_s,
        "loadavg": _loadavg(),
    }


def import_once(
    server: str,
    conversation: Any,
    lookup: LookupEmbedder,
    round_: int,
    model: str | None = None,
    latency: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One conversation three ways, each into a fresh database, whole and timed whole: ours through
    the bulk path (`FactStore.import_messages`), PostgresStore through one `put` per turn and through
    one `batch` of every put; the order alternates by round so that machine drift lands on each.
    `model`: embed with that model inside the timed calls (each store a fresh, uncached instance of
    it, loaded before its clock starts), instead of `lookup`'s vectors computed in advance.
    `latency`: `lookup`'s vectors, each call answered after a remote model's wait (seconds a call,
    seconds a text: bench.embedder.RemoteEmbedder)."""

    def embedder() -> Embedder:
        if latency is not None:
            return RemoteEmbedder(lookup, *latency)
        if model is None:
            return lookup
        fresh = embedder_from_name(model)
        if isinstance(fresh, CachedEmbedder):  # no cache: the stores embed the same texts
            fresh = fresh.inner
        fresh.embed(["load the model before the clock starts"])
        return fresh

    turns = [t for s in conversation.sessions for t in s.turns]
    messages = import_messages_of(conversation)
    prefix = ("memories", conversation.id)
    seconds: dict[str, float] = {}
    cpu: dict[str, tuple[float, float]] = {}  # (client, server) CPU seconds inside each timed call
    data_dir = data_directory(server)
    written = 0

    def ours() -> None:
        nonlocal written
        url = _fresh(server, f"import_ours_{round_}")
        with open_pool(url, min_size=1, max_size=3) as pool:
            store = FactStore(pool, embedder())
            store.setup()
            with CpuClock(data_dir) as clock:
                written = store.import_messages(conversation.id, messages).written
            seconds["import"] = clock.wall
            cpu["import"] = (clock.client, clock.database)
            # what the background indexer had left when the import returned: PostgresStore's put
            # indexes as it writes, so its CPU counts in put's figures
            with CpuClock(data_dir) as clock:
                store.index_pending()
            cpu["import_drain"] = (clock.client, clock.database)

    def theirs(how: str) -> None:
        url = _fresh(server, f"import_theirs_{how}_{round_}")
        with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
            theirs_embedder = embedder()
            store = PostgresStore(
                conn,
                index={"dims": theirs_embedder.dims, "embed": theirs_embedder.embed, "fields": ["content"]},
            )
            store.setup()
            with CpuClock(data_dir) as clock:
                if how == "put":
                    for t in turns:
                        store.put(prefix, t.id, {"content": t.text})
                else:
                    store.batch([PutOp(prefix, t.id, {"content": t.text}) for t in turns])
            seconds[how] = clock.wall
            cpu[how] = (clock.client, clock.database)

    def ours_one_by_one() -> None:
        url = _fresh(server, f"import_capture_{round_}")
        with open_pool(url, min_size=1, max_size=3) as pool:
            store = FactStore(pool, embedder())
            store.setup()
            ns = store.root(conversation.id)
            with CpuClock(data_dir) as clock:
                for turn in turns:
                    capture_turn(store, ns, turn)
            seconds["capture"] = clock.wall
            cpu["capture"] = (clock.client, clock.database)

    steps = [ours, ours_one_by_one, lambda: theirs("put"), lambda: theirs("batch")]
    for step in steps if round_ % 2 == 0 else reversed(steps):
        step()
    n = len(turns)
    return {
        "conversation": conversation.id,
        "round": round_,
        "turns": n,
        "facts_written": written,
        "import_msgs_per_s": n / seconds["import"],
        "capture_msgs_per_s": n / seconds["capture"],
        "put_msgs_per_s": n / seconds["put"],
        "batch_msgs_per_s": n / seconds["batch"],
        # CPU milliseconds a message, (client, server), inside the timed calls
        "cpu_ms_per_msg": {how: [round(c * 1000 / n, 2) for c in pair] for how, pair in cpu.items()},
        "embedder": model
        or (f"remote: {latency[0] * 1000:g} ms a call, {latency[1] * 1000:g} ms a text" if latency else None)
        or "vectors computed in advance",
        "loadavg": _loadavg(),
    }


def import_markdown(
    runs: list[dict[str, Any]],
    source: str,
    model: str | None = None,
    latency: tuple[float, float] | None = None,
) -> str:
    vectors = (
        f"vectors computed in advance, each embedding call answered after a remote model's wait "
        f"({latency[0] * 1000:g} ms a call and {latency[1] * 1000:g} ms a text, slept)"
        if latency is not None
        else "vectors computed in advance"
        if model is None
        else f"every text embedded by {model} inside the timed calls (a fresh, uncached instance for each store)"
    )
    lines = [
        f"Bulk import (messages per second), {len(runs)} conversation runs of {source}, "
        f"{vectors}, each store in a fresh database of one embedded Postgres.",
        "",
        "| conversation | turns | facts written | ours: import_messages | ours: capture_message each "
        "| PostgresStore put | PostgresStore batch | import / capture | import / put | import / batch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['conversation']} (round {r['round']}) | {r['turns']} | {r['facts_written']} "
            f"| {r['import_msgs_per_s']:.0f} | {r['capture_msgs_per_s']:.0f} | {r['put_msgs_per_s']:.0f} "
            f"| {r['batch_msgs_per_s']:.0f} | {r['import_msgs_per_s'] / r['capture_msgs_per_s']:.2f} "
            f"| {r['import_msgs_per_s'] / r['put_msgs_per_s']:.2f} | {r['import_msgs_per_s'] / r['batch_msgs_per_s']:.2f} |"
        )
    own = float(np.median([r["import_msgs_per_s"] / r["capture_msgs_per_s"] for r in runs]))
    put = float(np.median([r["import_msgs_per_s"] / r["put_msgs_per_s"] for r in runs]))
    batch = float(np.median([r["import_msgs_per_s"] / r["batch_msgs_per_s"] for r in runs]))
    lines += [
        "",
        f"Median ratios: import / capture {own:.2f}, import / put {put:.2f}, import / batch {batch:.2f}.",
        "",
    ]
    if all("cpu_ms_per_msg" in r for r in runs):
        lines += cpu_markdown(runs)
    return "\n".join(lines)


def cpu_markdown(runs: list[dict[str, Any]]) -> list[str]:
    """Where the time goes: CPU a message, of the client and of the server, medians over the runs. On
    a machine with few cores a store is as fast as the CPU it needs lets it be."""
    names = {
        "import": "ours: import_messages",
        "import_drain": "... and the index work left after it returned",
        "capture": "ours: capture_message each",
        "put": "PostgresStore put",
        "batch": "PostgresStore batch",
    }
    lines = [
        "CPU milliseconds a message inside the timed calls (medians over the runs; the client is this "
        "process, all its threads; the server is every process of the embedded Postgres):",
        "",
        "| store | client | server | both |",
        "|---|---:|---:|---:|",
    ]
    for how, name in names.items():
        pairs = [r["cpu_ms_per_msg"][how] for r in runs if how in r["cpu_ms_per_msg"]]
        if pairs:
            client, database = (float(np.median([p[i] for p in pairs])) for i in (0, 1))
            lines.append(f"| {name} | {client:.2f} | {database:.2f} | {client + database:.2f} |")
    return [*lines, ""]


def precompute(lookup: LookupEmbedder, conversations: list[Any]) -> None:
    """Every text either store will embed, as the harness lists them (each turn whole for theirs; a
    user's claims or an assistant's answer for ours)."""
    lookup.pin([text for conversation in conversations for text in texts_to_embed(conversation)])


def markdown(results: dict[str, Any]) -> str:
    runs = results["runs"]
    lines = [
        f"Ingest throughput (messages per second), {len(runs)} conversation runs of LoCoMo's dev set "
        f"({results['source']}), each turn written by both stores in turn, vectors computed in advance. "
        f"{results['machine']['nproc']} cores; load average {results['loadavg_at_start'][0]} at the start, "
        f"{results['loadavg_at_end'][0]} at the end.",
        "",
        "| conversation | turns | facts written | automatic supersessions | ours | ours, indexer drained "
        "| PostgresStore put | ours / theirs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['conversation']} (round {r['round']}) | {r['turns']} | {r['facts_written']} "
            f"| {r['auto_superseded']} | {r['ours_msgs_per_s']:.0f} | {r['ours_msgs_per_s_with_drain']:.0f} "
            f"| {r['theirs_msgs_per_s']:.0f} | {r['ours_msgs_per_s'] / r['theirs_msgs_per_s']:.2f} |"
        )
    m = results["median"]
    lines += [
        "",
        f"Median: ours {m['ours_msgs_per_s']:.0f} msg/s ({m['ours_msgs_per_s_with_drain']:.0f} with the "
        f"indexer drained), PostgresStore {m['theirs_msgs_per_s']:.0f} msg/s; ours / theirs "
        f"{m['ratio']:.2f}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--locomo", type=Path, help="LoCoMo's JSON (read in place)")
    source.add_argument(
        "--beam",
        type=Path,
        help="with --bulk: a BEAM tier's folder (DATA/beam/500K), its chats read in place; a user's "
        "message split into claims, an assistant's answer one conclusion, as the harness writes them",
    )
    parser.add_argument("--conversations", type=int, default=7)
    parser.add_argument("--chats", nargs="*", default=None, help="with --beam: these chats (beam-500k-1 ...)")
    parser.add_argument("--rounds", type=int, default=1, help="times each conversation is ingested")
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest.json")
    parser.add_argument(
        "--embedder",
        default=None,
        help="with --bulk: embed with this model (memory.embedders.select's names, e.g. minilm) inside "
        "the timed calls, instead of vectors computed in advance",
    )
    parser.add_argument(
        "--embedder-latency",
        default=None,
        metavar="CALL_MS,TEXT_MS",
        help="with --bulk: vectors computed in advance, each embedding call answered after this wait "
        "(a model on another machine, e.g. 5,1)",
    )
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="time the bulk path (import_messages) against put and batch instead",
    )
    args = parser.parse_args(argv)
    if args.beam is not None and not args.bulk:
        parser.error("--beam times the bulk path: add --bulk")
    if args.beam is not None:
        tier = load_beam_tiered(args.beam)
        chosen = [c for c in tier.conversations if args.chats is None or c.id in args.chats]
        if args.chats is not None and len(chosen) < len(args.chats):
            parser.error(f"--chats: {args.beam} holds {', '.join(c.id for c in tier.conversations)}")
        conversations = chosen[: args.conversations]
        described = f"BEAM {args.beam.name} ({', '.join(c.id for c in conversations)})"
    else:
        conversations = list(load_locomo(args.locomo).conversations)[: args.conversations]
        described = f"LoCoMo's dev set ({args.locomo.name})"
    lookup = LookupEmbedder(TopicEmbedder())
    precompute(lookup, conversations)
    latency = None
    if args.embedder_latency is not None:
        call_ms, text_ms = (float(x) for x in args.embedder_latency.split(","))
        latency = (call_ms / 1000, text_ms / 1000)
    server = scratch_server("beads-ingest-")
    if args.bulk:
        runs = []
        for round_ in range(args.rounds):
            for conversation in conversations:
                run = import_once(server, conversation, lookup, round_, args.embedder, latency)
                print(json.dumps(run), flush=True)
                runs.append(run)
        table = import_markdown(runs, described, args.embedder, latency)
        print(table)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": runs, "machine": {"nproc": os.cpu_count()}}, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table)
        return 0
    results: dict[str, Any] = {
        "source": args.locomo.name,
        "machine": {"nproc": os.cpu_count()},
        "loadavg_at_start": _loadavg(),
        "runs": [],
    }
    for round_ in range(args.rounds):
        for conversation in conversations:
            run = ingest_once(server, conversation, lookup, round_)
            print(
                f"{conversation.id} round {round_}: {run['turns']} turns, ours {run['ours_msgs_per_s']:.0f} "
                f"msg/s ({run['ours_msgs_per_s_with_drain']:.0f} drained), theirs {run['theirs_msgs_per_s']:.0f}"
                f" msg/s, load {run['loadavg'][0]}",
                flush=True,
            )
            results["runs"].append(run)
    runs = results["runs"]
    results["median"] = {
        key: float(np.median([r[key] for r in runs]))
        for key in ("ours_msgs_per_s", "ours_msgs_per_s_with_drain", "theirs_msgs_per_s")
    }
    results["median"]["ratio"] = float(
        np.median([r["ours_msgs_per_s"] / r["theirs_msgs_per_s"] for r in runs])
    )
    results["loadavg_at_end"] = _loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    table = markdown(results)
    args.out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
