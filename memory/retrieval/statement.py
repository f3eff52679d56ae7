"""The candidate statement: one round trip that finds a search's candidates, resolves each to the
current version of its fact and returns what ranking reads; then what the hits of the few ranking
chose are made of (`read_chosen`).

`candidate_query` builds its text from the templates here: the integers we own placed as literals,
everything else passed as parameters.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from memory.model import Fact, Namespace, fact_columns
from memory.postgres.vectors import as_vector
from memory.retrieval.keywords import MAX_KEYWORD_WORDS, keyword_words
from memory.retrieval.options import SearchOptions, candidate_count, keyword_candidate_count
from memory.rules.corrections import SHORT_MESSAGE_CHARS

# Keyword candidates (SearchOptions.keyword): the claims, and the passages, that best match the
# query's content words, ranked by ts_rank_cd over the stored tsvectors (migration 0008), each
# through its GIN index.
# - The words are OR-ed: an AND of every word of a question (plainto_tsquery or websearch_to_tsquery
#   of the whole text) almost never matches a whole claim. Each word is read by the english
#   configuration on its own (plainto_tsquery of one word: stemmed as the stored columns are, parsed
#   as they were, so "25:50" is '25' & '50'; no tsquery syntax to escape).
# - A word found in `keyword_common` claims of the session or more is left out, as a stop word of
#   this session: ts_rank_cd knows nothing of how rare a word is, so such a word ranks nothing
#   apart, and ranking everything it matches would cost a pass over much of the session
#   (docs/internals/ranking.md, "Figures behind the defaults"). Counting stops there.
# - Each word is its own subquery, its text a parameter, counted once (the counts are materialized:
#   the two aggregates over them would count each word twice). The words found common are returned,
#   and searches of the session leave them out for a while.
# - The words are sent in WORD_SLOTS places, the places past the query's words NULL (counted as 0,
#   never read): one statement for every query of up to that many words rather than one per number
#   of words. A prepared statement is planned anew for each of its first five runs (custom plans,
#   2 ms each at a 1M-token session) before Postgres settles on its generic plan; with a statement
#   per number of words, a connection's first few hundred searches were still planning
#   (docs/measured/benchmarks.md).
# - Claims are restricted to the session and to what this namespace may read, as on the vector side,
#   and directives and archived facts, which ranking would drop, take no place; a passage's claims
#   join below, with the same filters. No word left: a NULL tsquery, which matches nothing.
_WORD = """({i}, plainto_tsquery('english', {w}),
             CASE WHEN {w}::text IS NULL THEN 0
                  ELSE (SELECT count(*) FROM (SELECT FROM beads.facts f
                                               WHERE f.body_tsv @@ plainto_tsquery('english', {w})
                                                 AND f.session_id = %(session)s
                                               LIMIT {common}) AS found) END)"""
# how many places the query's words are sent in: the smallest that holds them
WORD_SLOTS = (2, 4, 8, MAX_KEYWORD_WORDS)
_WORD_HITS = """word_counts AS MATERIALIZED (
    SELECT * FROM (VALUES {words}) AS word (i, q, found)
),
words AS (
    SELECT (string_agg(DISTINCT word.q::text, ' | ')
              FILTER (WHERE word.found < {common} AND numnode(word.q) > 0))::tsquery AS q,
           array_agg(word.i) FILTER (WHERE word.found >= {common}) AS common  -- remembered a while
      FROM word_counts AS word
),
claim_words AS (
    SELECT f.id, ts_rank_cd(f.body_tsv, (SELECT q FROM words)) AS rank
      FROM beads.facts f
     WHERE f.body_tsv @@ (SELECT q FROM words) AND f.session_id = %(session)s
       AND f.namespace_id IN (SELECT id FROM scope)
       AND {recallable}
     ORDER BY rank DESC, f.id  -- ties (one word matched, one rank) by id, not by where rows lie
     LIMIT {kn}
),
passage_words AS (
    SELECT p.id, ts_rank_cd(p.body_tsv, (SELECT q FROM words)) AS rank
      FROM beads.passages p
     WHERE p.body_tsv @@ (SELECT q FROM words) AND p.session_id = %(session)s
     ORDER BY rank DESC, p.id
     LIMIT {kn}
),"""
# A claim a search may return, as ranking's skip step reads it (memory.retrieval.ranking): not
# archived, and not a directive unless directives are asked for or it carries a value.
_RECALLABLE = """f.status <> 'archived'
            AND (%(directives)s OR f.kind <> 'directive'
                 OR (%(valued)s AND f.body ~ '[0-9]' AND f.source = 'passive_capture'))"""

# A session this share of all claims or more finds its nearest claims by walking the HNSW index
# (claim_hits). pgvector's iterative scan gives up after hnsw.max_scan_tuples (20,000) tuples, so a
# walk over a table where the session is 2% of the claims meets about 400 of them, more than the 32
# it needs; below that, its claims are read instead.
WALK_SHARE = 0.02

# Keyword search off, or a query without a content word: as with the passage scan, left out rather
# than switched off by a parameter.
_NO_WORD_HITS = """claim_words AS (SELECT NULL::uuid AS id, NULL::float4 AS rank WHERE false),
passage_words AS (SELECT NULL::uuid AS id, NULL::float4 AS rank WHERE false),"""


# The candidate statement. {dims} and {eid} are integers we own, placed as literals so that the planner
# matches the partial expression index of this embedding space. passage_hits is empty: the nearest
# passages are not scanned (that second nearest-neighbour scan took half of a search's time and was
# removed, docs/measured/benchmarks.md); a candidate's passage is read by primary key instead. The empty CTE
# stays until a latency run times the statement without it (results/latency/ has the runs of this shape).
_CANDIDATES = """
WITH scope AS (
    -- what this namespace may read: its lineage (self and ancestors) and its subtree (demoted)
    SELECT id, NOT (id = ANY(%(lineage)s::uuid[])) AS demoted
      FROM beads.namespaces
     WHERE session_id = %(session)s
       AND (id = ANY(%(lineage)s::uuid[]) OR lineage @> ARRAY[%(ns)s]::uuid[])
),
walk AS (
    -- the session's share of all claims, as ANALYZE last counted it (a session it has not seen, or
    -- too rare to be among the most common values, has none)
    SELECT coalesce((SELECT s.most_common_freqs[array_position(s.most_common_vals::text::text[], %(session)s::text)]
                       FROM pg_stats s
                      WHERE s.schemaname = 'beads' AND s.tablename = 'facts' AND s.attname = 'session_id'),
                    0) >= {walk_share} AS large
),
-- Each side: the nearest indexed vectors through HNSW, plus the few written since the background
-- indexer last ran (migration 0006), compared exactly. Similarities are computed here, on rows the
-- scans already hold (vectors are stored inline, migration 0005); below, only the side a candidate
-- was not found by (its passage, without passage_scan) is read, by primary key.
-- As on the keyword side, directives and archived facts, which ranking drops, take no place: the
-- nearest claims to a question are the same question asked before, and in a long session those
-- copies filled every place, leaving blocks of one fact or none (the 1M growth run).
-- The indexed side is read one of two ways, chosen by the session's share of all claims as the
-- planner's statistics give it (`walk`):
-- - a large share (WALK_SHARE or more): through the HNSW index, each vector's fact read by primary
--   key (a LATERAL read of at most one row), which leaves the planner no other plan. Joined plainly,
--   once the session was a quarter of the table it read all the session's claims and compared every
--   vector by hand instead (6 ms of a 17 ms search on a 500K chat, 0.6 ms through the index;
--   results/long-sessions-24);
-- - otherwise joined plainly, as the planner sees fit: for a small session among many, reading its
--   claims is right, and a walk would pass thousands of other sessions' claims to find its few
--   (pgvector stops an iterative scan after hnsw.max_scan_tuples, with fewer than asked for).
-- Only one side runs: the other's condition is false before it starts.
claim_hits AS (
    SELECT id, sim FROM (
        (SELECT v.fact_id AS id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims})) AS sim
           FROM beads.fact_vectors v
           CROSS JOIN LATERAL (
                 SELECT 1 FROM beads.facts f
                  WHERE f.id = v.fact_id AND f.session_id = %(session)s
                    AND f.namespace_id IN (SELECT id FROM scope)
                    AND {recallable}
                  LIMIT 1) f
          WHERE v.embedder_id = {eid} AND v.indexed AND (SELECT large FROM walk)
          ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
          LIMIT {n})
        UNION ALL
        (SELECT v.fact_id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims}))
           FROM beads.fact_vectors v
           JOIN beads.facts f ON f.id = v.fact_id
          WHERE v.embedder_id = {eid} AND v.indexed AND f.session_id = %(session)s
            AND f.namespace_id IN (SELECT id FROM scope)
            AND {recallable}
            AND NOT (SELECT large FROM walk)
          ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
          LIMIT {n})
        UNION ALL
        (SELECT v.fact_id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims}))
           FROM beads.fact_vectors v
           JOIN beads.facts f ON f.id = v.fact_id
          WHERE v.embedder_id = {eid} AND NOT v.indexed AND f.session_id = %(session)s
            AND f.namespace_id IN (SELECT id FROM scope)
            AND {recallable})
    ) nearest
    -- equal similarities (one text said twice) go by id, as keyword ranks do, not by the order rows
    -- were read in. The scans' own LIMITs stay on distance alone, the order the HNSW index returns.
    ORDER BY sim DESC, id
    LIMIT {n}
),
passage_hits AS (
    SELECT NULL::uuid AS id, NULL::float8 AS sim WHERE false
),
{word_hits}
hit_ids AS (
    SELECT id FROM claim_hits
    UNION
    SELECT f.id FROM beads.facts f JOIN passage_hits ph ON ph.id = f.passage_id
    UNION
    SELECT id FROM claim_words
    UNION
    SELECT f.id FROM beads.facts f JOIN passage_words pw ON pw.id = f.passage_id
     WHERE f.namespace_id IN (SELECT id FROM scope)
       AND {recallable}
)
-- what ranking reads of each candidate, and no more: the rest of a head's row, the hit's where it was
-- resolved, and the edges a hit is flagged by are read for the chosen few (read_chosen). Returned for every
-- candidate (a hundred or more when keyword search adds a long message's claims), they were most of a
-- search's time at a 1M-token session: decoding them, and computing them for rows ranking drops.
SELECT hit.id AS hit_id, hit.kind AS hit_kind, hit.status AS hit_status, hit.head_id, hit.valued AS hit_valued,
       head.kind AS head_kind, head.status AS head_status, head.agent_id AS head_agent_id,
       head.source = 'fallback_conclude' AS head_failed_delegation,
       head.message_id AS head_message_id, md5(head.body) AS head_md5,
       head.kind = 'directive' AND head.body ~ '[0-9]' AND head.source = 'passive_capture' AS head_valued,  -- read for directives only
       -- the speaker a query may name (ranking's speaker boost): a string, or NULL
       CASE WHEN jsonb_typeof(head.metadata->'speaker') = 'string' THEN head.metadata->>'speaker' END
           AS head_speaker,
       hs.id IS NOT NULL AS head_in_scope,
       coalesce(hs.demoted, false) AS head_demoted,
       -- a fact found through its passage or by keyword has no claim similarity yet, and vice versa:
       -- read the missing one (NULL claim_sim: no vector in this space, which ranking drops)
       -- (each side's CTE read by a subquery rather than joined: the planner then has four fewer
       -- relations to order, which is most of its planning when a statement is not prepared)
       coalesce((SELECT sim FROM claim_hits c WHERE c.id = hit.id),
                (SELECT 1 - (x.embedding <=> %(q)s::vector) FROM beads.fact_vectors x
                  WHERE x.fact_id = hit.id AND x.embedder_id = {eid})) AS claim_sim,
       coalesce((SELECT sim FROM passage_hits c WHERE c.id = hit.passage_id),
                (SELECT 1 - (x.embedding <=> %(q)s::vector) FROM beads.passage_vectors x
                  WHERE x.passage_id = hit.passage_id AND x.embedder_id = {eid})) AS passage_sim,
       -- NULL: not a keyword match
       (SELECT rank FROM claim_words c WHERE c.id = hit.id) AS claim_words_rank,
       (SELECT rank FROM passage_words c WHERE c.id = hit.passage_id) AS passage_words_rank,
{common_words}       hv.fact_id IS NOT NULL AS head_has_vector,
       coalesce((SELECT array_agg(e.dst) FROM beads.edges e
                  WHERE e.src = head.id AND e.relation = 'derived_from'), '{{}}') AS head_derived_from
  FROM hit_ids
  -- one primary-key read per candidate. Joined plainly, the planner, expecting a hundred candidates
  -- once keyword search adds its own, read every fact of the table instead (docs/internals/ranking.md).
  CROSS JOIN LATERAL (SELECT f.id, f.kind, f.status, f.head_id, f.passage_id,
                              f.kind = 'directive' AND f.body ~ '[0-9]' AND f.source = 'passive_capture' AS valued
                        FROM beads.facts f
                       WHERE f.id = hit_ids.id LIMIT 1) AS hit
  JOIN beads.facts head ON head.id = hit.head_id
  LEFT JOIN scope hs ON hs.id = head.namespace_id
  -- a join, not EXISTS: the planner turned EXISTS into a hash of every vector of the space
  LEFT JOIN beads.fact_vectors hv ON hv.embedder_id = {eid} AND hv.fact_id = head.id
"""

# The facts of the candidates ranking chose (each head, and each hit resolved to one), with each one's
# restates edges (the facts it restates, in id order) and the start of the message it was cut from:
# as much as tells a short message from a long one (memory.rules.corrections.short_message), never
# the whole of a pasted document. Same-slot order asks for those starts (memory.rules.slots); read
# here, they cost no round trip of their own (a third, in one search of eight at a 1M-token session).
_CHOSEN_FACTS = f"""
SELECT {fact_columns("f")},
       coalesce((SELECT array_agg(e.dst ORDER BY e.dst) FROM beads.edges e
                  WHERE e.src = f.id AND e.relation = 'restates'), '{{}}') AS restates,
       (SELECT left(p.body, {SHORT_MESSAGE_CHARS + 1}) FROM beads.passages p WHERE p.id = f.passage_id)
           AS message_start
  FROM beads.facts f
 WHERE f.id = ANY(%(ids)s::uuid[]) AND f.session_id = %(session)s
"""
# How each chosen head replaced the version that was hit, for the hits resolved to their heads: the
# edge to that very version if there is one (a head may also have retired a restatement of it), else
# the first it wrote; ordered, so that the reason quoted is the same on every search
_REPLACED = """
SELECT chosen.hit_id, replaced.automatic, replaced.reason
  FROM unnest(%(hits)s::uuid[], %(heads)s::uuid[]) AS chosen (hit_id, head_id)
 CROSS JOIN LATERAL (SELECT e.automatic, e.reason FROM beads.edges e
                      WHERE e.src = chosen.head_id AND e.relation = 'supersedes' AND e.undone_at IS NULL
                        AND e.session_id = %(session)s
                      ORDER BY e.dst = chosen.hit_id DESC, e.created_at, e.dst
                      LIMIT 1) AS replaced
"""


@dataclass(frozen=True, slots=True)
class Chosen:
    """What the hits of a search are made of, read for the candidates ranking chose."""

    facts: Mapping[uuid.UUID, Fact]  # each chosen head, and each hit resolved to one, by id
    restates: Mapping[uuid.UUID, Sequence[uuid.UUID]]  # a fact's restates edges, where it has any
    # by the id of a hit resolved to its head: the rule's reason, where capture's rules replaced it
    replaced_automatically: Mapping[uuid.UUID, str]
    # by passage id: the start of each message a chosen fact was cut from (_CHOSEN_FACTS)
    message_starts: Mapping[uuid.UUID, str]


def read_chosen(
    conn: psycopg.Connection[DictRow],
    session_id: str,
    pairs: Sequence[tuple[uuid.UUID, uuid.UUID]],
    *,
    prepare: bool = False,
) -> Chosen:
    """The facts of the chosen (hit id, head id) `pairs` of session `session_id`, the edges their
    hits are flagged by and the starts of their messages: one round trip. A fact deleted since the
    candidate statement ran is not there."""
    resolved = [(hit, head) for hit, head in pairs if hit != head]
    ids = list(dict.fromkeys([head for _, head in pairs] + [hit for hit, _ in resolved]))
    if not ids:
        return Chosen({}, {}, {}, {})
    with conn.pipeline():
        facts = conn.execute(_CHOSEN_FACTS, {"ids": ids, "session": session_id}, prepare=prepare)
        replaced = (
            conn.execute(
                _REPLACED,
                {
                    "hits": [hit for hit, _ in resolved],
                    "heads": [head for _, head in resolved],
                    "session": session_id,
                },
                prepare=prepare,
            )
            if resolved
            else None
        )
    rows = facts.fetchall()
    return Chosen(
        facts={row["id"]: Fact.from_row(row) for row in rows},
        restates={row["id"]: row["restates"] for row in rows if row["restates"]},
        replaced_automatically={
            row["hit_id"]: row["reason"]
            for row in (replaced.fetchall() if replaced else ())
            if row["automatic"]
        },
        message_starts={
            row["passage_id"]: row["message_start"] for row in rows if row["message_start"] is not None
        },
    )


def candidate_query(
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions,
    common_words: Collection[str] = (),
) -> tuple[sql.Composed, dict[str, Any]]:
    """The candidate statement and its parameters, as `search` runs them (benchmarks EXPLAIN it).
    `common_words`: query words already known to be common in the session, left out unsent."""
    # integers we own, placed as literals: the partial HNSW index is matched on {eid} and {dims}, and a
    # prepared statement's generic plan costs its LIMITs as they are
    constants = {
        "eid": sql.Literal(int(embedder_id)),
        "dims": sql.Literal(int(dims)),
        "n": sql.Literal(candidate_count(options)),
        "kn": sql.Literal(keyword_candidate_count(options)),
        "common": sql.Literal(int(options.keyword_common)),
        "walk_share": sql.Literal(WALK_SHARE),
    }
    keywords = [w for w in keyword_words(query) if w not in common_words] if options.keyword else []
    recallable = sql.SQL(_RECALLABLE)
    words = (
        sql.SQL(_WORD_HITS).format(
            words=sql.SQL(",\n            ").join(
                sql.SQL(_WORD).format(
                    i=sql.Literal(i), w=sql.Placeholder(f"w{i}"), common=constants["common"]
                )
                for i in range(_slots(len(keywords)))
            ),
            recallable=recallable,
            **constants,
        )
        if keywords
        else sql.SQL(_NO_WORD_HITS)
    )
    common_words_column = sql.SQL(
        "       (SELECT common FROM words) AS common_words,  -- for search to remember\n" if keywords else ""
    )
    statement = sql.SQL(_CANDIDATES).format(
        word_hits=words,
        common_words=common_words_column,
        recallable=recallable,
        **constants,
    )
    params: dict[str, Any] = {
        "session": ns.session_id,
        "lineage": list(ns.lineage),
        "ns": ns.id,
        "q": as_vector(query_vector),
        "directives": options.include_directives,
        "valued": options.directives_with_values,
    }
    if keywords:
        params.update({f"w{i}": None for i in range(_slots(len(keywords)))})
        params.update({f"w{i}": word for i, word in enumerate(keywords)})
    return statement, params


def _slots(words: int) -> int:
    """The places `words` content words are sent in (WORD_SLOTS)."""
    return next(n for n in WORD_SLOTS if n >= words)
