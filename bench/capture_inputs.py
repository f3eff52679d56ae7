"""Bad input at the library's main door: each message through a `create_agent` turn with the middleware
and a checkpointer, then a second turn on the same thread; what capture did, and whether the turn
and the thread went on.

    python -m bench.capture_inputs [--embedder minilm] [--out results/reliability/capture-inputs.md]

On a throwaway database of an embedded Postgres (or TEST_DATABASE_URL's server), the scripted chat
model and the fake embedder: what is measured is the capture path, not a model. `--embedder minilm`
runs the same inputs through the offline model, as the middleware embeds them by default. The last
row stops the database between the two turns.
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql

from bench.capture_size import message_of
from memory.doors.middleware import BeadsMemoryMiddleware
from memory.embedders import FakeEmbedder
from memory.embedders.base import Embedder
from memory.embedders.select import embedder_from_name
from memory.events import CAPTURE_EVENT, INJECTION_EVENT
from memory.graph.store import FactStore
from memory.postgres.connection import open_pool
from memory.scripted import ScriptedChatModel
from memory.testing import throwaway_database

CASES: list[tuple[str, str]] = [
    ("1 KB of sentences", message_of(1024)),
    ("16 KB of sentences", message_of(16 * 1024)),
    ("256 KB of sentences", message_of(256 * 1024)),
    ("1 MB of sentences", message_of(1024 * 1024)),
    ("a NUL byte", "Our budget is $100k.\x00 We self-host."),
    ("a lone surrogate", "Our office is in Z\ud800rich."),
    ("control characters", "We use Post\x07gres\x1b in eu-west-1."),
    ("right-to-left text", "ميزانيتنا ١٠٠ ألف دولار في السنة."),
    ("emoji", "Our mascot is 🦙 and the budget is 💵 100k."),
    ("zero-width characters", "Zero\u200bwidth\u200cjoiners\u200d stay."),
    ("only whitespace and controls", " \t\x01\x02 \n"),
]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_case(
    url: str, label: str, text: str, *, drop: tuple[str, str] | None = None, embedder: Embedder | None = None
) -> dict[str, Any]:
    """`drop`: (an admin connection string, the database's name), dropped between the two turns;
    `embedder`: the model the store embeds with (default: the fake one), one for every case, as one
    process holds one."""
    with open_pool(url, timeout=3) as pool:
        store = FactStore(pool, embedder or FakeEmbedder())
        store.setup()
        saver: BaseCheckpointSaver[Any]
        if drop is None:
            saver = PostgresSaver(pool)  # type: ignore[arg-type]
            saver.setup()
        else:
            # the thread's checkpoints elsewhere: with them in the dropped database LangGraph itself
            # could not go on, whatever the memory does
            saver = InMemorySaver()
        model = ScriptedChatModel(replies=["Noted.", "Answered."])
        agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)], checkpointer=saver)
        thread = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": "s"}}
        started = time.perf_counter()
        first = list(agent.stream({"messages": [HumanMessage(text)]}, thread, stream_mode="custom"))
        seconds = time.perf_counter() - started
        stored = len(store.audit.facts_in_namespace(store.root("s").id))
        captured = [e for e in first if e.get("type") == CAPTURE_EVENT]
        second_ok, second_note = True, ""
        if drop is not None:
            admin_url, name = drop
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            second_turn = {"configurable": {"thread_id": str(uuid.uuid4()), "session_id": "s"}}
        else:
            second_turn = thread
        try:
            second = list(
                agent.stream(
                    {"messages": [HumanMessage("What did I say?")]}, second_turn, stream_mode="custom"
                )
            )
            errors = [e["error"] for e in second if e.get("type") == INJECTION_EVENT and "error" in e]
            second_note = errors[0].split(":")[0] if errors else ""
        except Exception as exc:
            second_ok, second_note = False, f"{type(exc).__name__}: {exc}"
    return {
        "case": label,
        "chars": len(text),
        "first_turn_answered": len(model.prompts) >= 1,
        "model_read_it_whole": str(model.prompts[0][-1].content) == text if model.prompts else False,
        "capture": ", ".join(f"{e['outcome']} ({'; '.join(e['notes'])})" for e in captured)
        or "stored as it came",
        "facts_stored": stored,
        "seconds": round(seconds, 2),
        "next_turn": ("answered" if second_ok and len(model.prompts) == 2 else "FAILED")
        + (f", {second_note}" if second_note else ""),
        "peak_rss_mb": round(_peak_mb(), 1),
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| input | characters | first turn | the model read | capture | facts stored | seconds | next turn, same thread "
        "| peak RSS so far, MB |",
        "|---|---:|---|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['chars']:,} | {'answered' if r['first_turn_answered'] else 'FAILED'} "
            f"| {'all of it' if r['model_read_it_whole'] else 'NOT all of it'} | {r['capture']} "
            f"| {r['facts_stored']} | {r['seconds']} | {r['next_turn']} | {r['peak_rss_mb']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--embedder", default="fake", help="fake (default) or minilm, the offline model")
    args = parser.parse_args(argv)
    embedder = FakeEmbedder() if args.embedder == "fake" else embedder_from_name(args.embedder)
    rows = []
    for label, text in CASES:
        with throwaway_database() as url:
            rows.append(one_case(url, label, text, embedder=embedder))
            print(rows[-1], flush=True)
    with throwaway_database() as url:
        name = str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
        admin = psycopg.conninfo.make_conninfo(url, dbname="postgres")
        # the database dropped between the turns: the next turn is answered without memory
        row = one_case(
            url,
            "the database gone after the first turn",
            "Our budget is $100k per year.",
            drop=(admin, name),
            embedder=embedder,
        )
        rows.append(row)
        print(row, flush=True)
    table = markdown(rows)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            "# Bad input at the middleware: every row a clear outcome\n\n"
            f"Made by `uv run --extra dev python -m bench.capture_inputs --embedder {args.embedder} --out {args.out}` "
            f"(the scripted model and the {args.embedder} embedder on an embedded Postgres; what is measured is the "
            "capture path). Each input is one user message of a `create_agent` turn with `BeadsMemoryMiddleware` (its "
            "default `max_message_chars`, 8,000) and `PostgresSaver`; then a second message on the same thread "
            "(the last row drops the memory's database between the turns, its checkpoints kept in memory: with "
            "them in the dropped database LangGraph itself could not go on).\n\n" + table
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
