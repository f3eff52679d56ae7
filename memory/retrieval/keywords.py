"""The query's words for the keyword side, and the words a session has made too common to rank by.

The words are sent one by one to the candidate statement (memory.retrieval.statement), which counts
how many of the session's claims each is found in and returns the ones found too often; those are
remembered a while and left out of the session's next searches.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import DictRow

from memory.retrieval.options import SearchOptions

# The english configuration's stop words (its english.stop, Snowball's list): they are never
# lexemes, so they are not sent; one missed here is read as no lexeme and left out all the same.
_ENGLISH_STOP = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she "
    "her hers herself it its itself they them their theirs themselves what which who whom this that "
    "these those am is are was were be been being have has had having do does did doing a an the and "
    "but if or because as until while of at by for with about against between into through during "
    "before after above below to from up down in out on off over under again further then once here "
    "there when where why how all any both each few more most other some such no nor not only own "
    "same so than too very s t can will just don should now"
)
ENGLISH_STOP_WORDS = frozenset(_ENGLISH_STOP.split())
MAX_KEYWORD_WORDS = 16  # a longer query sends its first 16 content words
_PUNCTUATION = "\"'`.,;:!?()[]{}<>*&|^~@#$%\\/+=-_"


def keyword_words(query: str) -> list[str]:
    """The query's distinct words that may be content words, in order, at most MAX_KEYWORD_WORDS:
    split on whitespace, lowercased, punctuation trimmed from their ends, stop words out."""
    words = (w.strip(_PUNCTUATION) for w in query.lower().split())
    content = [w for w in dict.fromkeys(words) if w and w not in ENGLISH_STOP_WORDS]
    return content[:MAX_KEYWORD_WORDS]


# Words found common in a session (SearchOptions.keyword_common), remembered a while so that searches
# need not count them again: counting a common word reads the table until enough rows match (a few
# hundred rows), a rare one is a short GIN lookup. A session's words only grow more common as it
# grows; one that forgetting made rare again counts as common until it expires.
COMMON_WORDS_TTL_S = 600.0
_COMMON_WORDS_MAX = 100_000
# (server, database, session, threshold, word) -> when the verdict expires (time.monotonic)
_common_words: dict[tuple[Any, ...], float] = {}


def _common_key(
    conn: psycopg.Connection[DictRow], session_id: str, options: SearchOptions
) -> tuple[Any, ...]:
    info = conn.info
    return (info.host, info.port, info.dbname, session_id, options.keyword_common)


def known_common_words(
    conn: psycopg.Connection[DictRow], session_id: str, query: str, options: SearchOptions
) -> frozenset[str]:
    """The query's words that a recent search of this session found common."""
    if not options.keyword:
        return frozenset()
    key, now = _common_key(conn, session_id, options), time.monotonic()
    return frozenset(w for w in keyword_words(query) if _common_words.get((*key, w), 0.0) > now)


def remember_common_words(
    conn: psycopg.Connection[DictRow],
    session_id: str,
    options: SearchOptions,
    params: dict[str, Any],
    rows: Sequence[dict[str, Any]],
) -> None:
    """Note the words the candidate statement found common (every row carries the same list)."""
    if not rows or not rows[0].get("common_words"):
        return
    if len(_common_words) >= _COMMON_WORDS_MAX:
        _common_words.clear()
    key, expires = _common_key(conn, session_id, options), time.monotonic() + COMMON_WORDS_TTL_S
    for i in rows[0]["common_words"]:
        _common_words[(*key, params[f"w{i}"])] = expires
