"""Property: a namespace reads itself, its ancestors and (demoted) its subtree; never a sibling's
branch, never another session's, whatever the names look like."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from psycopg_pool import ConnectionPool

# the adversarial namespace trees the reliability suite also draws from
from bench.reliability.isolation import trees
from memory.embedders import FakeEmbedder
from memory.model import Kind, Namespace
from memory.store import FactStore


def build(
    store: FactStore, session: str, nodes: list[tuple[int | None, str]]
) -> list[tuple[Namespace, uuid.UUID]]:
    built: list[tuple[Namespace, uuid.UUID]] = []
    for parent, label in nodes:
        ns = store.root(session) if parent is None else store.fork(built[parent][0], label, agent_id=label)
        fact = store.remember(
            ns, f"Finding about the shared topic from {label!r} in {ns.id}.", kind=Kind.USER_INPUT
        )
        built.append((ns, fact.id))
    return built


def ancestors(nodes: list[tuple[int | None, str]], i: int) -> set[int]:
    out = {i}
    while nodes[i][0] is not None:
        i = nodes[i][0]
        out.add(i)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees(), other=trees())
def test_visibility_is_lineage_plus_demoted_subtree(pool: ConnectionPool, tree, other) -> None:  # type: ignore[no-untyped-def]
    store = FactStore(pool, FakeEmbedder(16))
    store.setup()
    run = uuid.uuid4().hex[:6]  # examples share one database: keep their sessions apart
    session, nodes = tree
    mine = build(store, f"{session}{run}", nodes)
    # a second session with the same shape and adversarial names must stay invisible
    theirs = build(store, f"{other[0]}{run}x", other[1])
    foreign = {fid for _, fid in theirs}

    for i, (ns, _) in enumerate(mine):
        up = ancestors(nodes, i)
        down = {j for j in range(len(nodes)) if i in ancestors(nodes, j)} - {i}
        result = store.search(
            ns, "Finding about the shared topic", k=50, relevance_floor=-10.0, per_agent_cap=50
        )
        got = {h.fact.id: h.demoted for h in result.hits}
        expected = {mine[j][1]: False for j in up} | {mine[j][1]: True for j in down}
        assert got == expected
        assert not foreign & got.keys()
