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
  trust       same-slot claims in trust, then time, order (memory.slots); then no tool result or web
              page above a claim the user stated that it shares a content word with
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow

from memory.model import UNTRUSTED_SOURCES, Fact, Hit, Kind, Namespace, SearchResult, Status
from memory.prepared import worth_preparing
from memory.slots import order_same_slot
from memory.vectors import as_vector


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How a search ranks and how much it returns (docs/ranking.md explains each step)."""

    k: int = 8
    # the rest goes to the passage the claim was carved from; more weight on the message lost LoCoMo
    # evidence on the harness's tune conversations (results/tuning/README.md)
    claim_weight: float = 0.7
    descendant_penalty: float = 0.15  # a sub-agent's fact ranks below an equally close one of the lineage
    relevance_floor: float = 0.2  # blended cosine similarity; below it nothing is "in memory"
    per_agent_cap: int = 3  # facts per sub-agent among the demoted (delegated) ones
    # nearest claims fetched before ranking (at least 4k): more changed few answers and cost time
    # (docs/ranking.md, "Figures behind the defaults")
    candidates: int = 32
    # hybrid: also the claims, and the claims of the passages, that best match any content word of the
    # query (full-text search), fused with the nearest ones by reciprocal rank. Off: vectors only, which
    # lost much of LoCoMo's evidence at small budgets (results/tuning/README.md)
    keyword: bool = True
    keyword_candidates: int = 32  # best keyword matches fetched per side (claims, passages), at least k
    # a query word in this many of the session's claims is left out: it ranks nothing apart, and
    # ranking all it matches is slow (docs/ranking.md, "Figures behind the defaults")
    keyword_common: int = 30
    # the fusion's weights: other values moved a question or two on the harness's tune conversations,
    # so these stayed (results/tuning/README.md)
    keyword_weight: float = 0.5  # a keyword ranking's share of the fused score, the similarity's being 1
    rrf_k: float = 5.0  # fused score: sum over rankings of weight / (rrf_k + place)
    # a long message cut into many claims would otherwise fill the block with itself: after this many
    # facts from one message, its further facts wait until every other candidate has had its turn
    # (None: no such limit). 2 was chosen among 1, 2 and 3 on the harness's tune conversations: it
    # gained BEAM a few points over no limit and moved nothing on LoCoMo (results/tuning/README.md)
    per_message: int | None = 2
    include_directives: bool = False
    # a directive that carries a value ("how do I fit the new quota of 1,200 calls a day?") is recalled
    # like a claim: people state facts inside their questions and requests. One without a value ("what
    # is our budget?") states nothing and stays held out. Recalling every directive found a little
    # more but showed stale values unflagged more often (results/tuning/README.md, "Capture and
    # directives")
    directives_with_values: bool = True
    exclude_message_ids: frozenset[str] = field(default_factory=frozenset)
    exclude_fact_ids: frozenset[uuid.UUID] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("k must be at least 1")
        if not 0.0 <= self.claim_weight <= 1.0:
            raise ValueError("claim_weight must be between 0 and 1")
        if self.keyword_candidates < 1 or self.keyword_common < 1:
            raise ValueError("keyword_candidates and keyword_common must be at least 1")
        if self.per_message is not None and self.per_message < 1:
            raise ValueError("per_message must be at least 1 (None: no limit)")
        if self.keyword_weight < 0 or self.rrf_k < 0:
            raise ValueError("keyword_weight and rrf_k must not be negative")
        if self.per_agent_cap < 1:
            raise ValueError("per_agent_cap must be at least 1")


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
#   (docs/ranking.md, "Figures behind the defaults"). Counting stops there.
# - Each word is its own subquery, its text a parameter the planner reads as a constant: with the
#   column's statistics it counts a common word by reading the table until `keyword_common` rows
#   match (a few hundred rows) rather than building the GIN index's bitmap of all its thousands;
#   one subquery for every word would be planned once, blind. The words found common are returned,
#   and searches of the session leave them out for a while.
# - Claims are restricted to the session and to what this namespace may read, as on the vector side,
#   and directives and archived facts, which ranking would drop, take no place; a passage's claims
#   join below, in scope only. No word left: a NULL tsquery, which matches nothing.
_WORD = """({i}, plainto_tsquery('english', {w}),
             (SELECT count(*) FROM (SELECT FROM beads.facts f
                                     WHERE f.body_tsv @@ plainto_tsquery('english', {w})
                                       AND f.session_id = %(session)s
                                     LIMIT {common}) AS found))"""
_WORD_HITS = """words AS (
    SELECT (string_agg(DISTINCT word.q::text, ' | ')
              FILTER (WHERE word.found < {common} AND numnode(word.q) > 0))::tsquery AS q,
           array_agg(word.i) FILTER (WHERE word.found >= {common}) AS common  -- remembered a while
      FROM (VALUES {words}) AS word (i, q, found)
),
claim_words AS (
    SELECT f.id, ts_rank_cd(f.body_tsv, (SELECT q FROM words)) AS rank
      FROM beads.facts f
     WHERE f.body_tsv @@ (SELECT q FROM words) AND f.session_id = %(session)s
       AND f.namespace_id IN (SELECT id FROM scope)
       AND f.status <> 'archived'
       AND (%(directives)s OR f.kind <> 'directive' OR (%(valued)s AND f.body ~ '[0-9]' AND f.source = 'passive_capture'))
     ORDER BY rank DESC
     LIMIT {kn}
),
passage_words AS (
    SELECT p.id, ts_rank_cd(p.body_tsv, (SELECT q FROM words)) AS rank
      FROM beads.passages p
     WHERE p.body_tsv @@ (SELECT q FROM words) AND p.session_id = %(session)s
     ORDER BY rank DESC
     LIMIT {kn}
),"""
# Keyword search off, or a query without a content word: as with the passage scan, left out rather
# than switched off by a parameter.
_NO_WORD_HITS = """claim_words AS (SELECT NULL::uuid AS id, NULL::float4 AS rank WHERE false),
passage_words AS (SELECT NULL::uuid AS id, NULL::float4 AS rank WHERE false),"""

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


# The candidate statement. {dims} and {eid} are integers we own, placed as literals so that the planner
# matches the partial expression index of this embedding space. passage_hits is empty: the nearest
# passages are not scanned (that second nearest-neighbour scan took half of a search's time and was
# removed, docs/benchmarks.md); a candidate's passage is read by primary key instead. The empty CTE
# stays so that the statement's text is the one bench/results/search_latency.md measured.
_CANDIDATES = """
WITH scope AS (
    -- what this namespace may read: its lineage (self and ancestors) and its subtree (demoted)
    SELECT id, NOT (id = ANY(%(lineage)s::uuid[])) AS demoted
      FROM beads.namespaces
     WHERE session_id = %(session)s
       AND (id = ANY(%(lineage)s::uuid[]) OR lineage @> ARRAY[%(ns)s]::uuid[])
),
-- Each side: the nearest indexed vectors through HNSW, plus the few written since the background
-- indexer last ran (migration 0006), compared exactly. Similarities are computed here, on rows the
-- scans already hold (vectors are stored inline, migration 0005); below, only the side a candidate
-- was not found by (its passage, without passage_scan) is read, by primary key.
claim_hits AS (
    SELECT id, sim FROM (
        (SELECT v.fact_id AS id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims})) AS sim
           FROM beads.fact_vectors v
           JOIN beads.facts f ON f.id = v.fact_id
          WHERE v.embedder_id = {eid} AND v.indexed AND f.session_id = %(session)s
            AND f.namespace_id IN (SELECT id FROM scope)
          ORDER BY v.embedding::vector({dims}) <=> %(q)s::vector({dims})
          LIMIT {n})
        UNION ALL
        (SELECT v.fact_id, 1 - (v.embedding::vector({dims}) <=> %(q)s::vector({dims}))
           FROM beads.fact_vectors v
           JOIN beads.facts f ON f.id = v.fact_id
          WHERE v.embedder_id = {eid} AND NOT v.indexed AND f.session_id = %(session)s
            AND f.namespace_id IN (SELECT id FROM scope))
    ) nearest
    ORDER BY sim DESC
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
)
-- what ranking reads, and the rest of each head's row (and of the hit's, where the hit was resolved
-- to its head), the edge that replaced the hit's version and the head's restates edges: what the
-- winners' Hits are made of, so that a search is this one round trip (rank picks from these rows)
SELECT hit.id AS hit_id, hit.kind AS hit_kind, hit.status AS hit_status, hit.head_id, hit.valued AS hit_valued,
       head.kind AS head_kind, head.status AS head_status, head.agent_id AS head_agent_id,
       head.source = 'fallback_conclude' AS head_failed_delegation,
       head.message_id AS head_message_id, md5(head.body) AS head_md5,
       head.valid_from AS head_valid_from,
       head.kind = 'directive' AND head.body ~ '[0-9]' AND head.source = 'passive_capture' AS head_valued,  -- read for directives only
       hs.id IS NOT NULL AS head_in_scope,
       coalesce(hs.demoted, false) AS head_demoted,
       -- a fact found through its passage or by keyword has no claim similarity yet, and vice versa:
       -- read the missing one (NULL claim_sim: no vector in this space, which ranking drops)
       -- (each side's CTE read by a subquery rather than joined: the planner then has four fewer
       -- relations to order, 0.6 ms of planning at 10k facts when a statement is not prepared)
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
                  WHERE e.src = head.id AND e.relation = 'derived_from'), '{{}}') AS head_derived_from,
       coalesce((SELECT array_agg(e.dst ORDER BY e.dst) FROM beads.edges e
                  WHERE e.src = head.id AND e.relation = 'restates'), '{{}}') AS head_restates,
       replaced.automatic AS head_replaced_automatically, replaced.reason AS head_replaced_because,
{head_row},
{resolved_row}
  FROM hit_ids
  -- one primary-key read per candidate. Joined plainly, the planner, expecting a hundred candidates
  -- once keyword search adds its own, read every fact of the table instead (3 ms at 10k facts).
  CROSS JOIN LATERAL (SELECT {hit_columns},
                              f.kind = 'directive' AND f.body ~ '[0-9]' AND f.source = 'passive_capture' AS valued
                        FROM beads.facts f
                       WHERE f.id = hit_ids.id LIMIT 1) AS hit
  JOIN beads.facts head ON head.id = hit.head_id
  LEFT JOIN scope hs ON hs.id = head.namespace_id
  -- a join, not EXISTS: the planner turned EXISTS into a hash of every vector of the space
  LEFT JOIN beads.fact_vectors hv ON hv.embedder_id = {eid} AND hv.fact_id = head.id
  -- how the head replaced the version that was hit (read only for a hit resolved to its head)
  LEFT JOIN LATERAL (SELECT e.automatic, e.reason FROM beads.edges e
                      WHERE hit.id <> hit.head_id AND e.src = head.id AND e.relation = 'supersedes'
                        AND e.undone_at IS NULL
                      LIMIT 1) AS replaced ON true
