"""Pools that fit: an app whose connections cannot fit the server's max_connections refuses to start,
saying so, instead of starting and failing later under load when its pools grow."""

from __future__ import annotations

import psycopg
import pytest
from playground_helpers import play_db, playground_template, running, scalar

from memory.errors import ConfigurationError
from playground.settings import DEDICATED_CONNECTIONS, PlaygroundSettings

__all__ = ["play_db", "playground_template"]  # fixtures


def server_room(db_url: str) -> int:
    """The connections a non-reserved role may open on the test server."""
    return int(
        scalar(
            db_url,
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
            " - coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0)",
        )
    )


def test_a_process_counts_its_pools_and_its_own_connections() -> None:
    settings = PlaygroundSettings(workers=4, facts_pool_size=5, stock_pool_size=2)
    assert settings.app_pool_size == 8 + 3 * 4  # the default follows the workers
    assert settings.connections_per_process == 20 + 5 + 2 + DEDICATED_CONNECTIONS
    assert PlaygroundSettings(pool_size=6).app_pool_size == 6


async def test_pools_larger_than_the_server_allows_refuse_to_start(play_db: str) -> None:
    room = server_room(play_db)
    with pytest.raises(ConfigurationError, match=r"this server allows .*max_connections") as refused:
        async with running(play_db, pool_size=room):  # with the other pools, more than there is
            pass
    assert "PLAYGROUND_WORKERS" in str(refused.value)


async def test_expected_processes_times_the_pools_must_fit(play_db: str) -> None:
    per_process = PlaygroundSettings(workers=2).connections_per_process
    room = server_room(play_db)
    processes = room // per_process + 1
    with pytest.raises(ConfigurationError, match=rf"{processes} app processes \(PLAYGROUND_PROCESSES\)"):
        async with running(play_db, workers=2, processes=processes):
            pass
    async with running(play_db, workers=2, processes=room // per_process):
        pass  # as many as fit: it starts


async def test_connections_in_use_count_against_what_is_left(play_db: str) -> None:
    room = server_room(play_db)
    per_process = PlaygroundSettings(workers=1).connections_per_process
    others = "SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend'"
    in_use = int(scalar(play_db, others))  # (less the connection asking)
    held = [psycopg.connect(play_db) for _ in range(max(0, room - in_use - per_process + 1))]  # one too many
    try:
        with pytest.raises(ConfigurationError, match=r"the server has \d+ left \(.*in use\)"):
            async with running(play_db, workers=1):
                pass
    finally:
        for conn in held:
            conn.close()
