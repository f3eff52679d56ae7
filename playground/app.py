"""The playground: one message, two memories, side by side.

    uv run uvicorn playground.app:app

`create_app(settings)` builds the app; its lifespan opens the pools, applies the library's and the
playground's migrations, picks the model and the embedder, starts the turn workers (which pick up
turns an earlier process left unfinished) and puts the shared objects on `app.state.runtime`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from memory.errors import BeadsMemoryError
from playground.access import FailedAttempts
from playground.api.auth import log_api_state
from playground.api.docs import add_docs
from playground.api.errors import ApiError, api_error_response, error_response, is_api_path, library_error
from playground.api.routes import api_router
from playground.render import STATIC_DIR, make_templates
from playground.routes.actions import actions_router
from playground.routes.login import login_router
from playground.routes.pages import pages_router
from playground.routes.partials import partials_router
from playground.routes.streams import streams_router
from playground.security import SecurityMiddleware
from playground.settings import PlaygroundSettings
from playground.startup import open_runtime

_log = logging.getLogger(__name__)


def create_app(settings: PlaygroundSettings | None = None) -> FastAPI:
    settings = settings or PlaygroundSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings) as runtime:
            app.state.runtime = runtime
            log_api_state(settings)
            yield

    # the schema and the Swagger page are the API's (playground.api.docs), not the HTML routes'
    app = FastAPI(
        title="langgraph-beads-memory playground",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.templates = make_templates()
    # wrong keys per (client, key tried), shared by the login form and the API's bearer check
    app.state.access_attempts = FailedAttempts(settings.auth_failures_per_minute)
    app.add_middleware(SecurityMiddleware, settings=settings, attempts=app.state.access_attempts)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    routers = (
        pages_router(),
        login_router(),
        partials_router(),
        actions_router(),
        streams_router(),
        api_router(),
    )
    for router in routers:
        app.include_router(router)
    add_docs(app)

    # /api/ answers every error as JSON (playground.api.errors); the pages keep plain text
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request))
        if is_api_path(request.url.path):
            return error_response(exc.status_code, str(exc.detail), headers=headers)
        # plain text, never a page: an htmx request swaps nothing on these codes (see base.html)
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        if is_api_path(request.url.path):
            return error_response(422, f"Invalid request: {problems}")
        return PlainTextResponse(f"Invalid request: {problems}", status_code=422)

    @app.exception_handler(psycopg.OperationalError)
    async def database_unreachable(request: Request, exc: psycopg.OperationalError) -> Response:
        # the database went away (or its pool is exhausted): say so, never a bare 500
        headers = {"Retry-After": "2"}
        if is_api_path(request.url.path):
            return error_response(
                503, "The database is unreachable right now; try again in a moment.", headers=headers
            )
        message = "The database is unreachable right now; try again in a moment. Running turns resume."
        return PlainTextResponse(message, status_code=503, headers=headers)

    @app.exception_handler(ApiError)
    async def api_refusal(request: Request, exc: ApiError) -> Response:
        return api_error_response(exc)

    @app.exception_handler(BeadsMemoryError)
    async def library_refusal(request: Request, exc: BeadsMemoryError) -> Response:
        # the pages catch what they expect; only the API maps the rest to client errors
        if not is_api_path(request.url.path):
            raise exc
        return api_error_response(library_error(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        _log.exception("unhandled error on %s %s", request.method, request.url.path)
        if is_api_path(request.url.path):
            return error_response(500, "Something went wrong on the server; it is logged.")
        return PlainTextResponse("Internal Server Error", status_code=500)

    return app


#: the methods a 405's Allow header may name
METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method some route takes at this path, found by asking the routes as each method would:
    Starlette's own 405 names only the first route's, so a path with two routes (a pin's POST and
    DELETE) was said to take one."""
    allowed = []
    for method in METHODS:
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in app.router.routes):
            allowed.append(method)
    return allowed


def __getattr__(name: str) -> FastAPI:
    # `uvicorn playground.app:app` builds the app from the environment on first use, not at import
    if name == "app":
        application = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
