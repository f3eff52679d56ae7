"""The playground: a FastAPI app that races our memory against LangGraph's stock memory, live.

It needs the `playground` extra (which brings `embedded` and `local` too); this checks for it once,
before any module of the app imports FastAPI or LangMem.
"""

from memory.extras import require_extra

require_extra(
    "playground",
    ("fastapi", "jinja2", "sse_starlette", "uvicorn", "langmem", "ddgs", "langgraph.checkpoint.postgres"),
    "the playground",
)
