"""Automatic supersedes edges on real chats, read by hand: precision per rule.

The harness ingests LoCoMo and BEAM the way the middleware captures a chat (`python -m bench.eval
run`), so its databases hold every edge capture's rules wrote on those conversations (few: on
ingestion 13, 18 in 7 LoCoMo conversations and 12 BEAM chats, nearly all between long messages).
Short messages, as a playground user types them, come from the chats written for the benches,
captured afresh (`--written`). This script draws the edges per rule (a rule named with whether both
claims were short) for a person to read, and reports precision per rule from the verdicts:

    uv run --extra dev python -m bench.edge_audit sample --per-rule 99 > edges-to-read.txt
    uv run --extra dev python -m bench.edge_audit sample --per-rule 99 --written \
        bench/eval/data/sequences_blind.jsonl bench/eval/data/sequences_blind2.jsonl \
        bench/data/chats_tune.jsonl > written-edges-to-read.txt
    uv run --extra dev python -m bench.edge_audit report   # results/supersession/edge-audit/

`sample` prints each edge's ids, rule, reason and both texts (the data's words: never committed);
the verdicts file (`verdicts.jsonl`) holds only ids, the rule and the verdict ("right": the new claim
replaces the old one's value for the same thing; "wrong": anything else), one line per edge read.
A rule below `memory.graph.supersession.MIN_RULE_PRECISION` proposes its edges instead of writing them.
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

from memory.graph.supersession import MIN_RULE_PRECISION, rule_of
from memory.postgres.embedded_postgres import resolve_database_url

OUT = Path("results/supersession/edge-audit")
_EDGES = """
SELECT e.src, e.dst, e.session_id, e.reason, n.body AS new_body, o.body AS old_body,
       coalesce(pn.body, n.body) AS new_message, coalesce(po.body, o.body) AS old_message
  FROM beads.edges e
  JOIN beads.facts n ON n.id = e.src
  JOIN beads.facts o ON o.id = e.dst
  LEFT JOIN beads.passages pn ON pn.id = n.passage_id
  LEFT JOIN beads.passages po ON po.id = o.passage_id
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
                rule = rule_of(row["reason"] or "", row["old_message"], row["new_message"])
                found.append({**row, "dataset": dataset, "rule": rule})
    return found


def written_edges(server: str, paths: list[Path]) -> list[dict[str, Any]]:
    """The automatic edges capture writes on chats written for the benches (a file of JSON lines with
    `id` and `messages`): each chat captured in order, one session each, in a scratch database."""
    from memory.embedders import MiniLMEmbedder
    from memory.graph.store import FactStore
    from memory.postgres.connection import open_pool

    name = "beads_edge_audit_written"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    url = make_conninfo(server, dbname=name)
    found: list[dict[str, Any]] = []
    try:
        with open_pool(url, min_size=1, max_size=2) as pool:
            store = FactStore(pool, MiniLMEmbedder())
            store.setup()
            for path in paths:
                for line in path.read_text().splitlines():
                    chat = json.loads(line)
                    root = store.root(f"{path.stem}:{chat['id']}")
                    for n, text in enumerate(chat["messages"]):
                        store.capture_message(root, text, message_id=f"m{n}", acting_on_behalf_of="user")
                with psycopg.connect(url, row_factory=dict_row) as conn:
                    for row in conn.execute(_EDGES).fetchall():
                        if row["session_id"].startswith(f"{path.stem}:"):
                            rule = rule_of(row["reason"] or "", row["old_message"], row["new_message"])
                            found.append({**row, "dataset": f"written:{path.stem}", "rule": rule})
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return found


def sample(args: argparse.Namespace) -> int:
    server = args.database_url or resolve_database_url()
    every = written_edges(server, args.written) if args.written else edges(server)
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
            print(
                f"#   (messages of {len(edge['old_message'].split())} and {len(edge['new_message'].split())} words)"
            )
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
    s.add_argument(
        "--written",
        type=Path,
        nargs="*",
        help="instead, chats written for the benches (JSON lines with id and messages), captured afresh",
    )
    r = sub.add_parser("report", help="precision per rule from the verdicts")
    r.add_argument("--verdicts", type=Path, default=OUT / "verdicts.jsonl")
    args = parser.parse_args(argv)
    return sample(args) if args.command == "sample" else report(args)


if __name__ == "__main__":
    sys.exit(main())
