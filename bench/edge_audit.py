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

`pairs` reads what ranking pairs at read time instead (memory.rules.slots): two current claims of a
block that it reads as one slot, each saying one thing, in the blocks the harness's beads arm builds
for a split's questions. Such a pair is where a block may tell the model an older line is outdated,
so it is read the same way, named with whether both claims' messages were short:

    uv run --extra dev python -m bench.edge_audit pairs --beam $DATA/beam/500K --split results/split.json \
        --only tune --per-rule 40 > pairs-to-read.txt
    uv run --extra dev python -m bench.edge_audit report --verdicts results/supersession/edge-audit/ranking-pairs.jsonl
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
    if args.command == "pairs":
        every = ranking_pairs(args)
    else:
        every = written_edges(server, args.written) if args.written else edges(server)
    by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for edge in every:
        by_rule[edge["rule"]].append(edge)
    rng = random.Random(args.seed)
    print(
        f"# {len(every)} {'pairs' if args.command == 'pairs' else 'automatic edges'}: "
        + ", ".join(f"{r} {len(v)}" for r, v in sorted(by_rule.items()))
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


def ranking_pairs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The pairs ranking reads as one slot in the beads arm's blocks (`args.budget` tokens) for the
    questions of a split's conversations, each pair once: the older claim flagged outdated by, or said
    before, the newer, both saying one thing."""
    from bench.eval.assembled import BeadsArm
    from bench.eval.ingest import dataset_database, ensure_database
    from bench.eval.loaders import LOADERS
    from bench.eval.runner import make_arm, open_stores, read_split
    from bench.eval.window import ConversationView, asked_at
    from memory.embedders.select import embedder_from_name
    from memory.flags import PossiblyOutdated, SaidBefore
    from memory.rules.corrections import says_one_thing
    from memory.rules.slots import said_in_short_message

    loader, path = ("beam", args.beam) if args.beam else ("locomo", args.locomo)
    dataset = LOADERS[loader](path)
    wanted = set(read_split(args.split)[args.only]) if args.split else None
    embedder = embedder_from_name(args.embedder)
    server = args.database_url or resolve_database_url()
    url = ensure_database(server, dataset_database(dataset, embedder.name))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    with open_stores(url, embedder) as stores:
        arm = make_arm("beads", stores, budgets=[args.budget], options=stores.facts.search_options, beads={})
        assert isinstance(arm, BeadsArm)
        for conversation in dataset.conversations:
            if wanted is not None and conversation.id not in wanted:
                continue
            view = ConversationView(conversation)
            for question in conversation.questions:
                call = arm.plan(asked_at(view, question, "end"), question, args.budget)
                hits = call.result.hits if call.result is not None else ()
                by_id = {h.fact.short_id: h for h in hits}
                for older in hits:
                    for flag in older.flags:
                        later = flag.newer if isinstance(flag, PossiblyOutdated) else None
                        later = flag.later if isinstance(flag, SaidBefore) else later
                        newer = by_id.get(later) if later else None
                        if newer is None or not (
                            says_one_thing(older.fact.body) and says_one_thing(newer.fact.body)
                        ):
                            continue
                        key = (str(older.fact.id), str(newer.fact.id))
                        if key not in found:
                            found[key] = {"session": conversation.id, "older": older, "newer": newer}
        paired = [h for pair in found.values() for h in (pair["older"], pair["newer"])]
        messages = stores.facts.passages([h.fact.passage_id for h in paired if h.fact.passage_id])
        # ranking's own reading of whether a claim was said in a short message
        said_in_short = said_in_short_message(paired, lambda ids: messages)
    out = []
    for (old_id, new_id), pair in found.items():
        old_message, new_message = (
            messages.get(h.fact.passage_id, h.fact.body) for h in (pair["older"], pair["newer"])
        )
        short = said_in_short(pair["older"]) and said_in_short(pair["newer"])
        out.append(
            {
                "dataset": loader,
                "session_id": pair["session"],
                "src": new_id,
                "dst": old_id,
                "rule": f"ranking pair, {'short' if short else 'long'} messages",
                "reason": "ranking reads one slot",
                "old_body": pair["older"].fact.body,
                "new_body": pair["newer"].fact.body,
                "old_message": old_message,
                "new_message": new_message,
            }
        )
    return out


def report(args: argparse.Namespace) -> int:
    rows = [json.loads(line) for line in args.verdicts.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["verdict"] in ("right", "wrong")]
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        table[r["rule"]][0 if r["verdict"] == "right" else 1] += 1
        table[f"all ({r['dataset']})"][0 if r["verdict"] == "right" else 1] += 1
        table["all"][0 if r["verdict"] == "right" else 1] += 1
    # ranking's pairs: whether a rule is at the bar an edge is held to (what ranking does with a pair
    # is memory.rules.slots's, which draws its line where capture does: by the messages' length)
    ranking = all(r["rule"].startswith("ranking pair") for r in rows)
    does, instead = ("at the bar", "no") if ranking else ("writes edges", "proposes")
    lines = [
        f"| rule | read | right | wrong | precision | {does} (>= {MIN_RULE_PRECISION:.1f}) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for rule, (right, wrong) in sorted(table.items(), key=lambda kv: (kv[0].startswith("all"), kv[0])):
        precision = right / (right + wrong)
        writes = "–" if rule.startswith("all") else ("yes" if precision >= MIN_RULE_PRECISION else instead)
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
    p = sub.add_parser(
        "pairs", help="print a sample of the pairs ranking reads as one slot in the harness's blocks"
    )
    p.add_argument("--beam", type=Path, help="a BEAM tier's folder (the harness ingested it)")
    p.add_argument("--locomo", type=Path, help="a LoCoMo JSON file (the harness ingested it)")
    p.add_argument("--split", type=Path, help="the harness's split file")
    p.add_argument("--only", default="tune", help="the split whose conversations are read (default: tune)")
    p.add_argument("--budget", type=int, default=1200, help="the block's budget in tokens (default: 1200)")
    p.add_argument(
        "--embedder", default="minilm", help="the embedder the harness ingested with (default: minilm)"
    )
    p.add_argument("--per-rule", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--database-url", help="the server the harness ingested into (default: its own)")
    r = sub.add_parser("report", help="precision per rule from the verdicts")
    r.add_argument("--verdicts", type=Path, default=OUT / "verdicts.jsonl")
    args = parser.parse_args(argv)
    if args.command == "pairs" and not (args.beam or args.locomo):
        parser.error("pairs reads a dataset the harness ingested: name --beam or --locomo")
    return report(args) if args.command == "report" else sample(args)


if __name__ == "__main__":
    sys.exit(main())
