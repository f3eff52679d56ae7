"""The OpenAPI document says what the API does: schemathesis, with every check it has (`-c all`), runs
its phases (examples, coverage, fuzzing, stateful) against the real app on the test database over
HTTP and finds nothing. Bounded: a fixed seed and a few examples per operation, well under a minute.

It runs as its command line does (`schemathesis run URL -c all`), the way a reviewer would run it, so
the figures here and theirs are the same kind. Once without a key on loopback (the header is not
needed), once with a key sent as the bearer header (then a request without it must be refused).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from playground_helpers import play_db, playground_template, serve, settings_for

from playground.app import create_app

__all__ = ["play_db", "playground_template"]  # fixtures

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
KEY = "k" * 12 + "-schemathesis-key"
SEED = "20261203"
OPERATIONS = 12


def run_schemathesis(base: str, tmp_path: Path, max_examples: int, *extra: str) -> str:
    command = [
        str(SCHEMATHESIS),
        "run",
        f"{base}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(max_examples),
        "--seed",
        SEED,
        "--generation-database",
        "none",  # nothing written next to the tests
        "--workers",
        "1",
        "--no-color",
        # hypothesis times its own data generation, and the API's text patterns are slow to generate
        # for on a loaded machine: a check of the clock, which no test here may depend on
        "--suppress-health-check=too_slow",
        *extra,
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False)
    output = result.stdout + result.stderr
    summary = output[output.rfind("SUMMARY") :] if "SUMMARY" in output else output[-3000:]
    print(summary)  # the figures: operations, phases, checks, test cases, failures
    assert result.returncode == 0, output[-8000:]
    assert f"Tested: {OPERATIONS}" in output, summary
    assert not re.search(r"\d+ failures?", summary.replace("0 failures", "")), summary
    return summary


@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is a dev dependency")
def test_schemathesis_finds_nothing_without_a_key_on_loopback(play_db: str, tmp_path: Path) -> None:
    with serve(create_app(settings_for(play_db, workers=1))) as base:
        run_schemathesis(base, tmp_path, 8)


@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis is a dev dependency")
def test_schemathesis_finds_nothing_with_the_key(play_db: str, tmp_path: Path) -> None:
    app = create_app(settings_for(play_db, workers=1, api_key=KEY))
    with serve(app) as base:
        run_schemathesis(base, tmp_path, 3, "--header", f"Authorization: Bearer {KEY}")
