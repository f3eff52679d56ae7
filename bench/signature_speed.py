"""What ranking's slot reading costs a process that has read nothing yet: each claim's signature
(memory.rules.corrections.alignment, the value kinds it states and the words that anchor them), read
once per process and cached, for the claims of whole BEAM chats as capture stores them (a user's
message cut into claims, an assistant's turn whole).

    uv run --extra dev python -m bench.signature_speed --beam $DATA/beam/1M --conversations 3

Prints how many texts, the seconds their signatures took, and a digest of the signatures: two
commits that read claims alike print the same digest. Timings on a shared machine: compare runs made
side by side.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

from bench.eval.loaders import load_beam_tiered
from memory.rules.corrections import alignment
from memory.rules.splitting import split_message


def texts_of(beam: Path, conversations: int) -> list[str]:
    """The stored texts of the first `conversations` chats: user claims, assistant turns whole."""
    texts: list[str] = []
    for conversation in list(load_beam_tiered(beam).conversations)[:conversations]:
        for turn in conversation.turns:
            if turn.role == "user":
                texts.extend(claim.text for claim in split_message(turn.text))
            else:
                texts.append(turn.text)
    return list(dict.fromkeys(texts))


def _forget() -> None:
    """Every cache of the correction rules emptied: the next reading is a fresh process's."""
    for module in list(sys.modules.values()):
        if module is not None and module.__name__.startswith("memory.rules"):
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beam", type=Path, required=True, help="a BEAM tier's folder (read in place)")
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="times the texts are read, each cold")
    args = parser.parse_args(argv)
    texts = texts_of(args.beam, args.conversations)
    seconds = []
    digest = ""
    for _ in range(args.rounds):
        _forget()
        started = time.perf_counter()
        signatures = [alignment._signature(text) for text in texts]
        seconds.append(time.perf_counter() - started)
        digest = hashlib.sha256(repr([(sorted(k), sorted(a)) for k, a in signatures]).encode()).hexdigest()
    median = sorted(seconds)[len(seconds) // 2]
    print(f"{len(texts)} texts, {sum(map(len, texts)) // len(texts)} characters on average")
    print(f"signatures: {median:.2f} s (median of {args.rounds}; {', '.join(f'{s:.2f}' for s in seconds)})")
    print(f"digest: {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