"""

# What Fact.from_row reads. The candidate statement returns the head's (prefixed head_) and, where the
# hit was resolved to its head, the hit's (prefixed resolved_; NULL otherwise), so that the winners'
# Facts come from the rows ranking chose from.
_FACT_FIELDS = (
    "id", "session_id", "namespace_id", "kind", "status", "source", "agent_id", "body", "head_id",
    "valid_from", "valid_to", "recorded_at", "acting_on_behalf_of", "thread_id", "message_id",
    "span_start", "span_end", "passage_id", "metadata",
)  # fmt: skip
# head_id is the head's id (the hit's head_id, joined on), so the head's own head_id is head_head_id;
# ranking already reads head_kind, head_status, head_agent_id, head_message_id and head_valid_from
_HEAD_READ = {"id", "kind", "status", "agent_id", "message_id", "valid_from"}
_HEAD_ROW = sql.SQL(",\n".join(f"       head.{c} AS head_{c}" for c in _FACT_FIELDS if c not in _HEAD_READ))
_HIT_COLUMNS = sql.SQL(", ".join(f"f.{c}" for c in _FACT_FIELDS))
_RESOLVED_ROW = sql.SQL(
    ",\n".join(
        f"       CASE WHEN hit.id <> hit.head_id THEN hit.{c} END AS resolved_{c}" for c in _FACT_FIELDS
    )
)


def _fact_of(row: dict[str, Any], prefix: str) -> Fact:
    """The Fact of a candidate row's head ("head_") or resolved hit ("resolved_")."""
    fields = {c: row[prefix + c] for c in _FACT_FIELDS if c not in ("id", "head_id")}
    if prefix == "head_":
        fields.update(id=row["head_id"], head_id=row["head_head_id"])
    else:
        fields.update(id=row[prefix + "id"], head_id=row[prefix + "head_id"])
    return Fact.from_row(fields)


