"""`BeadsStore`: LangGraph's `BaseStore` over the fact graph, for code written against LangGraph's
store API (`create_agent(..., store=...)`, `runtime.store`, LangMem's `manage_memory` and
`search_memory`). By default it answers as LangGraph's `PostgresStore` does (LangGraph's own store
tests run against it: tests/test_upstream_store.py); what the fact graph adds is opt-in.

- **Namespaces are sessions.** A LangGraph namespace `("memories", "alice")` is the fact graph's
  session `"memories.alice"` (labels cannot hold a period, so the mapping is one to one). A search
  under a prefix reads the sessions at or below it, matched on label boundaries with LIKE's
  metacharacters escaped, so `("user_1",)` never reads `("userX1",)` and `("a",)` never `("ab",)`.
- **An item is a fact.** Its key and value live in the fact's metadata; its text is the value's text
  at the index fields (by default every string in the value, so LangMem's `{"content": "..."}` is
  stored as its sentence). Each indexed text has a vector of its own (beads.item_vectors), as each
  of LangGraph's indexed fields does. Facts are `conclusion`s written by `remember_tool` on the
  user's behalf, so they never supersede a user's own claim on capture.
- **Reads are single statements**: a get by key, a page of items newest first, a page of items by
  similarity (`score` is the cosine similarity of the item's best text, as PostgresStore reports),
  each with its filter and LIMIT in the query. TTLs (`put(ttl=)`, refresh on read, a sweeper) sit
  on the fact graph's own expiry: an expired item is archived (memory.graph.consolidate.expire_due).
- **Options, off by default** (each would fail LangGraph's tests named in docs/guide/integrations.md):
  `history=True` keeps a put's old value as a superseded version of the same claim (`history()`,
  `fact()`); `ranking="beads"` ranks with ours (hybrid, resolved to current values, a relevance
  floor, fused scores).

`AsyncBeadsStore` is the same store behind LangGraph's `AsyncBatchedBaseStore`: concurrent async
calls are gathered into one batch, as `AsyncPostgresStore`'s are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.base.embed import ensure_embeddings
from psycopg import sql
from psycopg.types.json import Jsonb

from memory.embedders.base import Embedder, embed_queries
from memory.errors import InvalidTextError
from memory.graph import consolidate, revisions
from memory.graph.store import FactStore
from memory.ids import fact_id, namespace_id
from memory.model import FACT_COLUMNS, Fact, Source
from memory.postgres import vectors
from memory.rules import clean_text

# the metadata key under which a fact carries its item (key, namespace, value, whether it is indexed)
ITEM = "store_item"
# a put's edge needs no similarity guard: the key says the two are one claim
_ANY_SIMILARITY = -2.0
# with a filter, ask our ranking (ranking="beads") for this many times what is wanted: some hits will not match
FILTER_WIDEN = 4

Ranking = Literal["similarity", "beads"]
Distance = Literal["cosine", "inner_product", "l2"]

# LIKE matches a session and everything below it on label boundaries; the pattern is escaped
_SESSIONS_UNDER = "(session_id = %(exact)s OR session_id LIKE %(below)s ESCAPE '\\')"
# every version of each item in the given sessions, the current one (the head) first per key
_VERSIONS = f"""
SELECT {FACT_COLUMNS}
FROM beads.facts
WHERE metadata ? '{ITEM}' AND status <> 'archived' AND {{scope}}
ORDER BY session_id, metadata->'{ITEM}'->>'key', (head_id = id) DESC, recorded_at DESC, id
"""

# an item's current version: the head of its chain, not archived (expired) and not superseded
_CURRENT = f"f.metadata ? '{ITEM}' AND f.status = 'active'"
_LIVE = "(f.expires_at IS NULL OR f.expires_at > now())"
# what an Item is made of; created_at is the first version's (carried in the metadata by a put that
# replaced the key, else the oldest fact of the chain)
_ITEM_COLUMNS = f"""f.id, f.metadata->'{ITEM}' AS item, f.recorded_at AS updated_at,
       coalesce((f.metadata->'{ITEM}'->>'created_at')::timestamptz,
                (SELECT min(o.recorded_at) FROM beads.facts o WHERE o.head_id = f.id)) AS created_at,
       f.ttl_minutes"""
_KEYED = f"f.session_id = w.session_id AND f.metadata->'{ITEM}'->>'key' = w.key"

_GET = f"""
SELECT {_ITEM_COLUMNS}
  FROM unnest(%(sessions)s::text[], %(keys)s::text[]) AS w(session_id, key)
  JOIN beads.facts f ON {_KEYED}
 WHERE {_CURRENT} AND {{live}}
