"""New chats as a user types them: state a fact, talk of other things, change it (or say something
that only looks like a change), then ask. Both lanes of the real app answer, on the model a new user
gets (the offline default when no Ollama answers), with tools, the research sub-agent and web search
(unavailable here, as it is for a user offline) all on.

    uv run --extra dev python -m bench.chats --chats bench/data/chats_tune.jsonl --out results/chats/tune

A chat file holds one JSON object per line: `id`, `kind` ("update", "lookalike" or "instruction": a
standing instruction given, then a question it applies to), `messages` (the user's, the last a
question), `expect` (strings any of which in an answer means it used the value that holds, or
followed the instruction), `wrong` (the value that does not: the old one of an update, the
look-alike's, what an answer that ignores the instruction says), and
`cue`, `old_said_twice`, `topic`, `note` for the tables. Every message goes to the app as a user
sends it, each on a new LangGraph thread in each lane. Each chat is its own session.

Scored without a judge, from the last turn:
- each lane's reply: current (names an `expect` string and no `wrong` one), stale (the reverse),
  both, neither, or no answer (memory.rules.conclusions.why_no_answer: a tool call as text, a failure
  notice, the question said back, a reply about the lane's tools; or a reply the lane itself
  withheld as no answer);
- our lane's block, as the model read it in its last call: the first line on the topic (one naming
  either value) names the current value; a line states the wrong value as a plain line (not folded
  in as "earlier", not marked older), which a reader takes as current.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import psycopg
from psycopg.rows import dict_row

from bench.reliability.client import new_chat, send
from bench.reliability.servers import OwnPostgres, app_process, create_database, drop_database
from memory.rules.conclusions import why_no_answer
from playground.comparison.lanes import LANE_TOOL_NAMES

# the new user's app: its own defaults, with the model it picks when Ollama is absent
NEW_USER = {"embedder": "minilm", "model": "offline", "web_search": True, "research": True}
#: the --model names of earlier runs, as model specs
_MODEL_ALIASES = {"local": "offline", "local-1.5b": "offline:qwen2.5-coder-1.5b"}
TURN_TIMEOUT_SECONDS = 1_200.0

Reading = Literal["current", "stale", "both", "neither", "no_answer"]
_OLDER_MARK = "(an older line"  # memory.context.block's tag for a line a later one on its slot disagrees with
# where the older values folded into a line began, in blocks recorded before the block stopped
# showing their words (the committed rows of results/chats hold such blocks)
_EARLIER = " | earlier ("


KINDS = ("update", "lookalike", "instruction")


@dataclass(frozen=True, slots=True)
class Chat:
    id: str
    kind: str
    messages: tuple[str, ...]
    expect: tuple[str, ...]
    wrong: tuple[str, ...]
    cue: bool | None = None
    old_said_twice: bool | None = None
    topic: str = ""

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Chat:
        if row.get("kind") not in KINDS:
            raise ValueError(f"chat {row.get('id')!r}: kind must be one of {', '.join(KINDS)}")
        if len(row.get("messages") or []) < 2 or not row.get("expect") or not row.get("wrong"):
            raise ValueError(f"chat {row.get('id')!r}: needs two messages or more, `expect` and `wrong`")
        return cls(
            id=str(row["id"]),
            kind=row["kind"],
            messages=tuple(row["messages"]),
            expect=tuple(row["expect"]),
            wrong=tuple(row["wrong"]),
            cue=row.get("cue"),
            old_said_twice=row.get("old_said_twice"),
            topic=row.get("topic", ""),
        )


def load_chats(path: Path) -> list[Chat]:
    return [Chat.from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _pattern(values: Iterable[str]) -> re.Pattern[str]:
    # a value matches as a whole word or number: "14" must not match inside "140" or "2014", but a
    # number may carry its unit ("9:30am", "50mg") and a word its plural or ordinal ("Thursdays")
    parts = []
    for value in sorted({v.strip() for v in values if v.strip()}, key=len, reverse=True):
        tail = r"(?![\d.,]\d)(?!\d)" if value[-1].isdigit() else r"(?:s|st|nd|rd|th)?(?!\w)"
        parts.append(re.escape(value) + tail)
    return re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")", re.IGNORECASE)


def names(text: str, values: Sequence[str]) -> bool:
    return bool(_pattern(values).search(text))


def read_reply(reply: str, chat: Chat) -> Reading:
    if why_no_answer(reply, asked=chat.messages[-1], tool_names=LANE_TOOL_NAMES) is not None:
        return "no_answer"
    current, wrong = names(reply, chat.expect), names(reply, chat.wrong)
    if current and wrong:
        return "both"
    if current:
        return "current"
    return "stale" if wrong else "neither"


def read_block(block: str, chat: Chat) -> dict[str, Any]:
    """What the block shows of the two values, read as a small model reads it: a line's own text
    (before any folded "earlier" values) is a statement unless it is marked older."""
    lines = [line for line in block.splitlines() if line.startswith("- ")]
    first: str | None = None
    plain_wrong = 0
    for line in lines:
        own = line.split(_EARLIER, 1)[0]
        current, wrong = names(own, chat.expect), names(own, chat.wrong)
        if first is None and (current or wrong):
            first = "current" if current and not wrong else ("both" if current else "wrong")
        if wrong and not current and _OLDER_MARK not in own:
            plain_wrong += 1
    return {
        "lines": len(lines),
        "first_topical": first,
        "current_shown": any(names(line.split(_EARLIER, 1)[0], chat.expect) for line in lines),
        "wrong_as_plain_lines": plain_wrong,
    }


# -- driving the app --------------------------------------------------------------------------------


_TURN = "SELECT status FROM playground.turn_worker WHERE id = %s"
_REPLIES = "SELECT author, body FROM playground.messages WHERE turn_id = %s AND author <> 'user'"
_EVENTS = """
SELECT lane, kind, payload FROM playground.events
 WHERE turn_id = %s AND lane <> 'turn' AND kind IN ('injection', 'tool_call', 'usage', 'error', 'done')
 ORDER BY seq
