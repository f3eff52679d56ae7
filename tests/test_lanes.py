"""Every test runs in exactly one lane (tests/conftest.py), so that `-m` can pick a fast subset that
still means something: docs/internals/development.md has the commands."""

from __future__ import annotations

import pytest
from conftest import LANES, lane_from_fixtures, lanes_of


def test_every_collected_test_runs_in_exactly_one_lane(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    assert request.node in items
    wrong = {item.nodeid: sorted(lanes_of(item)) for item in items if len(lanes_of(item)) != 1}
    assert not wrong, f"tests in no lane or in several: {wrong}"


def test_the_lanes_are_registered_markers(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":", 1)[0].strip() for line in pytestconfig.getini("markers")}
    assert {*LANES, "slow"} <= registered
    # an unregistered mark is an error, so a misspelt lane cannot quietly leave a test out of `-m`
    assert "--strict-markers" in pytestconfig.getini("addopts")


def test_a_tests_fixtures_decide_its_lane_when_its_file_does_not() -> None:
    assert lane_from_fixtures({"tmp_path"}) == "unit"
    assert lane_from_fixtures({"store", "pool", "db_url", "template_db", "pg_server_url"}) == "postgres"
    # every app test runs on Postgres too: the app is the narrower lane
    assert lane_from_fixtures({"play_db", "playground_template", "pg_server_url"}) == "app"