"""
_LIST = f"""
SELECT {_ITEM_COLUMNS}
  FROM beads.facts f
 WHERE {_CURRENT} AND {{live}} AND {{scope}} AND {{filter}}
 ORDER BY f.recorded_at DESC, f.id
 LIMIT %(limit)s OFFSET %(offset)s
"""
# similarity: each item scored by its best text; the page is cut in the query
_SIMILAR = f"""
WITH hits AS (
    SELECT v.fact_id, max({{similarity}}) AS score
      FROM beads.item_vectors v
      JOIN beads.facts f ON f.id = v.fact_id
     WHERE v.embedder_id = %(eid)s AND {_CURRENT} AND {{live}} AND {{scope}} AND {{filter}}
     GROUP BY v.fact_id
     ORDER BY score DESC, v.fact_id
     LIMIT %(limit)s OFFSET %(offset)s)
SELECT {_ITEM_COLUMNS}, h.score
  FROM hits h JOIN beads.facts f ON f.id = h.fact_id
 ORDER BY h.score DESC, f.id
"""
_UNSCORED = (
    "NOT EXISTS (SELECT 1 FROM beads.item_vectors v WHERE v.fact_id = f.id AND v.embedder_id = %(eid)s)"
)
_SCORED_COUNT = f"""
SELECT count(*) AS n FROM beads.facts f
 WHERE {_CURRENT} AND {{live}} AND {{scope}} AND {{filter}} AND NOT {_UNSCORED}
"""
_NAMESPACES = f"SELECT DISTINCT f.session_id FROM beads.facts f WHERE {_CURRENT} AND {{live}} AND {{scope}}"
_SIMILARITY = {
    "cosine": "1 - (v.embedding <=> %(q)s)",
    "inner_product": "-(v.embedding <#> %(q)s)",
    "l2": "-(v.embedding <-> %(q)s)",
}
_REFRESH = (
    "UPDATE beads.facts SET expires_at = now() + ttl_minutes * interval '1 minute' "
    "WHERE id = ANY(%s) AND ttl_minutes IS NOT NULL AND status = 'active'"
)

# a put: the keys it touches are locked (in one order, so two batches cannot deadlock), their
# current versions read, then replaced
_LOCK_KEYS = """
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(s || '/' || k, 45) AS h
      FROM unnest(%(sessions)s::text[], %(keys)s::text[]) AS u(s, k) ORDER BY 1) AS l
"""
_PREVIOUS = f"""
SELECT f.id, f.session_id, f.metadata->'{ITEM}' AS item,
       coalesce((f.metadata->'{ITEM}'->>'created_at')::timestamptz,
                (SELECT min(o.recorded_at) FROM beads.facts o WHERE o.head_id = f.id)) AS created_at
  FROM unnest(%(sessions)s::text[], %(keys)s::text[]) AS w(session_id, key)
  JOIN beads.facts f ON {_KEYED}
 WHERE {_CURRENT}
"""
_DELETE = f"""
DELETE FROM beads.facts f USING unnest(%(sessions)s::text[], %(keys)s::text[]) AS w(session_id, key)
 WHERE {_KEYED} AND f.metadata ? '{ITEM}'
"""
_INSERT_ROOT = (
    "INSERT INTO beads.namespaces (id, session_id, parent_id, lineage, path, agent_id) "
    "VALUES (%s, %s, NULL, ARRAY[%s]::uuid[], '{}', 'root') ON CONFLICT (id) DO NOTHING"
)
_INSERT_ITEM = """
INSERT INTO beads.facts (id, session_id, namespace_id, kind, source, source_key, agent_id,
    acting_on_behalf_of, body, head_id, metadata, expires_at, ttl_minutes)
VALUES (%(id)s, %(session)s, %(ns)s, 'conclusion', 'remember_tool', %(source_key)s, 'root',
    'user', %(body)s, %(id)s, %(metadata)s, now() + %(ttl)s::float8 * interval '1 minute', %(ttl)s)
"""
_INSERT_ITEM_VECTOR = (
    "INSERT INTO beads.item_vectors (fact_id, embedder_id, ord, embedding) VALUES (%s, %s, %s, %s)"
)


def session_of(namespace: tuple[str, ...]) -> str:
    """The fact graph's session for a LangGraph namespace."""
    return ".".join(namespace)


def namespace_of(session_id: str) -> tuple[str, ...]:
    return tuple(session_id.split("."))


