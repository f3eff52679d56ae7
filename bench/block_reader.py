"""What a small model answers with each lane's memory in front of it: the block read, not just built.

    uv run --extra dev python -m bench.block_reader [--sequences FILE] [--out DIR] [--model local]

bench.fresh_thread asks whether the current value comes first in what a question is shown. A weak
reader can still answer with the stale line under it, so this bench asks the model. Each sequence
(a fact stated, other things said, then the fact changed, or only something that looks like a change)
goes into a fresh session an hour a message, as fresh_thread does; then the question is put to the
offline model once per lane, on a thread of its own, with no tools:

  ours   the system prompt our lane runs with (no memory tools bound, as the offline default) and the
         block our middleware would inject for that question (memory.context.recall.plan_call, its budgets,
         the clock an hour after the last message).
  stock  the same core prompt and LangGraph's PostgresStore's top `k` documents for the question under
         a plain header: the stock lane's memory as if its model always searched (the 0.5B rarely
         calls the search tool itself, so this is the stock store at its best).

`--oracle` asks what the reader would answer if capture and ranking had paired every update right: in
our block the line holding the stale value (and not the current one) is taken out and put back in one
of three forms: `words`, folded into the current line as " | earlier (when): ..." (how the block
showed a folded value until it stopped showing its words); `tagged`, kept as its own line marked out of
date; `hidden`, gone, the current line saying it replaces an earlier value (how the block shows a
linked or folded correction). Look-alikes are left as they are.

The reply names the current value, the stale one (for a look-alike: the look-alike's value), both or
neither; a value is found in the reply with case, "$" and thousands separators ignored. Greedy decoding
with a fixed seed, so two lanes differ only by what memory showed; llama.cpp is still not bit-for-bit
reproducible across runs on these cores (a few replies in 60 differ with the same block), so a cell
that moves by one or two is inside the noise.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.store.postgres import PostgresStore
from psycopg.rows import dict_row

from bench.eval.loaders import SEQUENCE_START, SEQUENCE_STEP
from bench.eval.reader import offline_reader
from bench.eval.supersession_pairs import read_jsonl
from bench.fresh_thread import SEQUENCES, capture_sequence, put_sequence
from bench.scratch import scratch_database
from memory.context.assembler import Budgets
from memory.context.block import LineStyle, TierSettings
from memory.context.recall import plan_call
from memory.context.tokens import count_cached
from memory.doors.middleware import message_slots
from memory.embedders.select import embedder_from_name
from memory.graph.store import FactStore
from memory.postgres.connection import open_pool
from playground.comparison.lanes import CORE_SYSTEM_PROMPT, beads_prompt
from playground.models.settings import LocalModelName

RESULTS = Path("results/block-reader")
STOCK_HEADER = "## Memory\nWhat the user said earlier, most relevant first:"
READINGS = ("current", "stale", "both", "neither")


def _plain(text: str) -> str:
    return re.sub(r"[$,]", "", text.lower())


def holds(reply: str, value: str) -> bool:
    """Whether the reply names `value` (case, "$" and thousands separators aside)."""
    return _plain(value) in _plain(reply)


def reading(reply: str, row: dict[str, Any]) -> str:
    other = row["stale"] if row["kind"] == "update" else row["other"]
    current, wrong = holds(reply, row["current"]), holds(reply, other)
    if current and wrong:
        return "both"
    return "current" if current else "stale" if wrong else "neither"


def our_block(store: FactStore, row: dict[str, Any], system: str) -> str:
    """The block our middleware injects for the question (the lane's defaults, no memory tools)."""
    ns = store.root(f"read-{row['id']}")
    capture_sequence(store, ns, row)
    question = HumanMessage(row["question"])
    [fixed] = count_cached([system])
    now = SEQUENCE_START + (len(row["messages"]) + 1) * SEQUENCE_STEP
    call = plan_call(
        store,
        ns,
        history=message_slots([question]),
        message_ids=[None],
        query=row["question"],
        fixed_tokens=fixed,
        budgets=Budgets(),
        injection="always",
        options=store.search_options,
        tier=TierSettings(style=LineStyle(ids=False)),
        now=now,
    )
    return call.block


_LINE = re.compile(r"^- (?:\[[0-9a-f]{8}\] )?\(([^)]*)\) (.*)$")
ORACLES = ("words", "tagged", "hidden")


def oracle_block(block: str, row: dict[str, Any], form: str) -> str:
    """`block` with its stale lines paired with the current line in `form` (see the module docstring)."""
    if row["kind"] != "update":
        return block
    lines = block.split("\n")
    facts = [i for i, line in enumerate(lines) if line.startswith("- ")]
    current = [i for i in facts if holds(lines[i], row["current"])]
    stale = [i for i in facts if holds(lines[i], row["stale"]) and i not in current]
    if not current or not stale:
        return block
    out = []
    for i, line in enumerate(lines):
        said = _LINE.match(line)
        if i in stale:
            if form == "tagged" and said:
                out.append(f"- ({said.group(1)}) {said.group(2)} (out of date: a later line replaces it)")
            continue
        if i == current[0] and "(updated: replaces" not in line:
            if form == "hidden":
                line += " (updated: replaces an earlier value)"
            elif form == "words":
                line += "".join(
                    f" | earlier ({m.group(1)}): {m.group(2)}"
                    for m in (_LINE.match(lines[j]) for j in stale)
                    if m
                )
        out.append(line)
    return "\n".join(out)


def stock_block(docs: PostgresStore, row: dict[str, Any], k: int) -> str:
    items = docs.search(put_sequence(docs, row), query=row["question"], limit=k)
    return "\n".join([STOCK_HEADER, *(f"- {item.value['content']}" for item in items)])


def ask(model: BaseChatModel, system: str, block: str, question: str) -> str:
    prompt = "\n\n".join(part for part in (system, block) if part)
    reply = model.invoke([SystemMessage(prompt), HumanMessage(question)])
    return str(reply.content).strip()


def _as_given(path: Path) -> Path:
    """`path` relative to the working directory where it lies under it, as a user would type it."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def summary(rows: Sequence[dict[str, Any]], title: str, command: str) -> str:
    lines = [f"# {title}", "", f"`{command}`", ""]
    lines += [
        "| sequences | lane | current | stale / look-alike's value | both | neither |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for kind in ("update", "lookalike"):
        for lane in ("ours", "stock"):
            these = [r for r in rows if r["kind"] == kind and r["lane"] == lane]
            if not these:
                continue
            counts = Counter(r["reading"] for r in these)
            n = len(these)
            label = "updates" if kind == "update" else "look-alikes"
            cells = " | ".join(f"{counts[k]}/{n}" for k in READINGS)
            lines.append(f"| {label} | {lane} | {cells} |")
    return "\n".join(lines) + "\n"


MODELS: dict[str, LocalModelName] = {"local": "qwen2.5-coder-0.5b", "local-1.5b": "qwen2.5-coder-1.5b"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequences", type=Path, default=SEQUENCES)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--model", choices=sorted(MODELS), default="local")
    parser.add_argument("--k", type=int, default=8, help="documents the stock lane shows (default 8)")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--lanes", nargs="+", choices=("ours", "stock"), default=["ours", "stock"])
    parser.add_argument("--limit", type=int, help="only the first N sequences")
    parser.add_argument(
        "--oracle", choices=ORACLES, help="pair every update's stale line right, in this form"
    )
    args = parser.parse_args(argv)
    sequences = read_jsonl(args.sequences)[: args.limit]
    # the harness's reader, with room for a reply of a sentence or two
    model = offline_reader([Budgets().retrieved or 0], model=MODELS[args.model], max_tokens=80)
    ours_system, stock_system = beads_prompt(memory_tools=False), CORE_SYSTEM_PROMPT
    url = scratch_database("beads-block-reader-", "block_reader")
    rows: list[dict[str, Any]] = []
    embedder = embedder_from_name(args.embedder)
    with (
        open_pool(url, min_size=1, max_size=2) as pool,
        psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn,
    ):
        store = FactStore(pool, embedder, index_in_background=False)
        store.setup()
        docs = PostgresStore(
            conn, index={"dims": embedder.dims, "embed": embedder.embed, "fields": ["content"]}
        )
        docs.setup()
        for n, row in enumerate(sequences, 1):
            for lane in args.lanes:
                if lane == "ours":
                    system, block = ours_system, our_block(store, row, ours_system)
                    if args.oracle:
                        block = oracle_block(block, row, args.oracle)
                else:
                    system, block = stock_system, stock_block(docs, row, args.k)
                started = time.perf_counter()
                reply = ask(model, system, block, row["question"])
                rows.append(
                    {
                        "id": row["id"],
                        "kind": row["kind"],
                        "lane": lane,
                        "reading": reading(reply, row),
                        "reply": reply,
                        "block": block,
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
            done = [r for r in rows if r["id"] == row["id"]]
            print(
                f"[{n}/{len(sequences)}] {row['id']}: "
                + ", ".join(f"{r['lane']} {r['reading']}" for r in done),
                flush=True,
            )
    command = (
        # the default file is found from this module: named as from where the command runs
        f"python -m bench.block_reader --sequences {_as_given(args.sequences)} --out {args.out}"
        f" --model {args.model}"
        + (f" --lanes {' '.join(args.lanes)}" if args.lanes != ["ours", "stock"] else "")
        + (f" --limit {args.limit}" if args.limit else "")
        + (f" --oracle {args.oracle}" if args.oracle else "")
    )
    text = summary(
        rows,
        f"What the offline model answers with each lane's memory ({args.sequences.name}, {MODELS[args.model]})",
        command,
    )
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text)
    with gzip.open(args.out / "rows.jsonl.gz", "wt", encoding="utf-8") as out:
        for r in rows:
            out.write(json.dumps(r, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
