"""The API's OpenAPI schema (/openapi.json, the /api/ routes only) and its Swagger page (/docs).

The playground's pages forbid inline scripts and anything from elsewhere (playground.security); the
Swagger page is FastAPI's, which loads Swagger UI from its CDN and starts it with one inline script.
That page alone gets a policy allowing the CDN and that one script, by its hash; it holds no data of
its own (it reads /openapi.json and calls the API with the key you give it). Offline, the page
cannot load, and /openapi.json is still there.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse

from playground.api.errors import is_api_path

CDN = "https://cdn.jsdelivr.net"
FAVICON_HOST = "https://fastapi.tiangolo.com"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)

DESCRIPTION = """The memory over HTTP: capture messages, search the ranked block, read a claim's history,
remember, pin and forget. Errors are JSON: `{"error": CODE, "detail": SENTENCE}`. With
PLAYGROUND_API_KEY set, send `Authorization: Bearer <key>`; without it the API answers on loopback
addresses only."""


def api_schema(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI schema of the /api/ routes (the playground's HTML routes are left out)."""
    schema = get_openapi(
        title="langgraph-beads-memory API", version="1", description=DESCRIPTION, routes=app.routes
    )
    schema["paths"] = {path: item for path, item in schema["paths"].items() if is_api_path(path)}
    return schema


def _policy(html: str) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'self'; script-src 'self' {CDN} {hashes}; style-src 'self' {CDN} 'unsafe-inline'; "
        f"img-src 'self' data: {FAVICON_HOST}; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


def add_docs(app: FastAPI) -> None:
    """Serve /openapi.json and /docs (the app is built with FastAPI's own docs off)."""
    schema: dict[str, Any] = {}

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        if not schema:
            schema.update(api_schema(app))
        return JSONResponse(schema)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(openapi_url="/openapi.json", title="langgraph-beads-memory API")
        html = bytes(page.body).decode()
        return HTMLResponse(html, headers={"content-security-policy": _policy(html)})
