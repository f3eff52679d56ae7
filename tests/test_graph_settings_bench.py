"""The graph-settings bench's figures, on a small table of seeded vectors in two sessions."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from bench.graph_settings import compare

pytestmark = pytest.mark.bench


def test_each_setting_gets_a_row_a_round_and_a_small_graph_finds_the_nearest_claims(
    empty_db_url: str,
) -> None:
    rng = np.random.default_rng(5)
    vectors = [(f"s{i % 2}", rng.normal(size=16).astype(np.float32)) for i in range(400)]
    queries = [(f"s{i % 2}", rng.normal(size=16).astype(np.float32)) for i in range(10)]
    with psycopg.connect(empty_db_url, autocommit=True) as conn:
        results = compare(conn, vectors, queries, ["16:64", "8:32"], rounds=2)
        assert conn.execute("SELECT count(*) FROM vectors WHERE indexed").fetchone() == (400,)
    assert set(results) == {"16:64", "8:32"}
    for runs in results.values():
        assert len(runs) == 2
        for figures in runs:
            # 200 vectors a session: the filtered walk finds (nearly) every one of a question's 32
            # nearest of its own session (a graph's levels are drawn at random, so not always all)
            assert figures["recall_at_32"] >= 0.95
            assert set(figures) == {"build_s", "insert_ms", "recall_at_32", "query_p50_ms", "query_p95_ms"}
