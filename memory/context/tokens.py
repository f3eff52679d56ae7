"""One token count for the whole project: the bundled all-MiniLM-L6-v2 WordPiece tokenizer.

It needs no download (tiktoken would) and is deterministic. It is not any chat model's own tokenizer,
so counts compare sizes fairly (injected blocks, budgets, lanes) rather than predict a model's bill.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from memory.embedders.minilm import TOKENIZER_PATH
from memory.rules import clean_text

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    # the published file pads and truncates to 128; a count must see the whole text
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def encodable(text: str) -> str:
    """`text` as the tokenizer takes it: a lone surrogate (not valid UTF-8) counted as U+FFFD, where
    the tokenizer would raise a TypeError and fail the model call that counts it."""
    return clean_text.without_surrogates(text)


def count_tokens(text: str) -> int:
    """How many tokens `text` costs."""
    return len(_tokenizer().encode(encodable(text), add_special_tokens=False).ids)


def count_many(texts: Sequence[str]) -> list[int]:
    """`count_tokens` of each text, in one batch."""
    return [
        len(e.ids) for e in _tokenizer().encode_batch([encodable(t) for t in texts], add_special_tokens=False)
    ]


# Counts remembered per text: a thread's history is counted again on every model call, and the
# harness counts the same lines at every budget. Bounded: cleared when it grows past this many.
_COUNTS: dict[str, int] = {}
_COUNTS_MAX = 16_384


def count_cached(texts: Sequence[str]) -> list[int]:
    """`count_tokens` of each text, the ones not seen before counted in one batch."""
    counts = {t: n for t in texts if (n := _COUNTS.get(t)) is not None}
    missing = [t for t in dict.fromkeys(texts) if t not in counts]
    if missing:
        counted = dict(zip(missing, count_many(missing), strict=True))
        counts.update(counted)
        if len(_COUNTS) + len(counted) > _COUNTS_MAX:
            _COUNTS.clear()
        _COUNTS.update(counted)
    return [counts[t] for t in texts]
