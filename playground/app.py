"""The playground: one message, two memories, side by side.

    uv run uvicorn playground.app:app

`create_app(settings)` builds the app; its lifespan opens the pools, applies the library's and the
playground's migrations, picks the model and the embedder, starts the turn workers (which pick up
turns an earlier process left unfinished) and puts the shared objects on `app.state.runtime`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from playground.render import STATIC_DIR, make_templates
from playground.routes.actions import actions_router
from playground.routes.pages import pages_router
from playground.routes.partials import partials_router
from playground.routes.streams import streams_router
from playground.security import SecurityMiddleware
from playground.settings import PlaygroundSettings
from playground.startup import open_runtime


def create_app(settings: PlaygroundSettings | None = None) -> FastAPI:
    settings = settings or PlaygroundSettings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings) as runtime:
            app.state.runtime = runtime
            yield

    app = FastAPI(title="langgraph-beads-memory playground", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.templates = make_templates()
    app.add_middleware(SecurityMiddleware, max_body_bytes=settings.max_body_bytes)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for router in (pages_router(), partials_router(), actions_router(), streams_router()):
        app.include_router(router)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> PlainTextResponse:
        # plain text, never a page: an htmx request swaps nothing on these codes (see base.html)
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> PlainTextResponse:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return PlainTextResponse(f"Invalid request: {problems}", status_code=422)

    @app.exception_handler(psycopg.OperationalError)
    async def database_unreachable(request: Request, exc: psycopg.OperationalError) -> PlainTextResponse:
        # the database went away (or its pool is exhausted): say so, never a bare 500
        message = "The database is unreachable right now; try again in a moment. Running turns resume."
        return PlainTextResponse(message, status_code=503, headers={"Retry-After": "2"})

    return app


def __getattr__(name: str) -> FastAPI:
    # `uvicorn playground.app:app` builds the app from the environment on first use, not at import
    if name == "app":
        application = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
