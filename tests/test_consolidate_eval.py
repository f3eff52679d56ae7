"""The harness options: --consolidate and --expire-days (each in a copy of the ingest)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eval_samples import write_beam, write_locomo
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.eval.runner import ROWS_FILE, RUN_INFO_FILE, Evaluation, RunConfig, read_rows, write_run_info

pytestmark = pytest.mark.bench


def config(tmp_path: Path, url: str, **overrides: Any) -> RunConfig:
    settings: dict[str, Any] = {
        # each session says its small talk again in its own words (one said word for word is not stored
        # twice): restatements for consolidation to merge
        "datasets": [("locomo", write_locomo(tmp_path, own_filler=True)), ("beam", write_beam(tmp_path))],
        "out_dir": tmp_path / "out",
        "budgets": (60, 200),
        "arms": ("facts",),
        "embedder": "fake-64",
        "database_url": url,
        "show_progress": False,
    }
    settings.update(overrides)
    return RunConfig(**settings)


def archived(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM beads.facts WHERE status = 'archived'").fetchone()[0]


def test_consolidate_merges_in_a_copy_and_never_in_the_shared_ingest(
    tmp_path: Path, pg_server_url: str
) -> None:
    cfg = config(tmp_path, pg_server_url, consolidate=True)
    records = Evaluation(cfg).run()
    write_run_info(cfg.out_dir, cfg, records, 0.0)
    try:
        for record in records:
            assert record.database is not None and record.database.endswith("_consolidated")
            base = record.database.removesuffix("_consolidated")
            copy_url = make_conninfo(pg_server_url, dbname=record.database)
            base_url = make_conninfo(pg_server_url, dbname=base)
            merged = sum(c["archived"] for c in record.consolidation)
            # the samples restate their filler lines across sessions: those restatements are merged
            assert merged > 0 and archived(copy_url) == merged
            assert archived(base_url) == 0  # the cached ingest other runs reuse is untouched
        rows = read_rows(tmp_path / "out" / ROWS_FILE)
        assert rows and {r["arm"] for r in rows} == {"facts"}
        info = json.loads((tmp_path / "out" / RUN_INFO_FILE).read_text())
        assert info["runs"][-1]["consolidate"] is True
        # a second run clones afresh from the shared ingest and merges the same amount
        again = Evaluation(
            config(tmp_path, pg_server_url, consolidate=True, out_dir=tmp_path / "again")
        ).run()
        assert [sum(c["archived"] for c in r.consolidation) for r in again] == [
            sum(c["archived"] for c in r.consolidation) for r in records
        ]
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            for record in records:
                for name in {record.database, (record.database or "").removesuffix("_consolidated")}:
                    if name:
                        admin.execute(
                            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                        )


def test_expiry_replays_the_conversations_use_and_expires_in_a_copy(
    tmp_path: Path, pg_server_url: str
) -> None:
    cfg = config(tmp_path, pg_server_url, datasets=[("locomo", write_locomo(tmp_path))], expire_days=14.0)
    records = Evaluation(cfg).run()
    [record] = records
    try:
        [done] = record.consolidation
        assert done["retrievals_replayed"] > 0 and done["expired"] > 0 and done["horizon_days"] == 14.0
        copy_url = make_conninfo(pg_server_url, dbname=record.database or "")
        base_url = make_conninfo(pg_server_url, dbname=(record.database or "").removesuffix("_consolidated"))
        assert archived(copy_url) == done["expired"] and archived(base_url) == 0
        with psycopg.connect(copy_url) as conn:
            # the sample ends on 4 February 2023: the cutoff is 14 days before
            end = conn.execute("SELECT max(valid_from) FROM beads.facts").fetchone()[0]
            state = conn.execute(
                """
                SELECT f.status, f.recorded_at < %(cutoff)s AS old,
                       coalesce(r.last_retrieved_at >= %(cutoff)s, false) AS used
                  FROM beads.facts f LEFT JOIN beads.retrievals r ON r.fact_id = f.id
                 WHERE f.kind IN ('user_input', 'conclusion')
                """,
                {"cutoff": end - timedelta(days=14)},
            ).fetchall()
        # archived: exactly the facts dated before the horizon that no replayed turn retrieved since
        assert {(status == "archived") == (old and not used) for status, old, used in state} == {True}
        assert any(used for _, old, used in state if old)  # and some old facts were kept by use
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            for name in {record.database, (record.database or "").removesuffix("_consolidated")}:
                if name:
                    admin.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                    )
