"""The guided walkthrough as a new user meets it: the app on its own defaults (no Ollama, so the
offline model; MiniLM; web search and the research sub-agent on), driven in headless Chromium.

Each run starts a fresh database, clicks "Guided walkthrough", sends the four steps as they are
filled in, and records each lane's verdict (a plain answer only counts), each lane's final reply,
the budget facts our lane injected into its last call in block order, and seconds per step.

    uv run --extra dev python -m bench.walkthrough --runs 5 --out results/walkthrough

`--stock-store beads` runs the stock lane (the same LangMem tools and prompt) on BeadsStore, LangGraph's
store API over our fact graph; `--model scripted` runs both lanes on the rule-based model instead, and
`--model local-1.5b` on the offline 1.5B (the `local15` extra).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench.reliability.servers import OwnPostgres, app_process, create_database, drop_database
from playground.walkthrough import STEPS, verdict

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
# the new user's app: the playground's own defaults, with the model it picks when Ollama is absent
NEW_USER = {"embedder": "minilm", "model_backend": "local", "web_search": True, "research": True}
STEP_TIMEOUT_MS = 1_800_000  # a step on two loaded cores, sub-agent and web search included
_BUDGET = re.compile(r"budget", re.IGNORECASE)

_TURN_DONE = """(n) => {
    const all = document.querySelectorAll('#turns .turn');
    if (all.length !== n) return false;
    const last = all[all.length - 1];
    return [...last.querySelectorAll('.lane-bar .badge')].every(
        b => /^(done|failed|error)/.test(b.textContent.trim()));
}"""


def one_run(server: str, number: int, **settings: Any) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    db = create_database(server, prefix="walk")
    try:
        with app_process(db, start_timeout=600, **{**NEW_USER, **settings}) as app, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(f"{app.base}/")
                page.click("text=Guided walkthrough")
                seconds = []
                for n, step in enumerate(STEPS, 1):
                    page.wait_for_function(
                        "(t) => document.querySelector('#composer textarea').value === t", arg=step.text
                    )
                    started = time.monotonic()
                    page.click("#composer button[type=submit]")
                    page.wait_for_function(_TURN_DONE, arg=n, timeout=STEP_TIMEOUT_MS)
                    seconds.append(round(time.monotonic() - started, 1))
                page.wait_for_selector("#verdict li", timeout=120_000)
                verdicts = {
                    li.get_attribute("data-lane"): li.get_attribute("data-verdict")
                    for li in page.locator("#verdict li").all()
                }
                last = page.locator("#turns .turn").nth(len(STEPS) - 1)
                replies = {
                    lane: last.locator(f".lane-{lane} .reply").inner_text() for lane in ("beads", "stock")
                }
                injected = [
                    t for t in last.locator(".lane-beads .fact-text").all_inner_texts() if _BUDGET.search(t)
                ]
            finally:
                browser.close()
    finally:
        drop_database(server, db)
    first = injected[0] if injected else ""
    return {
        "run": number,
        "verdicts": verdicts,
        "replies": replies,
        "injected_budget_facts": injected,
        "first_budget_fact_is_current": verdict(first) == "corrected",
        "seconds_per_step": seconds,
    }


def summary(runs: list[dict[str, Any]], flags: str = "") -> str:
    ours = sum(r["verdicts"].get("beads") == "corrected" for r in runs)
    for r in runs:  # the walkthrough's own reading of a value ("$120,000" is the corrected one)
        r["first_budget_fact_is_current"] = verdict((r["injected_budget_facts"] or [""])[0]) == "corrected"
    first = sum(r["first_budget_fact_is_current"] for r in runs)
    both = sum(r["verdicts"].get("beads") == "corrected" and r["first_budget_fact_is_current"] for r in runs)
    stock: dict[str, int] = {}
    for r in runs:
        stock[r["verdicts"].get("stock", "?")] = stock.get(r["verdicts"].get("stock", "?"), 0) + 1
    steps = [s for r in runs for s in r["seconds_per_step"]]
    lines = [
        "# The guided walkthrough on the offline default"
        if not flags
        else f"# The guided walkthrough ({flags})",
        "",
        f"`uv run --extra dev python -m bench.walkthrough --runs {len(runs)}{' ' + flags if flags else ''}`: the app "
        "on its defaults with no Ollama (the offline model, MiniLM, web search and the research sub-agent asked "
        "for; the tool gate leaves both out for a model that fails its checks)"
        f"{', but for the options given' if flags else ''}, in headless Chromium.",
        "",
        f"- our lane answered in words with $120k and not $100k: **{ours} of {len(runs)}**",
        f"- the first budget fact in our lane's last block was the $120k one: **{first} of {len(runs)}**",
        f"- both: **{both} of {len(runs)}**",
        f"- the stock lane's verdicts: {', '.join(f'{k} {v}' for k, v in sorted(stock.items()))}",
        f"- seconds per step (both lanes run together): median {sorted(steps)[len(steps) // 2]:.0f}, "
        f"max {max(steps):.0f}",
        "",
        "| run | ours | stock | first budget fact of our block | our reply | stock reply | s per step |",
        "|---:|---|---|---|---|---|---|",
    ]
    for r in runs:
        cells = [
            str(r["run"]),
            r["verdicts"].get("beads", "?"),
            r["verdicts"].get("stock", "?"),
            (r["injected_budget_facts"] or ["(none)"])[0],
            " ".join(r["replies"]["beads"].split())[:160],
            " ".join(r["replies"]["stock"].split())[:160],
            " / ".join(f"{s:.0f}" for s in r["seconds_per_step"]),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.walkthrough", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/walkthrough"))
    parser.add_argument("--report-only", action="store_true", help="rebuild summary.md from runs.jsonl")
    parser.add_argument("--stock-store", choices=("postgres", "beads"), default="postgres")
    parser.add_argument(
        "--model",
        choices=("local", "local-1.5b", "scripted"),
        default="local",
        help="local: the offline default (0.5B); local-1.5b: the offline 1.5B (the local15 extra)",
    )
    args = parser.parse_args(argv)
    settings: dict[str, Any] = {"stock_store": args.stock_store, "model_backend": args.model}
    if args.model == "local-1.5b":
        settings.update(model_backend="local", local_model="qwen2.5-coder-1.5b")
    flags = " ".join(
        f"--{name.replace('_', '-')} {value}"
        for name, value, default in (
            ("stock_store", args.stock_store, "postgres"),
            ("model", args.model, "local"),
        )
        if value != default
    )
    if args.report_only:
        saved = [json.loads(line) for line in (args.out / "runs.jsonl").read_text().splitlines() if line]
        (args.out / "summary.md").write_text(summary(saved, flags))
        print(summary(saved, flags))
        return 0
    if not Path(CHROMIUM).exists():
        print(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    own = OwnPostgres()
    try:
        for n in range(1, args.runs + 1):
            print(f"[{n}/{args.runs}] walkthrough ...", flush=True)
            runs.append(one_run(own.url, n, **settings))
            print(f"      {runs[-1]['verdicts']} {runs[-1]['seconds_per_step']}", flush=True)
            (args.out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    finally:
        own.close()
    (args.out / "summary.md").write_text(summary(runs, flags))
    print(summary(runs, flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
