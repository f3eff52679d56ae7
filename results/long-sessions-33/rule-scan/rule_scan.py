"""What the correction rules say of every claim pair of the project's written chats and of the labeled
message pairs, read without the store: `judge`, `same_slot` and `restates`. Run it on two versions of
the code (a worktree each) and compare the JSON it writes:

    uv run --extra dev python results/long-sessions-33/rule-scan/rule_scan.py OUT.json
    uv run --extra dev python results/long-sessions-33/rule-scan/rule_scan.py --compare BEFORE.json AFTER.json
"""

from __future__ import annotations

import glob
import json
import sys
from collections import Counter
from pathlib import Path

from memory.rules.corrections import judge, restates, same_slot
from memory.rules.splitting import split_message

CHATS = [
    *sorted(glob.glob("bench/data/chats_*.jsonl")),
    *sorted(glob.glob("bench/eval/data/sequences_blind*.jsonl")),
    *sorted(glob.glob("results/chats/*/chat.jsonl")),
]
PAIRS = sorted(glob.glob("bench/eval/data/supersession_pairs*.jsonl"))


def claims(text: str) -> list[str]:
    return [c.text for c in split_message(text)]


def scan() -> dict[str, dict[str, list[object]]]:
    chat_pairs: dict[str, list[object]] = {}
    for path in CHATS:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            said = [c for m in json.loads(line)["messages"] for c in claims(m)]
            for i, old in enumerate(said):
                for new in said[i + 1 :]:
                    verdict = judge(old, new)
                    chat_pairs[f"{old}\x00{new}"] = [
                        verdict.supersedes,
                        same_slot(old, new),
                        restates(old, new),
                    ]
    labeled: dict[str, list[object]] = {}
    for path in PAIRS:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            pair = json.loads(line)
            fired = any(judge(o, n).supersedes for o in claims(pair["old"]) for n in claims(pair["new"]))
            labeled[pair["id"]] = [pair["label"], fired]
    return {"chat_pairs": chat_pairs, "labeled": labeled}


def compare(before_path: str, after_path: str) -> None:
    before, after = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (before_path, after_path))
    for name, rows in (("labeled", after["labeled"]), ("chat_pairs", after["chat_pairs"])):
        changed = [k for k in rows if k in before[name] and before[name][k] != rows[k]]
        print(f"{name}: {len(rows)} pairs, {len(changed)} changed")
        if name == "labeled":
            for side, data in (("before", before), ("after", after)):
                counts = Counter(
                    f"{label} -> {'supersede' if fired else 'keep_both'}"
                    for label, fired in data[name].values()
                )
                print(f"  {side}: {dict(sorted(counts.items()))}")
        for key in changed:  # ids for the labeled pairs; the written chats' own words for the chat pairs
            shown = key.replace("\x00", " | ")
            print(f"  {shown}: {before[name][key]} -> {rows[key]}")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        Path(sys.argv[1]).write_text(json.dumps(scan()), encoding="utf-8")
