"""The markdown tables of a search_latency run (printed, and written to results/latency/search_latency.md),
and the median of several runs side by side:

    python -m bench.report results/latency/run1.json results/latency/run2.json results/latency/run3.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGETS = {
    "search_ratio_p50_max": 1.0,  # ours / the faster PostgresStore setup, at 1k, 10k and 100k
    "search_ratio_p95_max": 1.1,
    "search_p95_ms_at_100k": 10.0,
    "capture_p95_ms": 5.0,  # automatic supersession on, at 10k and 100k
    "checks_ms": 1.0,  # capture's supersession and restatement checks of their own, per message
    "supersede_p95_ms": 5.0,
}


def size_label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def _pp(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.2f} / {stats['p95']:.2f}"


def _keyword_indexes(plan: dict[str, Any]) -> str:
    if not plan.get("keyword_searched"):
        return "keyword search off"
    keys = ("keyword_fact_index_used", "keyword_passage_index_used")
    return ", ".join("yes" if plan[k] else "**NO**" for k in keys)


def markdown(results: dict[str, Any]) -> str:
    m, p, sizes = results["machine"], results["parameters"], results["sizes"]
    rows = [
        f"Search latency (ms), k={p['k']}, 768-d vectors, {p['queries']} queries per size after "
        f"{p['warmup_queries']} warm-up ones, the systems' calls interleaved. {m['nproc']} x {m['cpu_model']}, "
        f"{m['postgres'].split(' on ')[0]}, pgvector {m['pgvector']}, shared_buffers "
        f"{m['postgres_settings']['shared_buffers']}. Load average during the run: "
        + ", ".join(f"{size_label(s['size'])} {s['loadavg'][0]}" for s in sizes)
        + ".",
        "",
        "PostgresStore runs twice: on the connection `from_conn_string` opens (prepared statements, "
        "`prepare_threshold=0`) and on one configured like the library's pools (no prepared statements), "
        "as the playground runs it. Ratios are ours / PostgresStore.",
        "",
        "| facts | ours p50 / p95 | PostgresStore p50 / p95 | ratio p50, p95 | PostgresStore unprepared "
        "p50 / p95 | ratio p50, p95 | ours via FactStore.search p50 / p95 | HNSW used (ours; theirs) "
        "| keyword GIN used (claims, passages) |",
        "|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|",
    ]
    for s in sizes:
        sr, plan = s["search"], s["plan"]
        used = "yes" if plan["fact_index_used"] else "**NO**"
        rows.append(
            f"| {s['size']:,} | {_pp(sr['ours'])} | {_pp(sr['theirs'])} "
            f"| {sr['ratio_p50']:.2f}, {sr['ratio_p95']:.2f} | {_pp(sr['theirs_unprepared'])} "
            f"| {sr['ratio_unprepared_p50']:.2f}, {sr['ratio_unprepared_p95']:.2f} "
            f"| {_pp(sr['ours_store'])} | {used}; {'yes' if plan['their_index_used'] else '**NO**'} "
            f"| {_keyword_indexes(plan)} |"
        )

    rows += [
        "",
        "Writes, ours (ms, p50 / p95; vectors computed in advance), and the block a search returns:",
        "",
        "| facts | capture_message | the same, automatic supersession off (p95 ratio on / off) "
        "| insert_facts | insert_facts, synchronous_commit off | supersede "
        "| block facts mean (min-max) | block chars mean (max) | hits resolved from a superseded fact, "
        "per query | PostgresStore items that are superseded, per query |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        w, b = s["writes"], s["search"]["block"]
        off = w.get("capture_message_no_auto_supersede")
        off_cell = f"{_pp(off)} ({w['capture_message']['p95'] / off['p95']:.2f})" if off else "not measured"
        rows.append(
            f"| {s['size']:,} | {_pp(w['capture_message'])} | {off_cell} | {_pp(w['insert_facts'])} "
            f"| {_pp(w['insert_facts_async_commit'])} | {_pp(w['supersede'])} "
            f"| {b['ours']['facts']['mean']:.1f} ({b['ours']['facts']['min']:.0f}-{b['ours']['facts']['max']:.0f}) "
            f"| {b['ours']['chars']['mean']:.0f} ({b['ours']['chars']['max']:.0f}) "
            f"| {b['ours']['resolved']['mean']:.2f} | {b['theirs']['superseded_returned']['mean']:.2f} |"
        )

    rows += [
        "",
        "The background indexer (memory.graph.indexer): vectors still waiting for the HNSW indexes when the "
        "next iteration began, three messages later (search compares those exactly). Each timed "
        "capture starts with the indexer drained, as in a chat where messages arrive seconds apart:",
        "",
        "| facts | waiting after an iteration, mean (max) | drained at the end | drain seconds |",
        "|---:|---:|---:|---:|",
    ]
    for s in sizes:
        ix = s["writes"].get("indexer")
        if ix:
            w = ix["pending_after_each_capture"]
            rows.append(
                f"| {s['size']:,} | {w['mean']:.1f} ({w['max']:.0f}) | {ix['drained_at_end']} "
                f"| {ix['drain_s']:.2f} |"
            )

    if any(s["writes"].get("checks") for s in sizes):
        rows += [
            "",
            "Capture's checks of their own, per message (ms, p50 / p95; `bench.writes.measure_checks`): "
            "the nearest earlier claims of each new claim (memory.graph.earlier_claims, one round trip, "
            "prepared; in a capture they travel with its INSERTs), and the rules over them (judge, "
            "restates), nothing written; and the automatic supersessions a timed capture wrote:",
            "",
            "| facts | nearest claims | rules | both | pairs compared, mean | supersessions per capture |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for s in sizes:
            c = s["writes"].get("checks")
            if not c:
                continue
            rows.append(
                f"| {s['size']:,} | {_pp(c['nearest_claims_ms'])} | {_pp(c['rules_ms'])} "
                f"| {_pp(c['checks_ms'])} | {c['pairs_compared']['mean']:.1f} "
                f"| {s['writes'].get('auto_superseded_per_capture', 0):.2f} |"
            )
    rows += [
        "",
        "Loading and building (seconds; MB on disk), and the memory it needs: each HNSW build holds its "
        "graph in `maintenance_work_mem` (pgvector says when it no longer fits and the build goes on, "
        "slower, on disk); the bench process holds the corpus and every vector:",
        "",
        "| facts | load ours / theirs | HNSW builds: facts, passages, theirs | HNSW MB: facts, passages, "
        "theirs | database MB | maintenance_work_mem | graph outgrew it | bench peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        ld = s["load"]
        names = list(ld["index_build_s"])
        builds = ", ".join(f"{ld['index_build_s'][n]:.1f}" for n in names)
        sizes_mb = ", ".join(f"{ld['index_bytes'].get(n, 0) / 1e6:.0f}" for n in names)
        outgrew = (
            "yes" if any("maintenance_work_mem" in n for n in ld.get("index_build_notices", [])) else "no"
        )
        rows.append(
            f"| {s['size']:,} | {ld['load_ours_s']:.1f} / {ld['load_theirs_s']:.1f} | {builds} | {sizes_mb} "
            f"| {ld.get('database_bytes', 0) / 1e6:.0f} | {ld.get('maintenance_work_mem', '1GB')} | {outgrew} "
            f"| {s.get('bench_peak_rss_bytes', 0) / 1e6:.0f} |"
        )

    for key, title in (
        (
            "insert_facts_steps_ms",
            "insert_facts (capture's SQL layer; pipelined, so each statement is only queued and the "
            "server's work and the round trip show at commit)",
        ),
        ("supersede_steps_ms", "memory.graph.revisions.supersede"),
    ):
        step_names = sorted({k for s in sizes for k in s["writes"][key]})
        rows += [
            "",
            f"{title}, statement by statement (ms per call, p50 / p95):",
            "",
            "| facts | " + " | ".join(step_names) + " |",
            "|---:|" + "---:|" * len(step_names),
        ]
        for s in sizes:
            st = s["writes"][key]
            cells = [_pp(st[k]) if k in st else "-" for k in step_names]
            rows.append(f"| {s['size']:,} | " + " | ".join(cells) + " |")

    rows += ["", "Targets:", "", "| target | " + " | ".join(size_label(s["size"]) for s in sizes) + " |"]
    rows.append("|---|" + "---:|" * len(sizes))
    for title, check in _target_rows():
        rows.append(f"| {title} | " + " | ".join(check(s) for s in sizes) + " |")

    rows += [
        "",
        "Seconds per phase:",
        "",
        "| phase | " + " | ".join(size_label(s["size"]) for s in sizes) + " |",
    ]
    rows.append("|---|" + "---:|" * len(sizes))
    for phase in dict.fromkeys(k for s in sizes for k in s["phases_s"]):
        rows.append(f"| {phase} | " + " | ".join(f"{s['phases_s'].get(phase, 0):.1f}" for s in sizes) + " |")
    return "\n".join(rows) + "\n"


def _mark(ok: bool, text: str) -> str:
    return f"{text} {'ok' if ok else 'MISSED'}"


def _target_rows() -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    t = TARGETS

    def ratio(s: dict[str, Any]) -> str:
        # against the faster of PostgresStore's two configurations
        sr = s["search"]
        r50 = max(sr["ratio_p50"], sr["ratio_unprepared_p50"])
        r95 = max(sr["ratio_p95"], sr["ratio_unprepared_p95"])
        ok = r50 <= t["search_ratio_p50_max"] and r95 <= t["search_ratio_p95_max"]
        return _mark(ok, f"{r50:.2f}, {r95:.2f}")

    def p95_at_100k(s: dict[str, Any]) -> str:
        p95 = s["search"]["ours"]["p95"]
        return (
            _mark(p95 <= t["search_p95_ms_at_100k"], f"{p95:.2f}") if s["size"] >= 100_000 else f"({p95:.2f})"
        )

    def capture(s: dict[str, Any]) -> str:
        p95 = s["writes"]["capture_message"]["p95"]
        if s["size"] < 10_000:
            return f"({p95:.2f})"
        return _mark(p95 <= t["capture_p95_ms"], f"{p95:.2f}")

    def checks(s: dict[str, Any]) -> str:
        c = s["writes"].get("checks")
        if not c:
            return "not measured"
        return _mark(c["checks_ms"]["p50"] <= t["checks_ms"], _pp(c["checks_ms"]))

    def supersede(s: dict[str, Any]) -> str:
        p95 = s["writes"]["supersede"]["p95"]
        return _mark(p95 <= t["supersede_p95_ms"], f"{p95:.2f}")

    def block(s: dict[str, Any]) -> str:
        facts = s["search"]["block"]["ours"]["facts"]
        return _mark(facts["min"] == facts["max"] == s["k"], f"{facts['min']:.0f}-{facts['max']:.0f}")

    return [
        ("search ratio ours / PostgresStore (the faster setup), p50 <= 1.0 and p95 <= 1.1", ratio),
        ("ours search p95 <= 10 ms at 100k", p95_at_100k),
        ("capture p95 <= 5 ms, automatic supersession on, at 10k and 100k (capture_message)", capture),
        ("capture's checks of their own <= 1 ms a message (p50 / p95)", checks),
        ("supersede p95 <= 5 ms", supersede),
        ("block stays k facts", block),
    ]


def _faster_theirs(search: dict[str, Any], pct: str) -> float:
    return min(search["theirs"][pct], search["theirs_unprepared"][pct])


def _by_size(runs: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each size's measurements, from every run that measured it."""
    by_size: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        for s in run["sizes"]:
            by_size.setdefault(s["size"], []).append(s)
    return by_size


