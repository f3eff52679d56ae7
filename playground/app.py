"""The playground app. For now: a page that says what is coming, so the run command starts and answers."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

app = FastAPI(title="langgraph-beads-memory playground")

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>langgraph-beads-memory playground</title></head>
<body><h1>langgraph-beads-memory playground</h1>
<p>Coming next: one message, two lanes (LangGraph's stock memory against the fact graph), side by side.</p>
</body></html>"""


@app.get("/", response_class=HTMLResponse)
def index() -> str:
    return _PAGE


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