def escape_like(text: str) -> str:
    """`text` as a LIKE literal (with ESCAPE '\\'): `%` and `_` match only themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _scope(prefix: tuple[str, ...], column: str = "session_id") -> tuple[sql.Composable, dict[str, Any]]:
    if not prefix:
        return sql.SQL("TRUE"), {}
    exact = session_of(prefix)
    scope = _SESSIONS_UNDER.replace("session_id", column)
    return sql.SQL(scope), {"exact": exact, "below": escape_like(exact) + ".%"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _check_storable(op: PutOp) -> None:
    """Refuse, naming where, a put whose key, namespace or value holds text Postgres cannot store
    (memory.rules.clean_text.problem): a store hands back what was put, so nothing is cleaned out of it, and
    the refusal says why instead of a driver error halfway through the batch."""
    for where, text in (
        ("key", op.key),
        *((f"namespace[{i}]", label) for i, label in enumerate(op.namespace)),
        *(("a text in the value", text) for text in _strings(dict(op.value or {}))),
    ):
        if problem := clean_text.problem(text):
            raise InvalidTextError(f"{where} {problem}")


def item_texts(value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The texts an item is indexed by, one vector each: per field path, the texts LangGraph's
    `get_text_at_path` finds there; "$" is every string in the value, as one text."""
    texts: list[str] = []
    for path in fields:
        found = ["\n".join(_strings(value))] if path == "$" else get_text_at_path(value, tokenize_path(path))
        texts += [t.strip() for t in found if t.strip()]
    return texts