"""


def wait_done(db: psycopg.Connection[dict[str, Any]], turn_id: str, timeout: float) -> float:
    started = time.monotonic()
    while True:
        row = db.execute(_TURN, (turn_id,)).fetchone()
        if row and row["status"] == "done":
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"turn {turn_id} did not finish within {timeout:.0f} s")
        time.sleep(0.5)


def last_block(events: Sequence[dict[str, Any]]) -> str:
    """The block of our lane's last model call of the main agent (a sub-agent's calls are its own)."""
    ours = [e["payload"] for e in events if e["lane"] == "beads" and e["kind"] == "injection"]
    if not ours:
        return ""
    main_agent = ours[0].get("agent_id")  # the main agent makes the turn's first call
    return [p.get("block") or "" for p in ours if p.get("agent_id") == main_agent][-1]


def run_chat(base: str, db_url: str, chat: Chat) -> dict[str, Any]:
    seconds: list[float] = []
    with (
        httpx.Client(timeout=30) as client,
        psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as db,
    ):
        chat_id = new_chat(client, base)
        turn_id = ""
        for text in chat.messages:
            turn_id = send(client, base, chat_id, text)
            seconds.append(round(wait_done(db, turn_id, TURN_TIMEOUT_SECONDS), 1))
        replies = {r["author"]: r["body"] for r in db.execute(_REPLIES, (turn_id,)).fetchall()}
        events = db.execute(_EVENTS, (turn_id,)).fetchall()
    block = last_block(events)
    tools = {
        lane: [e["payload"].get("name") for e in events if e["lane"] == lane and e["kind"] == "tool_call"]
        for lane in ("stock", "beads")
    }
    return {
        "id": chat.id,
        "kind": chat.kind,
        "cue": chat.cue,
        "old_said_twice": chat.old_said_twice,
        "reading": {lane: read_reply(replies.get(lane, ""), chat) for lane in ("stock", "beads")},
        "block": read_block(block, chat),
        "replies": replies,
        "block_text": block,
        "tool_calls": tools,
        "errors": [e["payload"] for e in events if e["kind"] == "error"],
        # a reply the lane withheld as no answer: why, and what the model wrote
        "withheld": {
            e["lane"]: {"why": e["payload"]["no_answer"], "raw": e["payload"].get("raw", "")}
            for e in events
            if e["kind"] == "done" and e["payload"].get("no_answer")
        },
        "seconds_per_message": seconds,
    }


# -- the report ------------------------------------------------------------------------------------


def _share(rows: Sequence[dict[str, Any]], test: Any) -> str:
    return f"{sum(1 for r in rows if test(r))}/{len(rows)}" if rows else "–"


def summary(rows: Sequence[dict[str, Any]], title: str, command: str) -> str:
    updates = [r for r in rows if r["kind"] == "update"]
    looks = [r for r in rows if r["kind"] == "lookalike"]
    instructions = [r for r in rows if r["kind"] == "instruction"]
    lines = [
        f"# {title}",
        "",
        f"`{command}`",
        "",
        "Last reply of each lane (updates: the value that holds now; look-alikes: the original fact, which "
        "still holds; instructions: the standing instruction followed):",
        "",
        "| chats | lane | current | stale / look-alike's value | both | neither | no answer |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    # instructions only where the file has some: earlier runs' summaries read as they did
    groups = [("updates", updates), ("look-alikes", looks)]
    if instructions:
        groups.append(("instructions", instructions))
    for label, group in (*groups, ("all", list(rows))):
        for lane in ("beads", "stock"):
            cells = [
                _share(group, lambda r, v=v, lane=lane: r["reading"][lane] == v)
                for v in ("current", "stale", "both", "neither", "no_answer")
            ]
            lines.append(
                f"| {label} | {'ours' if lane == 'beads' else 'stock'} | " + " | ".join(cells) + " |"
            )
    lines += [
        "",
        "Our block in the last call:",
        "",
        "| chats | first line on the topic is the current value | the wrong value as a plain line |",
        "|---|---:|---:|",
    ]
    for label, group in (("updates", updates), ("look-alikes", looks)):
        lines.append(
            f"| {label} | {_share(group, lambda r: r['block']['first_topical'] == 'current')} | "
            f"{_share(group, lambda r: r['block']['wrong_as_plain_lines'] > 0)} |"
        )
    no_cue = [r for r in updates if r.get("cue") is False]
    twice = [r for r in updates if r.get("old_said_twice")]
    lines += [
        "",
        f"Updates without a cue word: ours current {_share(no_cue, lambda r: r['reading']['beads'] == 'current')}, "
        f"stock {_share(no_cue, lambda r: r['reading']['stock'] == 'current')}. "
        f"Old value said twice: ours current {_share(twice, lambda r: r['reading']['beads'] == 'current')}, "
        f"stock {_share(twice, lambda r: r['reading']['stock'] == 'current')}.",
        "",
        "| chat | kind | ours | stock | block: first topical / wrong plain | our reply | stock reply | s per message |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [
            r["id"],
            r["kind"] + ("" if r.get("cue") is not False else ", no cue"),
            r["reading"]["beads"],
            r["reading"]["stock"],
            f"{r['block']['first_topical'] or '–'} / {r['block']['wrong_as_plain_lines']}",
            " ".join(r["replies"].get("beads", "").split())[:140],
            " ".join(r["replies"].get("stock", "").split())[:140],
            " / ".join(f"{s:.0f}" for s in r["seconds_per_message"]),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def answers_in_summary(summary_md: str, chats: Sequence[Chat]) -> dict[str, tuple[int, int]]:
    """Per lane, (replies that are answers by today's rule, replies) in an earlier run's summary.md,
    read from its reply columns (their first 140 characters): for runs whose rows were not kept."""
    by_id = {c.id: c for c in chats}
    counts = {"beads": [0, 0], "stock": [0, 0]}
    for line in summary_md.splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 8 or cells[0] not in by_id:
            continue
        for lane, reply in (("beads", cells[5]), ("stock", cells[6])):
            counts[lane][1] += 1
            counts[lane][0] += read_reply(reply, by_id[cells[0]]) != "no_answer"
    return {lane: (n[0], n[1]) for lane, n in counts.items()}


def pick(chats: Sequence[Chat], ids: Sequence[str]) -> list[Chat]:
    """The chats named by `ids`, in that order; an id the file does not hold is refused, not skipped."""
    by_id = {c.id: c for c in chats}
    if missing := [i for i in ids if i not in by_id]:
        raise ValueError(f"no chat with id {', '.join(missing)} in this file")
    return [by_id[i] for i in dict.fromkeys(ids)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chats", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=Path, required=True, help="a JSON Lines file of chats")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--model",
        default="local",
        help="a model spec (offline, scripted, ollama:<model>, openai:<model>, ...); local and local-1.5b "
        "name the offline models, as earlier runs did",
    )
    parser.add_argument(
        "--ids", nargs="*", help="only these chats, in this order (a run cut short keeps a chosen spread)"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild summary.md from rows.jsonl")
    parser.add_argument(
        "--answers-in",
        type=Path,
        metavar="SUMMARY_MD",
        help="print, per lane, how many of an earlier run's replies are answers by today's rule",
    )
    args = parser.parse_args(argv)
    if args.answers_in is not None:
        chosen = pick(load_chats(args.chats), args.ids) if args.ids else load_chats(args.chats)
        found = answers_in_summary(args.answers_in.read_text(), chosen)
        for lane, (answers, replies) in found.items():
            print(f"{'ours' if lane == 'beads' else 'stock'}: {answers} of {replies} replies are answers")
        return 0
    command = f"python -m bench.chats --chats {args.chats} --out {args.out}" + (
        f" --model {args.model}" if args.model != "local" else ""
    )
    spec = _MODEL_ALIASES.get(args.model, args.model)
    title = f"New chats on the {'offline default' if spec == 'offline' else spec} model"
    rows_path = args.out / "rows.jsonl"
    if args.report_only:
        rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line]
        by_id = {c.id: c for c in load_chats(args.chats)}
        for row in rows:  # read again, with the scoring as it is now
            chat = by_id[row["id"]]
            row["reading"] = {
                lane: read_reply(row["replies"].get(lane, ""), chat) for lane in ("stock", "beads")
            }
            row["block"] = read_block(row["block_text"], chat)
        (args.out / "summary.md").write_text(summary(rows, title, command))
        print(summary(rows, title, command))
        return 0
    every = load_chats(args.chats)  # the rows file keeps every chat already run, whatever --ids picks
    chats = pick(every, args.ids) if args.ids else every
    args.out.mkdir(parents=True, exist_ok=True)
    done = (
        {json.loads(line)["id"]: json.loads(line) for line in rows_path.read_text().splitlines() if line}
        if rows_path.exists()
        else {}
    )
    settings: dict[str, Any] = {**NEW_USER, "model": spec}
    own = OwnPostgres()
    db = create_database(own.url, prefix="chats")
    started = time.monotonic()
    try:
        with app_process(db, start_timeout=600, **settings) as app:
            for n, chat in enumerate(chats, 1):
                if chat.id in done:
                    continue
                print(
                    f"[{n}/{len(chats)}] {chat.id} ({chat.kind}, {len(chat.messages)} messages) ...",
                    flush=True,
                )
                row = run_chat(app.base, db, chat)
                row["model"] = args.model
                done[chat.id] = row
                rows_path.write_text("".join(json.dumps(done[c.id]) + "\n" for c in every if c.id in done))
                print(
                    f"      ours {row['reading']['beads']}, stock {row['reading']['stock']}, block first "
                    f"{row['block']['first_topical']}, {time.monotonic() - started:.0f} s so far",
                    flush=True,
                )
    finally:
        drop_database(own.url, db)
        own.close()
    rows = [done[c.id] for c in every if c.id in done]
    (args.out / "summary.md").write_text(summary(rows, title, command))
    print(summary(rows, title, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
