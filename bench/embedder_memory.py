"""What the offline embedder holds and how fast it runs, by batch size and onnxruntime's memory pattern.

    python -m bench.embedder_memory --chat DATA/beam/500K/2/chat.json [--texts 96] [--rounds 3] \
        [--settings 32:pattern 16:no-pattern 8:no-pattern] [--out results/embedders/memory.json]

Each setting (`batch size:pattern`, `batch size:no-pattern`, or `default`: as the library builds it)
embeds the same texts, the first messages of a chat `beads-memory import` reads (a BEAM chat's turns
are long: most run past the 256 tokens MiniLM reads), in a process of its own, so that its peak
resident memory (VmHWM) is its own and not what ran before. Settings
alternate round by round (A B C, then C B A) so that a shared machine's load lands on each. Printed:
per setting, the median over rounds of the seconds it took and of how far the process grew past the
loaded model; and whether every setting gave the very vectors the first one did (padding is per
batch and pooling masks it, so the batch should not change a vector).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.process_memory import status_bytes

# `default`: the embedder as the library builds it, nothing changed (what tests/test_embedders.py bounds)
DEFAULT = "default"


def parse_setting(text: str) -> tuple[int, bool]:
    """`32:pattern` -> (32, True); `16:no-pattern` -> (16, False)."""
    batch, _, pattern = text.partition(":")
    if not batch.isdigit() or int(batch) < 1 or pattern not in ("pattern", "no-pattern"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected BATCH:pattern or BATCH:no-pattern")
    return int(batch), pattern == "pattern"


def one(texts: list[str], setting: str) -> dict[str, Any]:
    """Embed `texts` with `setting` in this process: the seconds, how far its peak grew past the loaded
    model, and the vectors' digest. Run once per process (`--one`): the peak holds whatever ran before."""
    import numpy as np

    from memory.embedders import MiniLMEmbedder

    if setting == DEFAULT:
        embedder = MiniLMEmbedder()
    else:
        import onnxruntime as ort

        batch, pattern = parse_setting(setting)
        make = ort.InferenceSession

        def session(path: Any, options: Any, **kwargs: Any) -> Any:
            options.enable_mem_pattern = pattern
            return make(path, options, **kwargs)

        ort.InferenceSession = session
        embedder = MiniLMEmbedder(batch_size=batch)
    embedder.embed(["loaded"])
    before = status_bytes("VmHWM")
    started = time.perf_counter()
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "growth_mb": (status_bytes("VmHWM") - before) / 2**20,
        "vectors": hashlib.sha256(vectors.tobytes()).hexdigest(),
    }


def measure(texts: list[str], setting: str) -> dict[str, Any]:
    """One setting's run, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.embedder_memory", "--one", setting],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def compare(texts: list[str], settings: list[str], rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Every setting's runs, alternating the order round by round."""
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
    for n in range(rounds):
        for setting in settings if n % 2 == 0 else list(reversed(settings)):
            runs[setting].append(measure(texts, setting))
    return runs


def chat_texts(path: Path, count: int) -> list[str]:
    """The first `count` messages of the chat at `path`, as `beads-memory import` reads it."""
    from memory.doors.transcripts import read_transcripts

    messages = [m for chat in read_transcripts(path, "auto", "bench").values() for m in chat]
    return [m.text for m in messages if m.text.strip()][:count]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chat", type=Path, help="a chat file (DATA/beam/500K/2/chat.json)")
    parser.add_argument("--texts", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=["32:pattern", "16:no-pattern", "8:no-pattern"])
    parser.add_argument("--out", type=Path, default=Path("results/embedders/memory.json"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a setting, the texts on stdin: one run
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(json.load(sys.stdin), args.one)))
        return
    if args.chat is None:
        parser.error("--chat is required")
    for setting in args.settings:
        if setting != DEFAULT:
            parse_setting(setting)
    texts = chat_texts(args.chat, args.texts)
    runs = compare(texts, args.settings, args.rounds)
    first = runs[args.settings[0]][0]["vectors"]
    summary = {
        setting: {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "growth_mb": statistics.median(r["growth_mb"] for r in rs),
            "same_vectors": all(r["vectors"] == first for r in rs),
        }
        for setting, rs in runs.items()
    }
    for setting, figures in summary.items():
        print(
            f"{setting:>14}: {figures['seconds']:.1f} s for {len(texts)} texts, grew {figures['growth_mb']:.0f} MB,"
            f" vectors {'the same' if figures['same_vectors'] else 'DIFFERENT'}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "chat": "/".join(args.chat.parts[-3:]),
                "texts": len(texts),
                "rounds": args.rounds,
                "summary": summary,
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