HNSW_EF_SEARCH_MAX = 1000

# Connections whose session already has our HNSW settings, and the ef_search they carry. The scan
# must keep walking until enough rows pass the session/scope filter (pgvector 0.8's iterative scan).
# Set once per pooled connection instead of per search: a search is then a single statement, with no
# BEGIN, SET LOCAL or COMMIT round trips (docs/ranking.md, "Figures behind the defaults").
_CONFIGURED: weakref.WeakKeyDictionary[psycopg.Connection[DictRow], int] = weakref.WeakKeyDictionary()


def _session_settings_hold(conn: psycopg.Connection[DictRow], ef_search: int) -> bool:
    """Make sure the session carries the settings; False when it cannot (a transaction is open, whose
    rollback would undo a SET: then the caller scopes them to its transaction instead)."""
    if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    if _CONFIGURED.get(conn) != ef_search:
        set_hnsw(conn, ef_search, local=False)
        _CONFIGURED[conn] = ef_search
    return True


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
    }
    keywords = [w for w in keyword_words(query) if w not in common_words] if options.keyword else []
    words = (
        sql.SQL(_WORD_HITS).format(
            words=sql.SQL(",\n            ").join(
                sql.SQL(_WORD).format(
                    i=sql.Literal(i), w=sql.Placeholder(f"w{i}"), common=constants["common"]
                )
                for i in range(len(keywords))
            ),
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
        head_row=_HEAD_ROW,
        resolved_row=_RESOLVED_ROW,
        hit_columns=_HIT_COLUMNS,
        **constants,
    )
    params: dict[str, Any] = {
        "session": ns.session_id,
        "lineage": list(ns.lineage),
        "ns": ns.id,
        "q": as_vector(query_vector),
    }
    if keywords:
        params.update({f"w{i}": word for i, word in enumerate(keywords)})
        params.update(directives=options.include_directives, valued=options.directives_with_values)
    return statement, params


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


def candidate_count(options: SearchOptions) -> int:
    """How many nearest claims a search fetches before ranking: `candidates`, at least 4k."""
    return max(options.candidates, options.k * 4)


def keyword_candidate_count(options: SearchOptions) -> int:
    """How many best keyword matches a search fetches per side: `keyword_candidates`, at least k."""
    return max(options.keyword_candidates, options.k)


def ef_search_for(options: SearchOptions) -> int:
    # pgvector caps ef_search at 1,000; past it the iterative scan keeps walking for the rest
    return min(HNSW_EF_SEARCH_MAX, max(40, candidate_count(options)))


def set_hnsw(conn: psycopg.Connection[DictRow], ef_search: int, *, local: bool) -> None:
    """The HNSW settings a search needs: for the current transaction only (`local`), or the session."""
    conn.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', %s), set_config('hnsw.ef_search', %s, %s)",
        (local, str(ef_search), local),
    )


