"""Hardening: load, faults and bad input against real servers, with figures.

    uv run --extra dev python -m bench.reliability           # the long run (about 15 minutes)
    uv run --extra dev python -m bench.reliability --quick   # small sizes (what CI runs as tests)

Each scenario lives in its own module (load, crash, outage, sse_reconnect, bad_input, isolation) and
returns its figures and a list of violations; `report` writes the table.
"""
