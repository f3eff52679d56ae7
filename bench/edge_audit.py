"""Automatic supersedes edges on real chats, read by hand: precision per rule.

The harness ingests LoCoMo and BEAM the way the middleware captures a chat (`python -m memory.eval
run`), so its databases hold every edge capture's rules wrote on those conversations. This script
draws a sample of them per rule for a person to read, and reports precision per rule from the
verdicts they wrote down:

    uv run --extra dev python -m bench.edge_audit sample --per-rule 12 > edges-to-read.txt
    uv run --extra dev python -m bench.edge_audit report   # results/supersession/edge-audit/

`sample` prints each edge's ids, rule, reason and both texts (the data's words: never committed);
the verdicts file (`verdicts.jsonl`) holds only ids, the rule and the verdict ("right": the new claim
replaces the old one's value for the same thing; "wrong": anything else), one line per edge read.
A rule below `memory.supersession.MIN_RULE_PRECISION` proposes its edges instead of writing them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from memory.embedded import resolve_database_url
from memory.supersession import MIN_RULE_PRECISION, rule_of

OUT = Path("results/supersession/edge-audit")
_EDGES = """
SELECT e.src, e.dst, e.session_id, e.reason, n.body AS new_body, o.body AS old_body
  FROM beads.edges e
  JOIN beads.facts n ON n.id = e.src
  JOIN beads.facts o ON o.id = e.dst
 WHERE e.relation = 'supersedes' AND e.automatic AND e.cascade_of IS NULL
 ORDER BY e.session_id, e.created_at, e.src
"""


def eval_databases(server: str) -> list[str]:
    with psycopg.connect(server, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'beads_eval_%%' ORDER BY datname"
        ).fetchall()
    return [r[0] for r in rows if "locomo" in r[0] or "beam" in r[0]]


def edges(server: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name in eval_databases(server):
        dataset = "locomo" if "locomo" in name else "beam"
        with psycopg.connect(make_conninfo(server, dbname=name), row_factory=dict_row) as conn:
            for row in conn.execute(_EDGES).fetchall():
                found.append({**row, "dataset": dataset, "rule": rule_of(row["reason"] or "")})
    return found


def sample(args: argparse.Namespace) -> int:
    every = edges(args.database_url or resolve_database_url())
    by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for edge in every:
        by_rule[edge["rule"]].append(edge)
    rng = random.Random(args.seed)
    print(
        f"# {len(every)} automatic edges: " + ", ".join(f"{r} {len(v)}" for r, v in sorted(by_rule.items()))
    )
    for rule, group in sorted(by_rule.items()):
        for edge in rng.sample(group, min(args.per_rule, len(group))):
            print(
                json.dumps(
                    {
                        "dataset": edge["dataset"],
                        "session": edge["session_id"],
                        "new": str(edge["src"]),
                        "old": str(edge["dst"]),
                        "rule": rule,
                        "verdict": "?",
                    }
                )
            )
            print(f"#   reason: {edge['reason']}")
            print(f"#   old: {' '.join(edge['old_body'].split())[:400]}")
            print(f"#   new: {' '.join(edge['new_body'].split())[:400]}")
    return 0


def report(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for line in args.verdicts.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["verdict"] in ("right", "wrong")]
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        table[r["rule"]][0 if r["verdict"] == "right" else 1] += 1
        table[f"all ({r['dataset']})"][0 if r["verdict"] == "right" else 1] += 1
        table["all"][0 if r["verdict"] == "right" else 1] += 1
    lines = [
        f"| rule | read | right | wrong | precision | writes edges (>= {MIN_RULE_PRECISION:.1f}) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for rule, (right, wrong) in sorted(table.items(), key=lambda kv: (kv[0].startswith("all"), kv[0])):
        precision = right / (right + wrong)
        writes = "–" if rule.startswith("all") else ("yes" if precision >= MIN_RULE_PRECISION else "proposes")
        lines.append(f"| {rule} | {right + wrong} | {right} | {wrong} | {precision:.2f} | {writes} |")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.edge_audit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="print a sample of automatic edges per rule, with their texts")
    s.add_argument("--per-rule", type=int, default=12)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--database-url", help="the server the harness ingested into (default: its own)")
    r = sub.add_parser("report", help="precision per rule from the verdicts")
    r.add_argument("--verdicts", type=Path, default=OUT / "verdicts.jsonl")
    args = parser.parse_args(argv)
    return sample(args) if args.command == "sample" else report(args)


if __name__ == "__main__":
    sys.exit(main())