def set_hnsw_local(conn: psycopg.Connection[DictRow], ef_search: int) -> None:
    """The HNSW settings for the current transaction only."""
    set_hnsw(conn, ef_search, local=True)


def search(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    query: str,
    query_vector: Sequence[float],
    embedder_id: int,
    dims: int,
    options: SearchOptions = SearchOptions(),  # frozen, so a shared default is safe
) -> SearchResult:
    common = known_common_words(conn, ns.session_id, query, options)
    statement, params = candidate_query(ns, query, query_vector, embedder_id, dims, options, common)
    ef_search = ef_search_for(options)
    prepare = worth_preparing(conn)  # planned once per connection, where the plan will hold
    if _session_settings_hold(conn, ef_search):
        # one statement, one round trip, no BEGIN/COMMIT
        rows = conn.execute(statement, params, prepare=prepare).fetchall()
    else:
        # inside a caller's transaction: settings scoped to it, BEGIN and the query in one round trip
        with conn.pipeline(), conn.transaction():
            set_hnsw_local(conn, ef_search)
            rows = conn.execute(statement, params, prepare=prepare).fetchall()
    remember_common_words(conn, ns.session_id, options, params, rows)
    return search_result(query, rank(rows, options))


def search_result(query: str, ranked: Ranked) -> SearchResult:
    """The hits of `ranked`, built from the candidate rows it chose (pure: no database): flags for
    resolved, demoted, keyword and restating hits, then same-slot and trust order."""
    hits = []
    restated: dict[uuid.UUID, Sequence[uuid.UUID]] = {}
    for c in ranked.chosen:
        row = c["row"]
        head = _fact_of(row, "head_")
        resolved_from = _fact_of(row, "resolved_") if c["hit_id"] != c["head_id"] else None
        flags = []
        if resolved_from is not None:
            flags.append(f"resolved from superseded {resolved_from.short_id}")
            # how the head replaced its predecessor: said by capture's rules, or by an agent
            if row["head_replaced_automatically"]:
                flags.append(
                    f'current; replaced "{_clip(resolved_from.body)}", automatically '
                    f"({row['head_replaced_because']})"
                )
        if c["demoted"]:
            flags.append(f"demoted: sub-agent {head.agent_id}")
        if c.get("keyword"):
            flags.append("keyword match")
        if row["head_restates"]:
            restated[head.id] = row["head_restates"]
        hits.append(
            Hit(
                fact=head,
                score=c["score"],
                distance=1.0 - c["similarity"],
                claim_similarity=c["claim_sim"],
                passage_similarity=c["passage_sim"],
                demoted=c["demoted"],
                resolved_from=resolved_from,
                flags=tuple(flags),
            )
        )
    if len(hits) > 1 and restated:
        hits = flag_restatements(hits, restated)
    return SearchResult(
        hits=tuple(below_the_users_claims(order_same_slot(hits))),
        query=query,
        not_in_memory=not hits,
        best_score=ranked.best_score,
        dropped=ranked.dropped,
    )


