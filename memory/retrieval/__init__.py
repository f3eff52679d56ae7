"""Ranked retrieval: what a namespace may read, resolved to current versions, scored, capped.

The pipeline, in order (every step traces to a failure the seed system measured):
  candidates  nearest claims from the HNSW index of this embedding space, within the session; with
              keyword (the default), also the claims and the passages' claims that best match any
              content word of the query (ts_rank_cd over GIN-indexed tsvectors, migration 0008)
  skip        archived and directive hits (a question resembles the query it should not answer)
  resolve     each hit to the head of its supersedes chain: matching a stale value returns the current one
  filter      head in scope (self, ancestors, or demoted descendants), not archived, not a directive,
              not already visible in the raw message window
  score       w * cos(claim, q) + (1 - w) * cos(passage, q), best hit per head, minus a penalty
              for facts of descendant namespaces
  fuse        with keyword: each head's rank by that score, by its claim's keyword rank and by its
              passage's keyword rank, summed as reciprocal ranks 1 / (rrf_k + rank): the order chosen
  select      by score, md5(body) breaking near-ties; drop a fact whose derived_from parent is already
              selected; at most `per_agent_cap` facts per sub-agent; stop at k
  floor       below the relevance floor (on that score, before fusion) the answer is "not in
              memory", not the nearest noise
  trust       same-slot claims in trust, then time, order (memory.rules.slots); then no tool result or web
              page above a claim the user stated that it shares a content word with

The modules, in the order a search uses them:
  options     SearchOptions: what a search may be asked
  keywords    the query's content words, and the words a session has made too common to rank by
  statement   the candidate statement (candidates, resolve, what ranking reads): one round trip;
              then the chosen candidates' rows, which hits are made of: a second
  hnsw        the HNSW settings the statement needs on its connection
  ranking     skip, filter, score, fuse, select and floor, on the statement's rows (pure)
  hits        the chosen rows as Hits: their flags, then the trust order; a result as of a past moment
  pipeline    `search`, the whole of it on a caller's connection
Everything a caller needs is importable from here (`from memory.retrieval import SearchOptions`).
"""

from __future__ import annotations

from memory.retrieval.hits import (
    AS_OF_WIDEN,
    as_of_view,
    below_the_users_claims,
    flag_restatements,
    search_result,
)
from memory.retrieval.hnsw import HNSW_EF_SEARCH_MAX, ef_search_for, set_hnsw, set_hnsw_local
from memory.retrieval.keywords import (
    COMMON_WORDS_TTL_S,
    ENGLISH_STOP_WORDS,
    MAX_KEYWORD_WORDS,
    keyword_words,
    known_common_words,
    remember_common_words,
)
from memory.retrieval.options import SearchOptions, candidate_count, keyword_candidate_count
from memory.retrieval.pipeline import search
from memory.retrieval.ranking import Ranked, fuse, rank, spread_messages
from memory.retrieval.statement import candidate_query

__all__ = [
    "AS_OF_WIDEN",
    "COMMON_WORDS_TTL_S",
    "ENGLISH_STOP_WORDS",
    "HNSW_EF_SEARCH_MAX",
    "MAX_KEYWORD_WORDS",
    "Ranked",
    "SearchOptions",
    "as_of_view",
    "below_the_users_claims",
    "candidate_count",
    "candidate_query",
    "ef_search_for",
    "flag_restatements",
    "fuse",
    "keyword_candidate_count",
    "keyword_words",
    "known_common_words",
    "rank",
    "remember_common_words",
    "search",
    "search_result",
    "set_hnsw",
    "set_hnsw_local",
    "spread_messages",
]
