"""Benchmarks of the fact graph against LangGraph's PostgresStore, on the embedded Postgres.

Run `python -m bench.search_latency --help`. Results land in `results/` (the latency bench's in `results/latency/`). The evaluation harness is
`bench.eval` (`python -m bench.eval --help`).
"""
