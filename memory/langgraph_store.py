"""`BeadsStore`: LangGraph's `BaseStore` over the fact graph, for code written against LangGraph's
store API (`create_agent(..., store=...)`, `runtime.store`, LangMem's `manage_memory` and
`search_memory`).

- **Namespaces are sessions.** A LangGraph namespace `("memories", "alice")` is the fact graph's
  session `"memories.alice"` (labels cannot hold a period, so the mapping is one to one). A search
  under a prefix reads the sessions at or below it, matched on label boundaries with LIKE's
  metacharacters escaped, so `("user_1",)` never reads `("userX1",)` and `("a",)` never `("ab",)`.
- **An item is a fact.** Its key and value live in the fact's metadata; its text (what is embedded
  and ranked) is the value's text at the index fields: by default every string in the value, so
  LangMem's `{"content": "..."}` is stored as its sentence. Facts are `conclusion`s written by
  `remember_tool` on the user's behalf, so they never supersede a user's own claim on capture.
- **A put to an existing key keeps the old value** as a superseded version of the same claim
  (`history`), and a match on the old value finds the current one. A put of the value already there
  writes nothing. A delete is a real delete of every version of the key.
- **Search ranks with ours** (memory.retrieval: hybrid, resolved to current values, a relevance floor,
  so an unrelated query answers nothing rather than the nearest noise); without a query it lists
  items newest first, as LangGraph's PostgresStore does. Filters match the value as LangGraph's
  stores do (exact, nested, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`).

TTLs are not supported (`supports_ttl` is False: LangGraph's own `put` refuses a ttl).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from psycopg import sql

from memory import facts as fact_sql
from memory import revisions
from memory.model import Fact, Kind, Source
from memory.store import FactStore

# the metadata key under which a fact carries its item (key, namespace, value, whether it is indexed)
ITEM = "store_item"
# a put's edge needs no similarity guard: the key says the two are one claim
_ANY_SIMILARITY = -2.0
# with a filter, ask the ranking for this many times what is wanted: some hits will not match
FILTER_WIDEN = 4

# LIKE matches a session and everything below it on label boundaries; the pattern is escaped
_SESSIONS_UNDER = "(session_id = %(exact)s OR session_id LIKE %(below)s ESCAPE '\\')"
# every version of each item in the given sessions, the current one (the head) first per key
_VERSIONS = f"""
SELECT {fact_sql.FACT_COLUMNS}
FROM beads.facts
WHERE metadata ? '{ITEM}' AND status <> 'archived' AND {{scope}}
ORDER BY session_id, metadata->'{ITEM}'->>'key', (head_id = id) DESC, recorded_at DESC, id
"""
_NAMESPACES = f"""
SELECT DISTINCT session_id FROM beads.facts
WHERE metadata ? '{ITEM}' AND status <> 'archived' AND {{scope}}
"""
_DELETE = f"DELETE FROM beads.facts WHERE session_id = %(session)s AND metadata->'{ITEM}'->>'key' = %(key)s"


def session_of(namespace: tuple[str, ...]) -> str:
    """The fact graph's session for a LangGraph namespace."""
    return ".".join(namespace)


def namespace_of(session_id: str) -> tuple[str, ...]:
    return tuple(session_id.split("."))


def escape_like(text: str) -> str:
    """`text` as a LIKE literal (with ESCAPE '\\'): `%` and `_` match only themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _scope(prefix: tuple[str, ...]) -> tuple[sql.Composable, dict[str, Any]]:
    if not prefix:
        return sql.SQL("TRUE"), {}
    exact = session_of(prefix)
    return sql.SQL(_SESSIONS_UNDER), {"exact": exact, "below": escape_like(exact) + ".%"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def item_text(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What an item is ranked by: the text at `fields` ("$": every string in the value)."""
    texts: list[str] = []
    for field in fields:
        texts += _strings(value) if field == "$" else get_text_at_path(value, tokenize_path(field))
    return "\n".join(t.strip() for t in texts if t.strip())


