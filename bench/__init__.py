"""Benchmarks of the fact graph against LangGraph's PostgresStore, on the embedded Postgres.

Run `python -m bench.search_latency --help`. Results land in `bench/results/`. The evaluation harness is
`bench.eval` (`python -m bench.eval --help`).
"""
