"""The claim side of keyword search alone: how often a question's evidence is among its best matches.

Per answerable question with evidence: the session's claims matching any content word (the words in
`keyword_common` claims of the session or more left out, as search does), ranked four ways, and
whether a claim carved from an evidence turn is among the first 8 / 32:
  ts_rank_cd      built-in full-text search (the default ranker), by Postgres
  bm25 table      pg_textsearch's BM25 with the statistics of its index over every session's claims
                  (the library's keyword_ranker="bm25"), by Postgres
  py table        the same BM25 recomputed here from the stored tsvectors and ts_stat, to check the
                  formula below against pg_textsearch's
  py session      that formula with the statistics of this session's claims only (document count,
                  document frequencies, average length): what per-session statistics would give.
                  pg_textsearch 1.0.0 cannot: a partial index (WHERE session_id = ...) still counts
                  every row of the table (partial indexes arrived after 1.0.0)

BM25 as pg_textsearch 1.0.0 computes it (src/query/score.c): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
score = sum over query lexemes of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len)), k1 1.2,
b 0.75, a document's length its tsvector's count of positions. pg_textsearch keeps that length in one
byte (Lucene's SmallFloat, src/segment/fieldnorm.h: exact below 40, up to about 6% off above), so the
recomputed table score equals its own for short claims (LoCoMo's) and only approximately for long ones
(BEAM's); the script prints how often they agree.

    DATABASE_URL=... python -m bench.keyword_ranker.side_recall DATABASE --locomo PATH | --beam PATH \
        --split results/split.json --only tune
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from bench.eval.loaders import load_beam, load_locomo
from memory.retrieval import SearchOptions, ensure_bm25_indexes, keyword_words

K1, B = 1.2, 0.75
_MATCHES = """WITH q AS (SELECT (SELECT string_agg(plainto_tsquery('english', w)::text, ' | ')
                       FILTER (WHERE numnode(plainto_tsquery('english', w)) > 0)
                  FROM unnest(%(words)s::text[]) AS w)::tsquery AS q)
    SELECT f.id, f.message_id,
           ts_rank_cd(f.body_tsv, (SELECT q FROM q))::float8 AS ts,
           -(f.body <@> to_bm25query(%(text)s, 'beads.facts_body_bm25')) AS bm25_table
      FROM beads.facts f
     WHERE f.body_tsv @@ (SELECT q FROM q) AND f.session_id = %(session)s
       AND f.status <> 'archived' AND f.kind <> 'directive'"""
_COMMON = """SELECT count(*) AS n FROM (SELECT FROM beads.facts f WHERE f.session_id = %(session)s
    AND f.body_tsv @@ plainto_tsquery('english', %(word)s) LIMIT %(common)s) AS found"""
# each claim's lexemes and their counts; a claim's length is their sum
_TERMS = """SELECT f.id, t.lexeme, coalesce(array_length(t.positions, 1), 1) AS tf
      FROM beads.facts f, unnest(f.body_tsv) AS t WHERE f.session_id = %(session)s"""


class Stats:
    """Document count, document frequencies and average length of a set of claims."""

    def __init__(self, conn: psycopg.Connection[Any], session: str | None) -> None:
        where = (
            "true"
            if session is None
            else sql.SQL("session_id = {}").format(sql.Literal(session)).as_string(conn)
        )
        query = f"SELECT body_tsv FROM beads.facts WHERE {where} AND body_tsv <> ''::tsvector"
        stat = sql.SQL("SELECT word, ndoc, nentry FROM ts_stat({})").format(sql.Literal(query))
        rows = conn.execute(stat).fetchall()
        self.df = {r["word"]: r["ndoc"] for r in rows}
        row = conn.execute(
            sql.SQL("SELECT count(*) AS n FROM ({}) AS docs").format(sql.SQL(query))
        ).fetchone()  # type: ignore[arg-type]
        self.n = row["n"] if row else 0
        self.avg_len = sum(r["nentry"] for r in rows) / max(self.n, 1)

    def score(self, terms: dict[str, int], query: list[str]) -> float:
        length = sum(terms.values())
        total = 0.0
        for lexeme in query:
            tf = terms.get(lexeme, 0)
            if not tf:
                continue
            df = self.df.get(lexeme, 0)
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / self.avg_len))
        return total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("database")
    ap.add_argument("--locomo")
    ap.add_argument("--beam")
    ap.add_argument("--split", required=True)
    ap.add_argument("--only", default="tune")
    args = ap.parse_args()
    parts = urlsplit(os.environ["DATABASE_URL"])
    url = urlunsplit(parts._replace(path=f"/{args.database}"))
    dataset = load_locomo(args.locomo) if args.locomo else load_beam(args.beam)
    wanted = set(json.loads(Path(args.split).read_text())[args.only])
    common = SearchOptions().keyword_common
    rankers = ("ts", "bm25_table", "py_table", "py_session")
    found = {(r, k): 0 for r in rankers for k in (8, 32)}
    asked, agree, compared, same_top, ranked = 0, 0, 0, 0, 0
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        ensure_bm25_indexes(conn)
        table = Stats(conn, None)
        for conversation in dataset.conversations:
            if conversation.id not in wanted:
                continue
            session = {"session": conversation.id}
            local = Stats(conn, conversation.id)
            terms: dict[Any, dict[str, int]] = {}
            for r in conn.execute(_TERMS, session):
                terms.setdefault(r["id"], {})[r["lexeme"]] = r["tf"]
            for question in conversation.questions:
                if question.abstention or not question.evidence_ids:
                    continue
                asked += 1
                words = [
                    w
                    for w in keyword_words(question.question)
                    if conn.execute(_COMMON, {**session, "word": w, "common": common}).fetchone()["n"]
                    < common  # type: ignore[index]
                ]
                if not words:
                    continue
                text = " ".join(words)
                lexemes = [
                    r["lexeme"]
                    for r in conn.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s))", (text,))
                ]
                rows = conn.execute(_MATCHES, {**session, "words": words, "text": text}).fetchall()
                for r in rows:
                    claim = terms.get(r["id"], {})
                    r["py_table"] = table.score(claim, lexemes)
                    r["py_session"] = local.score(claim, lexemes)
                    compared += 1
                    agree += abs(r["py_table"] - r["bm25_table"]) <= 1e-3 * max(1.0, abs(r["bm25_table"]))
                ranked += 1
                top = {
                    key: [r["id"] for r in sorted(rows, key=lambda r, key=key: -r[key])[:8]]
                    for key in rankers
                }
                same_top += top["py_table"] == top["bm25_table"]
                evidence = set(question.evidence_ids)
                for ranker in rankers:
                    ordered = sorted(rows, key=lambda r, key=ranker: -r[key])
                    for k in (8, 32):
                        found[(ranker, k)] += any(r["message_id"] in evidence for r in ordered[:k])
    print(f"{args.database} ({args.only}): {asked} answerable questions with evidence")
    print(
        f"  py table equals pg_textsearch's score (to 0.1%) for {agree} of {compared} matches;"
        f" the same first 8 for {same_top} of {ranked} questions"
    )
    for ranker in rankers:
        cells = "  ".join(f"@{k} {found[(ranker, k)] / asked:.1%} ({found[(ranker, k)]})" for k in (8, 32))
        print(f"  {ranker:11s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