def item_text(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What an item's fact says: its indexed texts, one per line."""
    return "\n".join(item_texts(value, fields))


class _Missing:
    """A field the value does not have: equal to nothing (not even None), unequal to everything."""


_MISSING = _Missing()


def matches(value: Any, wanted: Any) -> bool:
    """A filter's test, as LangGraph's PostgresStore reads it (JSONB semantics: a missing field
    equals nothing, not even None); `filter_sql` is the same test in SQL."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(
            matches(value.get(k, _MISSING), v) for k, v in wanted.items()
        )
    if isinstance(value, _Missing):
        return False
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return not isinstance(value, _Missing) and bool(value == operand)
    if operator == "$ne":
        return isinstance(value, _Missing) or bool(value != operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"Unsupported operator: {operator}")
    # numbers compare as numbers (PostgresStore compares their text, so 10 < 9), strings as text
    # (code point order, as SQL's COLLATE "C"); a missing field, or one of the other kind, matches none
    if (_is_number(operand) and _is_number(value)) or (isinstance(operand, str) and isinstance(value, str)):
        return bool(
            {
                "$gt": value > operand,
                "$gte": value >= operand,
                "$lt": value < operand,
                "$lte": value <= operand,
            }[operator]
        )
    return False


_SQL_OPERATORS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def filter_sql(
    wanted: Mapping[str, Any] | None, column: str = "f.metadata"
) -> tuple[sql.Composable, dict[str, Any]]:
    """`matches(value, wanted)` as a condition on the item's value in `column`'s metadata, with its
    parameters (named f0, f1, ...)."""
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {}

    def param(value: Any) -> sql.Composable:
        name = f"f{len(params)}"
        params[name] = value
        return sql.Placeholder(name)

    def walk(path: list[str], wanted: Any) -> None:
        target = sql.SQL("({} #> {}::text[])").format(sql.SQL(column), param([ITEM, "value", *path]))
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            for operator, operand in wanted.items():
                if operator == "$eq":
                    conditions.append(sql.SQL("{} = {}::jsonb").format(target, param(json.dumps(operand))))
                elif operator == "$ne":
                    conditions.append(
                        sql.SQL("{} IS DISTINCT FROM {}::jsonb").format(target, param(json.dumps(operand)))
                    )
                elif operator in _SQL_OPERATORS and _is_number(operand):
                    conditions.append(
                        sql.SQL(
                            "CASE WHEN jsonb_typeof({t}) = 'number' THEN ({t})::numeric {op} {v} ELSE false END"
                        ).format(t=target, op=sql.SQL(_SQL_OPERATORS[operator]), v=param(operand))
                    )
                elif operator in _SQL_OPERATORS and isinstance(operand, str):
                    conditions.append(
                        sql.SQL(
                            "CASE WHEN jsonb_typeof({t}) = 'string' THEN ({t} #>> '{{}}') COLLATE \"C\" {op} {v} ELSE false END"
                        ).format(t=target, op=sql.SQL(_SQL_OPERATORS[operator]), v=param(operand))
                    )
                elif operator in _SQL_OPERATORS:
                    conditions.append(sql.SQL("false"))
                else:
                    raise ValueError(f"Unsupported operator: {operator}")
        elif isinstance(wanted, Mapping):
            conditions.append(sql.SQL("jsonb_typeof({}) = 'object'").format(target))
            for key, inner in wanted.items():
                walk([*path, str(key)], inner)
        else:
            conditions.append(sql.SQL("{} = {}::jsonb").format(target, param(json.dumps(wanted))))

    for key, inner in (wanted or {}).items():
        walk([str(key)], inner)
    if not conditions:
        return sql.SQL("TRUE"), {}
    return sql.SQL("({})").format(sql.SQL(" AND ").join(conditions)), params


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    if condition.match_type not in ("prefix", "suffix"):
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def _item_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """An item row's namespace, key, value and times, as Item and SearchItem take them."""
    meta = row["item"]
    return {
        "namespace": tuple(meta["namespace"]),
        "key": meta["key"],
        "value": meta["value"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _item(row: Mapping[str, Any]) -> Item:
    return Item(**_item_fields(row))


def _search_item(row: Mapping[str, Any], score: float | None) -> SearchItem:
    return SearchItem(**_item_fields(row), score=score)


@dataclass(frozen=True, slots=True)
class _Versions:
    """One key's versions, current first."""

    facts: tuple[Fact, ...]

    @property
    def current(self) -> Fact:
        return self.facts[0]

    @property
    def indexed(self) -> bool:
        return bool(self.current.metadata[ITEM].get("indexed", True))

    def _fields(self) -> dict[str, Any]:
        meta = self.current.metadata[ITEM]
        return {
            "namespace": tuple(meta["namespace"]),
            "key": meta["key"],
            "value": meta["value"],
            # a put that replaced the key carried the first version's time
            "created_at": datetime.fromisoformat(meta["created_at"])
            if "created_at" in meta
            else min(f.recorded_at for f in self.facts),
            "updated_at": self.current.recorded_at,
        }

    def item(self) -> Item:
        return Item(**self._fields())

    def search_item(self, score: float | None = None) -> SearchItem:
        return SearchItem(**self._fields(), score=score)


class IndexEmbedder:
    """LangGraph's `index["embed"]` (LangChain `Embeddings`, a function, or a provider string) as
    this library's `Embedder`. Its vectors are stored as the model returns them: scores are then the
    similarities LangGraph's stores report for the same model."""

    def __init__(self, index: IndexConfig) -> None:
        embed = index["embed"]
        self.embeddings: Embeddings = ensure_embeddings(embed)
        self.dims = int(index["dims"])
        described = (
            embed if isinstance(embed, str) else getattr(embed, "__qualname__", type(embed).__qualname__)
        )
        # the vector space's name: one model (and length) is one space, across processes
        self.name = f"langgraph:{described}:{self.dims}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in self.embeddings.embed_documents(list(texts))]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in v] for v in await self.embeddings.aembed_documents(list(texts))]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in self.embeddings.embed_query(t)] for t in texts]

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in await self.embeddings.aembed_query(t)] for t in texts]


@dataclass(slots=True)
class _Write:
    """One put, prepared before its transaction: the value, its texts and their vectors."""

    op: PutOp
    value: dict[str, Any]
    texts: list[str]
    body: str
    vectors: list[list[float]] = field(default_factory=list)
    body_vector: list[float] = field(default_factory=list)


class BeadsStore(BaseStore):
    """LangGraph's `BaseStore` over a `FactStore` (see the module's docstring for the mapping).

    `fields` are the paths of a value whose text is indexed (LangGraph's `index["fields"]`; a put's
    `index=[...]` overrides them for that item, and `index=False` keeps an item out of ranked search:
    it is listed after the ranked hits, unscored, as LangGraph's in-memory store does). `index` is
    what LangGraph's stores take (`dims`, `embed`, `fields`, `distance_type`); its `embed` is used
    only where `facts` was built on it (`BeadsStore.from_pool`), and `index_config` reports it.
    `ttl` is LangGraph's `TTLConfig` (`default_ttl` and `sweep_interval_minutes` in minutes,
    `refresh_on_read`, `omit_expired`).

    Off by default, each an option because it answers otherwise than `BaseStore` promises
    (docs/guide/integrations.md names the upstream tests each would fail): `history=True` keeps the value
    a put replaced as a superseded version of the same claim (`history()`, `fact()`); `ranking=
    "beads"` ranks with ours (hybrid, resolved to current values, a relevance floor, fused scores).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        facts: FactStore,
        *,
        fields: Sequence[str] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        history: bool = False,
        ranking: Ranking = "similarity",
    ) -> None:
        if ranking not in ("similarity", "beads"):
            raise ValueError(f"ranking must be 'similarity' or 'beads', not {ranking!r}")
        self.facts = facts
        index_fields = (index or {}).get("fields")
        self.fields: tuple[str, ...] = tuple(fields or index_fields or ("$",))
        distance = (index or {}).get("distance_type", "cosine")
        if distance not in _SIMILARITY:
            raise ValueError(f"distance_type must be one of {sorted(_SIMILARITY)}, not {distance!r}")
        self.distance = cast(Distance, distance)
        self._index: IndexConfig | None = index
        self.ttl_config: TTLConfig | None = ttl
        self.history_kept = history
        self.ranking: Ranking = ranking
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    @classmethod
    def from_pool(
        cls,
        pool: Any,
        *,
        index: IndexConfig | None = None,
        embedder: Embedder | None = None,
        ttl: TTLConfig | None = None,
        **options: Any,
    ) -> BeadsStore:
        """A store on `pool` whose vectors come from `index["embed"]` (as LangGraph's stores take it),
        else from `embedder` (default: the bundled offline MiniLM). Call `setup()` once."""
        if index is not None and index.get("embed") is not None:
            embedder = IndexEmbedder(index)
        if embedder is None:
            from memory.embedders import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        return cls(FactStore(pool, embedder), index=index, ttl=ttl, **options)

    def setup(self) -> None:
        """Apply the fact graph's migrations and register the embedder (idempotent), as
        `PostgresStore.setup()` does for its tables."""
        self.facts.setup()

    @property
    def index_config(self) -> IndexConfig:
        """LangGraph's index settings as this store applies them."""
        config: IndexConfig = {
            "dims": self.facts.embedder.dims,
            "embed": self.facts.embedder.embed,
            "fields": list(self.fields),
        }
        if self._index is not None:
            config.update(self._index)
        return config

    # -- the two entry points ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order of kind, as LangGraph's stores do: every read sees the store as it was
        before this batch's puts, and of several puts to one key the last wins. Every read of one
        kind is one statement (gets) or one each (searches, listings), and the whole batch takes one
        connection from the pool (as PostgresStore's does), whatever its ops: a batch holding one
        never waits on the pool for another. (ranking="beads" is the exception: its searches are the
        fact graph's own, which take theirs.)"""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        gets: list[tuple[int, GetOp]] = []
        searches: list[tuple[int, SearchOp]] = []
        listings: list[tuple[int, ListNamespacesOp]] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                gets.append((i, op))
            elif isinstance(op, SearchOp):
                searches.append((i, op))
            elif isinstance(op, ListNamespacesOp):
                listings.append((i, op))
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        # embedded before a connection is taken: a model must not hold one
        queries = self._query_vectors([op for _, op in searches])
        writes = self._prepare(list(puts.values()))
        refresh: list[uuid.UUID] = []
        with self.facts.pool.connection() as conn:
            self.facts._embedder_id_on(conn)  # the first batch registers the space on this connection
            if gets:
                for (i, _), got in zip(gets, self._get(conn, [op for _, op in gets], refresh), strict=True):
                    results[i] = got
            for i, op in searches:
                results[i] = self._search(conn, op, queries.get(op.query or ""), refresh)
            for i, op in listings:
                results[i] = self._list_namespaces(conn, op)
            if refresh:
                conn.execute(_REFRESH, (refresh,))
            if writes:
                self._write(conn, writes)
                self.facts._vectors_written(conn)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.facts.aio.run(self.batch, list(ops))

    # -- beyond BaseStore --------------------------------------------------------------------------

    def history(self, namespace: tuple[str, ...], key: str) -> list[Item]:
        """Every value the key has held, oldest first, the current one last (empty when absent).
        Without `history=True` a put replaces the value, so this is the current one alone."""
        versions = self._versions((namespace,), key).get((session_of(namespace), key))
        if versions is None:
            return []
        ordered = sorted(versions.facts, key=lambda f: f.recorded_at)
        return [_Versions((f,)).item() for f in ordered]

    def fact(self, namespace: tuple[str, ...], key: str) -> Fact | None:
        """The fact holding the key's current value (for the fact graph's own reads: pins, edges)."""
        versions = self._versions((namespace,), key).get((session_of(namespace), key))
        return None if versions is None else versions.current

    def sweep_ttl(self) -> int:
        """Archive every item whose time to live has run out; returns how many (PostgresStore's
        sweep deletes them: here they stay as archived facts, read by nothing but the audit)."""
        with self.facts.pool.connection() as conn:
            return consolidate.expire_due(conn)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep every `sweep_interval_minutes` (default: the TTL config's, else 5) in a background
        thread until `stop_ttl_sweeper`; returns a future that completes when it stops."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            done.set_result(None)
            return done
        self._sweeper_stop.clear()

        def run() -> None:
            try:
                while not self._sweeper_stop.wait(float(interval) * 60):
                    self.sweep_ttl()
            finally:
                done.set_result(None)

        self._sweeper = threading.Thread(target=run, name="beads-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True when it has stopped within `timeout` seconds."""
        if self._sweeper is None:
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    # -- reads ---------------------------------------------------------------------------------------

    def _live(self) -> sql.Composable:
        """Expired items are read until swept, as LangGraph's stores do, unless `omit_expired`."""
        return sql.SQL(_LIVE if (self.ttl_config or {}).get("omit_expired") else "TRUE")

    def _get(self, conn: Any, ops: Sequence[GetOp], refresh: list[uuid.UUID]) -> list[Item | None]:
        sessions = [session_of(op.namespace) for op in ops]
        keys = [op.key for op in ops]
        query = sql.SQL(_GET).format(live=self._live())
        found = {
            (session_of(tuple(r["item"]["namespace"])), r["item"]["key"]): r
            for r in conn.execute(query, {"sessions": sessions, "keys": keys}).fetchall()
        }
        answers: list[Item | None] = []
        for session, op in zip(sessions, ops, strict=True):
            row = found.get((session, op.key))
            if row is not None and op.refresh_ttl and row["ttl_minutes"] is not None:
                refresh.append(row["id"])
            answers.append(None if row is None else _item(row))
        return answers

    def _query_vectors(self, searches: Sequence[SearchOp]) -> dict[str, list[float]]:
        if self.ranking != "similarity":
            return {}
        texts = list(dict.fromkeys(op.query for op in searches if op.query))
        if not texts:
            return {}
        return dict(zip(texts, embed_queries(self.facts.embedder, texts), strict=True))

    def _search(
        self, conn: Any, op: SearchOp, query: list[float] | None, refresh: list[uuid.UUID]
    ) -> list[SearchItem]:
        if op.query and self.ranking == "beads":
            return self._search_ranked(op)
        scope, params = _scope(op.namespace_prefix, "f.session_id")
        where, more = filter_sql(op.filter)
        params |= more | {"limit": op.limit, "offset": op.offset}
        parts = {"live": self._live(), "scope": scope, "filter": where}
        if not op.query or query is None:
            rows = conn.execute(sql.SQL(_LIST).format(**parts), params).fetchall()
            found = [_search_item(r, None) for r in rows]
        else:
            params |= {"eid": self.facts.embedder_id, "q": vectors.as_vector(query)}
            similar = sql.SQL(_SIMILAR).format(similarity=sql.SQL(_SIMILARITY[self.distance]), **parts)
            rows = conn.execute(similar, params).fetchall()
            found = [_search_item(r, float(r["score"])) for r in rows]
            if len(rows) < op.limit:  # unindexed items come last, unscored, as in LangGraph's in-memory store
                scored = op.offset + len(rows)
                if not rows and op.offset:
                    counted = sql.SQL(_SCORED_COUNT).format(**parts)
                    scored = int(conn.execute(counted, params).fetchone()["n"])
                unscored = sql.SQL(_LIST).format(
                    live=parts["live"],
                    scope=scope,
                    filter=sql.SQL("{} AND {}").format(where, sql.SQL(_UNSCORED)),
                )
                more_rows = conn.execute(
                    unscored, params | {"limit": op.limit - len(rows), "offset": max(0, op.offset - scored)}
                ).fetchall()
                rows += more_rows
                found += [_search_item(r, None) for r in more_rows]
        if op.refresh_ttl:
            refresh.extend(r["id"] for r in rows if r["ttl_minutes"] is not None)
        return found

    def _search_ranked(self, op: SearchOp) -> list[SearchItem]:
        """ranking="beads": our ranking per session, sessions merged by score (each on its own scale)."""
        assert op.query is not None
        items = self._versions((op.namespace_prefix,), exact=False)
        wanted = [
            v
            for v in items.values()
            if not op.filter or matches(v.current.metadata[ITEM]["value"], op.filter)
        ]
        k = (op.offset + op.limit) * (FILTER_WIDEN if op.filter else 1)
        by_fact = {v.current.id: v for v in wanted if v.indexed}
        scored: dict[uuid.UUID, tuple[float, _Versions]] = {}
        for session in sorted({v.current.session_id for v in wanted}):
            root = next((n for n in self.facts.session_namespaces(session) if n.parent_id is None), None)
            if root is None:
                continue
            for hit in self.facts.search(root, op.query, k=max(k, 1)).hits:
                versions = by_fact.get(hit.fact.id)
                if versions is not None and hit.fact.id not in scored:
                    scored[hit.fact.id] = (hit.score, versions)
        ranked: list[tuple[float | None, _Versions]] = [
            (s, v) for s, v in sorted(scored.values(), key=lambda sv: sv[0], reverse=True)
        ]
        kept = ranked[op.offset : op.offset + op.limit]
        if len(kept) < op.limit:
            skipped = max(0, op.offset - len(ranked))
            unscored = [v for v in wanted if not v.indexed][skipped:]
            kept += [(None, v) for v in unscored[: op.limit - len(kept)]]
        return [v.search_item(score) for score, v in kept]

    def _versions(
        self, prefixes: Sequence[tuple[str, ...]], key: str | None = None, exact: bool = True
    ) -> dict[tuple[str, str], _Versions]:
        """Each item's versions, by (session, key): in the sessions named (`exact`) or at or below them."""
        scopes: list[sql.Composable] = []
        params: dict[str, Any] = {}
        for n, prefix in enumerate(prefixes):
            if exact:
                scopes.append(sql.SQL("session_id = {}").format(sql.Placeholder(f"s{n}")))
                params[f"s{n}"] = session_of(prefix)
            else:
                scope, more = _scope(prefix)
                scopes.append(scope)
                params.update(more)
        where = sql.SQL(" OR ").join(scopes) if scopes else sql.SQL("TRUE")
        if key is not None:
            where = sql.SQL("({}) AND metadata->{}->>'key' = %(key)s").format(where, sql.Literal(ITEM))
            params["key"] = key
        query = sql.SQL(_VERSIONS).format(scope=sql.SQL("({})").format(where))
        grouped: dict[tuple[str, str], list[Fact]] = {}
        with self.facts.pool.connection() as conn:
            for row in conn.execute(query, params).fetchall():
                fact = Fact.from_row(row)
                grouped.setdefault((fact.session_id, fact.metadata[ITEM]["key"]), []).append(fact)
        return {k: _Versions(tuple(v)) for k, v in grouped.items()}

    def _list_namespaces(self, conn: Any, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        # a literal prefix narrows the scan in SQL; every condition is then checked exactly
        literal = next((c.path for c in conditions if c.match_type == "prefix" and "*" not in c.path), ())
        scope, params = _scope(tuple(literal), "f.session_id")
        rows = conn.execute(sql.SQL(_NAMESPACES).format(live=self._live(), scope=scope), params).fetchall()
        namespaces = [namespace_of(r["session_id"]) for r in rows]
        namespaces = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # -- writes --------------------------------------------------------------------------------------

    def _prepare(self, puts: Sequence[PutOp]) -> list[_Write]:
        """Each put's value as jsonb will hand it back, its texts, and their vectors (one model call)."""
        writes: list[_Write] = []
        for op in puts:
            if op.value is None:
                writes.append(_Write(op, {}, [], ""))
                continue
            _check_storable(op)
            value = json.loads(json.dumps(dict(op.value)))  # what jsonb will hand back, compared as such
            fields = self.fields if op.index is None else tuple(op.index or ())
            texts = item_texts(value, fields) if op.index is not False else []
            body = "\n".join(texts) or json.dumps(value, sort_keys=True, ensure_ascii=False)
            writes.append(_Write(op, value, texts, body))
        wanted: list[str] = []
        for w in writes:
            if w.op.value is not None:
                # a single text is also the fact's claim; several are embedded joined as well
                wanted += w.texts + ([] if len(w.texts) == 1 else [w.body])
        if not wanted:
            return writes
        embedded = iter(self.facts.embedder.embed(wanted))
        for w in writes:
            if w.op.value is None:
                continue
            w.vectors = [next(embedded) for _ in w.texts]
            w.body_vector = w.vectors[0] if len(w.texts) == 1 else next(embedded)
        return writes

    def _write(self, conn: Any, writes: Sequence[_Write]) -> None:
        """Every put and delete of a batch in one transaction: the keys locked, their current versions
        read, then deleted (or, with `history`, superseded by the new ones)."""
        eid = self.facts.embedder_id
        sessions = [session_of(w.op.namespace) for w in writes]
        keys = [w.op.key for w in writes]
        with conn.transaction():
            conn.execute(_LOCK_KEYS, {"sessions": sessions, "keys": keys})
            previous = {
                (r["session_id"], r["item"]["key"]): r
                for r in conn.execute(_PREVIOUS, {"sessions": sessions, "keys": keys}).fetchall()
            }
            replaced: list[tuple[uuid.UUID, uuid.UUID]] = []
            gone: list[tuple[str, str]] = []
            rows: list[dict[str, Any]] = []
            item_vectors: list[tuple[uuid.UUID, int, int, Any]] = []
            fact_vectors: list[tuple[uuid.UUID, Sequence[float]]] = []
            for session, w in zip(sessions, writes, strict=True):
                before = previous.get((session, w.op.key))
                if w.op.value is None:
                    gone.append((session, w.op.key))
                    continue
                indexed = bool(w.texts)
                if (
                    self.history_kept
                    and before is not None
                    and before["item"]["value"] == w.value
                    and before["item"].get("indexed", True) == indexed
                ):
                    continue  # keeping history, the value already stored is not a new version
                meta: dict[str, Any] = {
                    "key": w.op.key,
                    "namespace": list(w.op.namespace),
                    "value": w.value,
                    "indexed": indexed,
                }
                ns = namespace_id(session, ())
                # a fresh key per write: the same value put again after another is a new version
                source_key = f"store:{w.op.key}:{uuid.uuid4().hex}"
                fid = fact_id(session, ns, Source.REMEMBER_TOOL.value, source_key, w.body)
                if before is not None:
                    meta["created_at"] = before["created_at"].isoformat()
                    if self.history_kept:
                        replaced.append((fid, before["id"]))
                    else:
                        gone.append((session, w.op.key))
                ttl = w.op.ttl if isinstance(w.op.ttl, int | float) else None
                rows.append(
                    {
                        "id": fid,
                        "session": session,
                        "ns": ns,
                        "source_key": source_key,
                        "body": w.body,
                        "metadata": Jsonb({ITEM: meta}),
                        "ttl": ttl,
                    }
                )
                fact_vectors.append((fid, w.body_vector))
                item_vectors += [(fid, eid, n, vectors.as_vector(v)) for n, v in enumerate(w.vectors)]
            with conn.pipeline():
                if gone:
                    conn.execute(_DELETE, {"sessions": [s for s, _ in gone], "keys": [k for _, k in gone]})
                with conn.cursor() as cur:
                    written = sorted({r["session"] for r in rows})
                    if written:
                        cur.executemany(
                            _INSERT_ROOT, [(namespace_id(s, ()), s, namespace_id(s, ())) for s in written]
                        )
                    if rows:
                        cur.executemany(_INSERT_ITEM, rows)
                    if item_vectors:
                        cur.executemany(_INSERT_ITEM_VECTOR, item_vectors)
                vectors.write_fact_vectors(conn, eid, fact_vectors)
                for s in written:
                    vectors.mark_written(conn, s, eid)
            for new, old in replaced:
                revisions.supersede(conn, new, old, eid, _ANY_SIMILARITY)


class AsyncBeadsStore(AsyncBatchedBaseStore):
    """`BeadsStore` behind LangGraph's `AsyncBatchedBaseStore`, as `AsyncPostgresStore` is: async
    calls made at once are gathered into one `batch` (one connection, one statement per kind of
    read, one transaction for the writes), and the sync methods work from other threads (from the
    event loop's own thread they raise, as LangGraph's async stores do). Build it inside a running
    event loop."""

    supports_ttl: bool = True

    def __init__(self, store: BeadsStore) -> None:
        super().__init__()
        self.store = store
        # the wrapped store's own dict: a setting changed on one (omit_expired, say) holds for both
        self.ttl_config = store.ttl_config
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def index_config(self) -> IndexConfig:
        return self.store.index_config

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.store.abatch(ops)

    async def setup(self) -> None:
        await asyncio.to_thread(self.store.setup)

    async def sweep_ttl(self) -> int:
        return await asyncio.to_thread(self.store.sweep_ttl)

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Sweep every `sweep_interval_minutes` (default: the TTL config's, else 5) until stopped."""
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        interval = sweep_interval_minutes or (self.store.ttl_config or {}).get("sweep_interval_minutes") or 5

        async def run() -> None:
            while True:
                await asyncio.sleep(float(interval) * 60)
                await self.sweep_ttl()

        self._sweeper = asyncio.create_task(run())
        return self._sweeper

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        if self._sweeper is None:
            return True
        self._sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._sweeper), timeout)
        stopped = self._sweeper.done()
        if stopped:
            self._sweeper = None
        return stopped


__all__ = [
    "AsyncBeadsStore",
    "BeadsStore",
    "IndexEmbedder",
    "escape_like",
    "filter_sql",
    "item_text",
    "item_texts",
    "matches",
    "namespace_of",
    "session_of",
]