def matches(value: Any, wanted: Any) -> bool:
    """A filter's test, as LangGraph's stores read it (JSONB semantics)."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_compare(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, Mapping) and all(matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"Unsupported operator: {operator}")
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):  # a missing or non-numeric field matches no comparison
        return False
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[operator]


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
            "created_at": min(f.recorded_at for f in self.facts),
            "updated_at": self.current.recorded_at,
        }

    def item(self) -> Item:
        return Item(**self._fields())

    def search_item(self, score: float | None = None) -> SearchItem:
        return SearchItem(**self._fields(), score=score)


class BeadsStore(BaseStore):
    """LangGraph's `BaseStore` over a `FactStore` (see the module's docstring for the mapping).

    `fields` are the paths of a value whose text is ranked (LangGraph's `index["fields"]`; a put's
    `index=[...]` overrides them for that item, and `index=False` keeps an item out of ranked search:
    it is listed after the ranked hits, unscored, as LangGraph's in-memory store does).
    """

    __slots__ = ("facts", "fields")
    supports_ttl: bool = False

    def __init__(self, facts: FactStore, *, fields: Sequence[str] = ("$",)) -> None:
        self.facts = facts
        self.fields = tuple(fields)

    # -- the two entry points ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order of kind, as LangGraph's stores do: every read sees the store as it was
        before this batch's puts, and of several puts to one key the last wins."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.facts.aio.run(self.batch, list(ops))

    # -- beyond BaseStore --------------------------------------------------------------------------

    def history(self, namespace: tuple[str, ...], key: str) -> list[Item]:
        """Every value the key has held, oldest first, the current one last (empty when absent)."""
        versions = self._versions((namespace,), key).get((session_of(namespace), key))
        if versions is None:
            return []
        ordered = sorted(versions.facts, key=lambda f: f.recorded_at)
        return [_Versions((f,)).item() for f in ordered]

    def fact(self, namespace: tuple[str, ...], key: str) -> Fact | None:
        """The fact holding the key's current value (for the fact graph's own reads: pins, edges)."""
        versions = self._versions((namespace,), key).get((session_of(namespace), key))
        return None if versions is None else versions.current

    # -- the ops -----------------------------------------------------------------------------------

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

    def _get(self, op: GetOp) -> Item | None:
        versions = self._versions((op.namespace,), op.key).get((session_of(op.namespace), op.key))
        return None if versions is None else versions.item()

    def _put(self, op: PutOp) -> None:
        session = session_of(op.namespace)
        if op.value is None:
            with self.facts.pool.connection() as conn:
                conn.execute(_DELETE, {"session": session, "key": op.key})
            return
        value = json.loads(json.dumps(dict(op.value)))  # what jsonb will hand back, compared as such
        fields = self.fields if op.index is None else tuple(op.index or ())
        text = item_text(value, fields) if op.index is not False else ""
        indexed = bool(text)
        previous = self._versions((op.namespace,), op.key).get((session, op.key))
        if previous is not None:
            meta = previous.current.metadata[ITEM]
            if meta["value"] == value and meta.get("indexed", True) == indexed:
                return  # the value already stored: nothing to write
        metadata = {
            ITEM: {"key": op.key, "namespace": list(op.namespace), "value": value, "indexed": indexed}
        }
        result = self.facts.remember_result(
            self.facts.root(session),
            text or json.dumps(value, sort_keys=True, ensure_ascii=False),
            kind=Kind.CONCLUSION,
            source=Source.REMEMBER_TOOL,
            # a fresh key per write: the same value put again after another is a new version
            source_key=f"store:{op.key}:{uuid.uuid4().hex}",
            acting_on_behalf_of="user",
            metadata=metadata,
        )
        if previous is not None:
            with self.facts.pool.connection() as conn:
                revisions.supersede(
                    conn, result.facts[0].id, previous.current.id, self.facts.embedder_id, _ANY_SIMILARITY
                )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        items = self._versions((op.namespace_prefix,), exact=False)
        wanted = [
            v
            for v in items.values()
            if not op.filter or matches(v.current.metadata[ITEM]["value"], op.filter)
        ]
        if not op.query:
            wanted.sort(key=lambda v: v.current.recorded_at, reverse=True)
            window = wanted[op.offset : op.offset + op.limit]
            return [v.search_item() for v in window]
        ranked = self._ranked(op, wanted)
        kept = ranked[op.offset : op.offset + op.limit]
        if len(kept) < op.limit:  # unindexed items come last, unscored, as in LangGraph's in-memory store
            skipped = max(0, op.offset - len(ranked))
            unscored = [v for v in wanted if not v.indexed][skipped:]
            kept += [(None, v) for v in unscored[: op.limit - len(kept)]]
        return [v.search_item(score) for score, v in kept]

    def _ranked(self, op: SearchOp, items: Sequence[_Versions]) -> list[tuple[float | None, _Versions]]:
        """Our ranking, per session; sessions merged by score (each ranked on its own scale)."""
        assert op.query is not None
        k = (op.offset + op.limit) * (FILTER_WIDEN if op.filter else 1)
        by_fact = {v.current.id: v for v in items if v.indexed}
        scored: dict[uuid.UUID, tuple[float, _Versions]] = {}
        for session in sorted({v.current.session_id for v in items}):
            root = next((n for n in self.facts.session_namespaces(session) if n.parent_id is None), None)
            if root is None:
                continue
            for hit in self.facts.search(root, op.query, k=max(k, 1)).hits:
                versions = by_fact.get(hit.fact.id)
                if versions is not None and hit.fact.id not in scored:
                    scored[hit.fact.id] = (hit.score, versions)
        ordered = sorted(scored.values(), key=lambda sv: sv[0], reverse=True)
        return [(score, v) for score, v in ordered]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        # a literal prefix narrows the scan in SQL; every condition is then checked exactly
        literal = next((c.path for c in conditions if c.match_type == "prefix" and "*" not in c.path), ())
        scope, params = _scope(tuple(literal))
        with self.facts.pool.connection() as conn:
            rows = conn.execute(sql.SQL(_NAMESPACES).format(scope=scope), params).fetchall()
        namespaces = [namespace_of(r["session_id"]) for r in rows]
        namespaces = [ns for ns in namespaces if all(_namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]


__all__ = ["BeadsStore", "escape_like", "item_text", "matches", "namespace_of", "session_of"]
