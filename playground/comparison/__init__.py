"""The comparison the playground runs: two lanes built alike, so that only the memory differs.

- `lanes`: both agents (stock: LangGraph's PostgresStore with LangMem's tools; ours:
  BeadsMemoryMiddleware), their shared prompts, tools and research sub-agent.
- `stock`: LangGraph's PostgresStore set up the way its users set it up.
- `websearch`: the web-search tool both lanes get.
- `toolcall_bench`: how well a chat model calls each lane's real tools.

The library (`memory`) never imports this package; it needs nothing of the web app either, so the
benchmarks and tests build lanes without FastAPI running.
"""
