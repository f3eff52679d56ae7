"""The API's OpenAPI schema (/openapi.json, the /api/ routes only) and its Swagger page (/docs).

The page is Swagger UI served from the app's own files (static/vendor/swagger-ui, copied from the
npm package swagger-ui-dist at a pinned version; see static/vendor/VERSIONS.md) and started by
static/swagger-init.js, so it renders offline and loads nothing from another host. It runs under the
pages' policy with one addition: Swagger UI's stylesheet draws its icons as data: images. It holds
no data of its own: it reads /openapi.json and calls the API with the key you give it (Authorize).

The schema says what the API does: the bearer key is a security scheme that may be left out (the
API needs it only when PLAYGROUND_API_KEY is set), and each route lists the refusals it can answer.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse

from playground.api.auth import bearer
from playground.api.errors import is_api_path

DESCRIPTION = """The memory over HTTP: capture messages, search the ranked block, read a claim's history,
remember, pin and forget. Errors are JSON: `{"error": CODE, "detail": SENTENCE}`. With
PLAYGROUND_API_KEY set, send `Authorization: Bearer <key>`; without it the API answers on loopback
addresses only, and needs no header. One key opens every session: the API is for one trusted backend."""

# the pages' policy (playground.security), but for the data: images of Swagger UI's stylesheet
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>langgraph-beads-memory API</title>
  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="/static/vendor/swagger-ui/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui" data-openapi-url="/openapi.json"></div>
  <script src="/static/vendor/swagger-ui/swagger-ui-bundle.js"></script>
  <script src="/static/swagger-init.js"></script>
</body>
</html>
"""


def api_schema(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI schema of the /api/ routes (the playground's HTML routes are left out)."""
    schema = get_openapi(
        title="langgraph-beads-memory API", version="1", description=DESCRIPTION, routes=app.routes
    )
    schema["paths"] = {path: item for path, item in schema["paths"].items() if is_api_path(path)}
    # the key may be left out ({}), as on loopback without PLAYGROUND_API_KEY: a scheme, not a header
    optional_key: list[dict[str, list[str]]] = [{bearer.scheme_name: []}, {}]
    for item in schema["paths"].values():
        for operation in item.values():
            if isinstance(operation, dict) and "security" in operation:
                operation["security"] = optional_key
    # the message limit is a setting: a query, a remembered text and a message that is not a tool
    # result are refused past it (a tool result is clipped instead)
    limit = app.state.settings.max_message_chars
    models = schema["components"]["schemas"]
    models["SearchRequest"]["properties"]["query"]["maxLength"] = limit
    models["RememberRequest"]["properties"]["text"]["maxLength"] = limit
    models["MessageIn"]["else"]["properties"]["text"] = {"maxLength": limit}
    return schema


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
        return HTMLResponse(DOCS_PAGE, headers={"content-security-policy": DOCS_POLICY})