def median_table(runs: list[dict[str, Any]]) -> str:
    """Per size, the median over `runs` of each figure the targets name, and each run's load average:
    one run is inside this machine's noise, the median of several is what a page quotes."""
    by_size = _by_size(runs)

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}"

    rows = [
        f"Median over {len(runs)} runs' JSON (`python -m bench.report`), per size over the runs that measured "
        "it (the runs column). Ratios are ours / the "
        "faster PostgresStore setup at that percentile (prepared, or a pool without prepared statements).",
        "",
        "| facts | runs | load average at start | ours search p50 / p95 | PostgresStore (faster) p50 / p95 "
        "| ratio p50 | ratio p95 | capture p95, supersession on / off | checks p50 / p95 | supersede p95 |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, sizes in sorted(by_size.items()):
        sr = [s["search"] for s in sizes]
        wr = [s["writes"] for s in sizes]
        checks = [w["checks"]["checks_ms"] for w in wr if w.get("checks")]
        rows.append(
            f"| {size:,} | {len(sizes)} | {', '.join(str(s['loadavg'][0]) for s in sizes)} "
            f"| {med([x['ours']['p50'] for x in sr])} / {med([x['ours']['p95'] for x in sr])} "
            f"| {med([_faster_theirs(x, 'p50') for x in sr])} / {med([_faster_theirs(x, 'p95') for x in sr])} "
            f"| {med([x['ours']['p50'] / _faster_theirs(x, 'p50') for x in sr])} "
            f"| {med([x['ours']['p95'] / _faster_theirs(x, 'p95') for x in sr])} "
            f"| {med([w['capture_message']['p95'] for w in wr])} / "
            f"{med([w['capture_message_no_auto_supersede']['p95'] for w in wr])} "
            f"| {med([c['p50'] for c in checks]) if checks else '–'} / {med([c['p95'] for c in checks]) if checks else '–'} "
            f"| {med([w['supersede']['p95'] for w in wr])} |"
        )
    return "\n".join(rows)


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Search p50 / p95 (ours and the faster PostgresStore setup) and capture p95 against the number of
    facts, log-log, each point the median over the runs that measured that size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_size = _by_size(runs)
    sizes = sorted(by_size)

    def series(pick: Callable[[dict[str, Any]], float]) -> list[float]:
        return [statistics.median(pick(s) for s in by_size[size]) for size in sizes]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, pick, style in (
        ("ours, search p50", lambda s: s["search"]["ours"]["p50"], "o-"),
        ("ours, search p95", lambda s: s["search"]["ours"]["p95"], "o--"),
        ("PostgresStore, search p50", lambda s: _faster_theirs(s["search"], "p50"), "s-"),
        ("PostgresStore, search p95", lambda s: _faster_theirs(s["search"], "p95"), "s--"),
        ("ours, capture p95", lambda s: s["writes"]["capture_message"]["p95"], "^:"),
    ):
        ax.plot(sizes, series(pick), style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("facts in the session")
    ax.set_ylabel("ms")
    ax.set_title("Latency against size (median over runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    plot_path = None
    if "--plot" in args:
        at = args.index("--plot")
        plot_path = Path(args[at + 1])
        del args[at : at + 2]
    usage = "usage: python -m bench.report RUN.json [RUN.json ...] [--plot PNG]"
    if {"-h", "--help"} & set(args):
        print(usage)
        return 0
    if not args:
        print(usage, file=sys.stderr)
        return 2
    runs = [json.loads(Path(a).read_text()) for a in args]
    print(median_table(runs))
    if plot_path is not None:
        plot(runs, plot_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
