"""Bad input, one case per row: a clear 4xx, or stored verbatim and rendered escaped; never a 5xx, and
the Content-Security-Policy on every response.

The whole table is sent once to one app (served over HTTP in this process, with a web search rigged
to return a megabyte) and, for the cases that need a key, to a second app on the same database with
one; each case is then its own test, so a failure names its case.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from playground_helpers import playground_template, settings_for
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.reliability.bad_input import CASES, KEY, rig_oversized_tool, run_bad_inputs
from bench.reliability.servers import app_in_thread
from playground.settings import PlaygroundSettings

__all__ = ["playground_template"]  # fixtures

LIMIT = PlaygroundSettings.model_fields["max_message_chars"].default
TABLE = CASES(LIMIT)


@pytest.fixture(scope="module")
def outcome(pg_server_url: str, playground_template: str) -> Iterator[dict[str, Any]]:
    name = f"bad_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(playground_template)
            )
        )
    db = make_conninfo(pg_server_url, dbname=name)
    try:
        keyed = settings_for(db, max_message_chars=LIMIT, api_key=KEY)
        with (
            app_in_thread(settings_for(db, max_message_chars=LIMIT)) as (app, base),
            app_in_thread(keyed) as (keyed_app, keyed_base),
        ):
            for each in (app, keyed_app):  # either may run a turn: both workers claim from one queue
                rig_oversized_tool(each.state.runtime)
            yield run_bad_inputs(base, db, max_message_chars=LIMIT, keyed_base=keyed_base)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_the_table_covers_every_kind_of_bad_input() -> None:
    ids = [case.id for case in TABLE]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    for kind in (
        "msg-empty",
        "msg-whitespace",
        "msg-1mb",
        "msg-nul",
        "msg-invalid-utf8",
        "msg-lone-surrogate",
        "msg-rtl",
        "msg-zero-width",
        "title-sql",
        "msg-chat-id-sql",
        "page-chat-id-traversal",
        "title-traversal",
        "msg-script",
        "msg-img-exfil",
        "title-script",
        "title-img-exfil",
        "page-unknown-chat",
        "turn-of-other-chat",
        "method-get-messages",
        "tool-oversized-result",
        "api-session-traversal",
        "api-fact-unknown",
        "api-json-broken",
        "api-missing-text",
        "api-1mb",
        "api-lone-surrogate",
        "api-cross-origin",
        "api-script",
        "host-page",
        "host-write",
        "host-stream",
        "host-api-forget",
        "key-page",
        "key-stream",
        "key-write",
        "key-cookie-cross-site",
        "key-cookie-on-api",
        "api-as-of-year-1",
        "api-as-of-year-9999",
    ):
        assert kind in ids


@pytest.mark.parametrize("case_id", [case.id for case in TABLE])
def test_bad_input(outcome: dict[str, Any], case_id: str) -> None:
    [row] = [o for o in outcome["outcomes"] if o["id"] == case_id]
    assert row["status"] < 500
    assert row["ok"], row


def test_what_was_stored_is_verbatim_and_rendered_escaped(outcome: dict[str, Any]) -> None:
    # the checks after the table ran: storage, escaping on pages and streams, nothing from refusals,
    # and the 1 MB tool result clipped where it is shown and capped where it is captured
    assert outcome["server_errors"] == 0
    assert outcome["violations"] == []
    assert outcome["refused_4xx"] + outcome["stored_verbatim"] == outcome["cases"] == len(TABLE)
