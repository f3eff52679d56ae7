"""Property: a namespace reads itself, its ancestors and (demoted) its subtree; never a sibling's
branch, never another session's, whatever the names look like."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from psycopg_pool import ConnectionPool

# the adversarial namespace trees the reliability suite also draws from
from bench.reliability.isolation import build_tree, seen_and_expected, trees
from memory.embedders import FakeEmbedder
from memory.graph.store import FactStore


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees(), other=trees())
def test_visibility_is_lineage_plus_demoted_subtree(pool: ConnectionPool, tree, other) -> None:  # type: ignore[no-untyped-def]
    store = FactStore(pool, FakeEmbedder(16))
    store.setup()
    run = uuid.uuid4().hex[:6]  # examples share one database: keep their sessions apart
    session, nodes = tree
    mine = build_tree(store, f"{session}{run}", nodes)
    # a second session with the same shape and adversarial names must stay invisible
    theirs = build_tree(store, f"{other[0]}{run}x", other[1])
    foreign = {fact.id for _, fact in theirs}

    for i in range(len(mine)):
        got, expected = seen_and_expected(store, mine, nodes, i)
        assert got == expected
        assert not foreign & got.keys()