RESTATES_FLAG = "restates"


def flag_restatements(hits: list[Hit], restated: Mapping[uuid.UUID, Sequence[uuid.UUID]]) -> list[Hit]:
    """Flag each hit that restates another hit's claim (memory.restatements) "restates <short id>":
    the block folds it into the line it restates, so an echo is never a second line. `restated`:
    each hit's restates edges (the facts it restates, in id order), as the candidate statement read
    them."""
    short = {h.fact.id: h.fact.short_id for h in hits}
    out = []
    for h in hits:
        echoes = [f"{RESTATES_FLAG} {short[dst]}" for dst in restated.get(h.fact.id, ()) if dst in short]
        out.append(replace(h, flags=(*h.flags, *echoes)) if echoes else h)
    return out


def _topic_words(text: str) -> frozenset[str]:
    """A claim's content words, crudely stemmed ("budgets" meets "budget"); numbers and values out."""
    words = (w.removesuffix("'s").removesuffix("’s") for w in keyword_words(text))
    return frozenset(
        w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w
        for w in words
        if len(w) > 2 and w.isalpha()
    )


def _users_claim(hit: Hit) -> bool:
    return hit.fact.kind is Kind.USER_INPUT and hit.fact.source not in UNTRUSTED_SOURCES


def below_the_users_claims(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` with each tool result or web page moved just below the last claim the user stated that
    it shares a content word with. Text from elsewhere may resemble the query more than the user's
    own words (a page titled with the query's topic, or written to match it); whether it states a
    competing value or states nothing, it never outranks what the user said about the same thing."""
    ordered = list(hits)
    for hit in [h for h in hits if h.fact.source in UNTRUSTED_SOURCES]:
        words = _topic_words(hit.fact.body)
        place = ordered.index(hit)
        last = max(
            (
                j
                for j, other in enumerate(ordered)
                if j > place and _users_claim(other) and not words.isdisjoint(_topic_words(other.fact.body))
            ),
            default=None,
        )
        if last is not None:
            ordered.insert(last, ordered.pop(place))  # after the pop, `last` is just below that claim
    return ordered


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True, slots=True)
class Ranked:
    chosen: list[dict[str, Any]]  # the selected candidates, best first
    dropped: tuple[tuple[str, str], ...]  # (short id, reason) for candidates left out
    best_score: float | None


def fuse(
    ordered: list[dict[str, Any]],
    keyword_ranks: Collection[dict[uuid.UUID, float]],
    rrf_k: float,
    keyword_weight: float,
) -> list[dict[str, Any]]:
    """Weighted reciprocal rank fusion: a candidate's score becomes the sum, over the rankings it is
    in, of weight / (rrf_k + its place there). The rankings: every candidate by its similarity score
    (`ordered`, best first; weight 1), and the keyword matches among them by ts_rank_cd, one ranking
    per side (claim, passage; `keyword_weight` each), equal ranks sharing a place. Relevance, which
    the floor checks, stays the similarity."""
    fused = {c["head_id"]: 1.0 / (rrf_k + place) for place, c in enumerate(ordered, start=1)}
    for ranks in keyword_ranks:
        first_place: dict[float, int] = {}
        for place, value in enumerate(sorted(ranks.values(), reverse=True), start=1):
            first_place.setdefault(value, place)
        for head_id, value in ranks.items():
            fused[head_id] += keyword_weight / (rrf_k + first_place[value])
    keyword = set().union(*keyword_ranks)
    out = [{**c, "score": fused[c["head_id"]], "keyword": c["head_id"] in keyword} for c in ordered]
    # a stable sort: equal fused scores keep the similarity order
    return sorted(out, key=lambda c: -round(c["score"], 9))


def spread_messages(ordered: list[dict[str, Any]], per_message: int, floor: float) -> list[dict[str, Any]]:
    """`ordered` with each message's facts past its first `per_message` (above the floor) moved after
    every other candidate, in their order: more messages reach a small block, none is lost to a large
    one."""
    first: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    taken: Counter[str] = Counter()
    for c in ordered:
        message = c["message_id"]
        if message is None or c["relevance"] < floor:
            first.append(c)
        elif taken[message] < per_message:
            taken[message] += 1
            first.append(c)
        else:
            later.append(c)
    return first + later


def _recalled_directive(options: SearchOptions, valued: bool | None) -> bool:
    return options.include_directives or (options.directives_with_values and bool(valued))


def rank(rows: Sequence[dict[str, Any]], options: SearchOptions) -> Ranked:
    """Decide which candidates make the block (pure: no database)."""
    w = options.claim_weight
    best: dict[uuid.UUID, dict[str, Any]] = {}
    dropped: dict[uuid.UUID, str] = {}
    # per head, the best keyword rank of any hit resolving to it, on its claim and on its passage
    words: dict[str, dict[uuid.UUID, float]] = {"claim_words_rank": {}, "passage_words_rank": {}}
    # in id order, not the order the plan returned them in: where two candidates tie (two facts with
    # one text, or two versions of a claim), the same one wins whichever plan the server chose
    for row in sorted(rows, key=lambda r: r["hit_id"]):
        hit_id, head_id = row["hit_id"], row["head_id"]
        if row["hit_status"] == Status.ARCHIVED:
            dropped[hit_id] = "archived"
            continue
        if row["hit_kind"] == Kind.DIRECTIVE and not _recalled_directive(options, row["hit_valued"]):
            dropped[hit_id] = "directive"
            continue
        reason = None
        if not row["head_in_scope"]:
            reason = "current version is out of scope"
        elif row["head_status"] == Status.ARCHIVED:
            reason = "current version archived"
        elif row["head_kind"] == Kind.DIRECTIVE and not _recalled_directive(options, row["head_valued"]):
            reason = "current version is a directive"
        elif row.get("head_failed_delegation"):
            # "Sub-agent x did not complete its task: it failed with ...": kept for audit, never recalled
            reason = "a failed delegation's notice"
        elif not row["head_has_vector"]:
            reason = "current version has no vector"
        elif head_id in options.exclude_fact_ids or (
            row["head_message_id"] is not None and row["head_message_id"] in options.exclude_message_ids
        ):
            reason = "already in the message window"
        if reason:
            dropped[head_id] = reason
            continue
        if row["claim_sim"] is None:  # found through its passage, but not embedded in this space yet
            dropped[hit_id] = "no vector in this embedding space yet"
            continue
        claim_sim = float(row["claim_sim"])
        passage_sim = None if row["passage_sim"] is None else float(row["passage_sim"])
        similarity = claim_sim if passage_sim is None else w * claim_sim + (1 - w) * passage_sim
        demoted = bool(row["head_demoted"])
        score = similarity - (options.descendant_penalty if demoted else 0.0)
        for side, ranks in words.items():
            if row.get(side) is not None:
                ranks[head_id] = max(ranks.get(head_id, 0.0), float(row[side]))
        current = best.get(head_id)
        # a tie goes to the current version itself: found as it is, it needs no "resolved from"
        if current is None or score > current["score"] or (score == current["score"] and hit_id == head_id):
            best[head_id] = {
                "head_id": head_id,
                "hit_id": hit_id,
                "agent_id": row["head_agent_id"],
                "message_id": row["head_message_id"],
                "md5": row["head_md5"],  # md5(body), computed by Postgres over the UTF-8 text
                "score": score,
                "relevance": score,  # kept as it is when fusion replaces the score: what the floor checks
                "similarity": similarity,
                "claim_sim": claim_sim,
                "passage_sim": passage_sim,
                "demoted": demoted,
                "derived_from": frozenset(row["head_derived_from"] or ()),
                "row": row,  # the winners' Hits are built from it
            }

    ordered = sorted(best.values(), key=lambda c: (-round(c["score"], 6), c["md5"]))
    if options.keyword:
        ordered = fuse(ordered, list(words.values()), options.rrf_k, options.keyword_weight)
    if options.per_message is not None:
        ordered = spread_messages(ordered, options.per_message, options.relevance_floor)
    chosen: list[dict[str, Any]] = []
    chosen_ids: set[uuid.UUID] = set()
    sources: set[uuid.UUID] = set()  # what the chosen restatements were derived from
    per_agent: Counter[str] = Counter()
    for cand in ordered:
        head_id = cand["head_id"]
        if cand["relevance"] < options.relevance_floor:
            dropped[head_id] = "below the relevance floor"
            continue
        if cand["derived_from"] and not cand["derived_from"].isdisjoint(chosen_ids):
            dropped[head_id] = "restates a fact already selected"
            continue
        if cand["demoted"] and per_agent[cand["agent_id"]] >= options.per_agent_cap:
            dropped[head_id] = f"cap of {options.per_agent_cap} facts for sub-agent {cand['agent_id']}"
            continue
        # a restatement that outranked its source gives its slot back when the source arrives
        if head_id in sources:
            for earlier in [c for c in chosen if head_id in c["derived_from"]]:
                chosen.remove(earlier)
                chosen_ids.discard(earlier["head_id"])
                if earlier["demoted"]:
                    per_agent[earlier["agent_id"]] -= 1
                dropped[earlier["head_id"]] = "restates a fact already selected"
            sources = set().union(*(c["derived_from"] for c in chosen))
        if len(chosen) >= options.k:
            dropped[head_id] = f"beyond k={options.k}"
            continue
        chosen.append(cand)
        chosen_ids.add(head_id)
        sources |= cand["derived_from"]
        if cand["demoted"]:
            per_agent[cand["agent_id"]] += 1
    selected = {c["head_id"] for c in chosen}
    return Ranked(
        chosen=chosen,
        dropped=tuple((fid.hex[:8], why) for fid, why in dropped.items() if fid not in selected),
        best_score=max((c["relevance"] for c in ordered), default=None),
    )
