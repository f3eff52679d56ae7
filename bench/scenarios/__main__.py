"""python -m bench.scenarios: run the scenarios' cells, judge them, and write summary.md.

    uv run --extra dev python -m bench.scenarios --runs 3 --out results/scenarios
    uv run --extra dev python -m bench.scenarios --model ollama:qwen3:8b --judge-model ollama:qwen3:8b \\
        --out results/scenarios/ollama-qwen3-8b
    uv run --extra dev python -m bench.scenarios --report-only --out results/scenarios

Progress is printed per step; rows are appended to OUT/rows.jsonl as each step finishes, and a
second invocation with the same --out runs only the cells that are not complete. The summary is
written with OUT/rows.jsonl.gz, the copy to commit; --report-only reads it when rows.jsonl is absent.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
from pathlib import Path

from bench.scenarios.arms import ARMS
from bench.scenarios.harness import Options, model_spec, read_rows, run_all, write_snapshot
from bench.scenarios.report import summary
from bench.scenarios.script import SCENARIOS

PREDICTIONS = Path("results/scenarios/PREDICTIONS.md")


def write_summary(out: Path, predictions: Path, command: str) -> str:
    write_snapshot(out)
    text = summary(read_rows(out), predictions, command)
    (out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scenarios", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (scenario x arm)")
    parser.add_argument("--scenarios", nargs="+", choices=tuple(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--arms", nargs="+", choices=tuple(ARMS), default=list(ARMS))
    parser.add_argument(
        "--model",
        default="local",
        help="a model spec: local (the offline model), scripted, ollama:<name>, openai:<name>, "
        "anthropic:<name>, any provider:model of LangChain's init_chat_model",
    )
    parser.add_argument(
        "--judge-model", default=None, help="a model spec as --model takes, or none (default: --model)"
    )
    parser.add_argument("--embedder", default="minilm", help="as PLAYGROUND_EMBEDDER")
    parser.add_argument("--seed", type=int, default=7, help="the judge's shuffle")
    parser.add_argument("--out", type=Path, default=Path("results/scenarios"))
    parser.add_argument("--predictions", type=Path, default=PREDICTIONS)
    parser.add_argument(
        "--server-url", default=None, help="a Postgres server for the databases (default: embedded)"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild summary.md from OUT/rows.jsonl")
    args = parser.parse_args(argv)
    command = "python -m bench.scenarios " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.report_only:  # the command shown is the run's, read from the rows
        print(write_summary(args.out, args.predictions, ""))
        return 0
    try:
        model_spec(args.model)
    except ValueError as exc:
        parser.error(str(exc))
    judge = args.judge_model or args.model
    options = Options(
        out=args.out,
        runs=args.runs,
        scenarios=args.scenarios,
        arms=args.arms,
        model=args.model,
        judge_model=None if judge == "none" else judge,
        embedder=args.embedder,
        seed=args.seed,
        server_url=args.server_url,
    )
    # stopped (kill PID), it stops as on Ctrl+C: the databases and the embedded server are cleaned up
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(run_all(options))
    print(write_summary(args.out, args.predictions, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
