"""The login the pages need when PLAYGROUND_API_KEY is set: a form that takes the key once and starts
a server-side login (playground.logins) whose token the cookie holds, and a logout that ends it.
Without a key there is nothing to log in to, and both send the browser home."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from playground import access, logins
from playground.deps import RuntimeDep, TemplatesDep
from playground.security import read_form
from playground.settings import PlaygroundSettings

#: a login form is a key and a path: anything longer is not one
MAX_LOGIN_FORM_BYTES = 8_192


def _settings(request: Request) -> PlaygroundSettings:
    return request.app.state.settings  # type: ignore[no-any-return]


def _attempts(request: Request) -> access.FailedAttempts:
    return request.app.state.access_attempts  # type: ignore[no-any-return]


def login_router() -> APIRouter:
    router = APIRouter()

    def form(
        request: Request, templates: TemplatesDep, target: str, error: str | None = None, status: int = 200
    ) -> Response:
        context = {"next": target, "error": error}
        return templates.TemplateResponse(request, "login.html", context, status_code=status)

    @router.get("/login", response_class=HTMLResponse)
    async def login_page(
        request: Request, templates: TemplatesDep, rt: RuntimeDep, next: str = "/"
    ) -> Response:
        settings = _settings(request)
        target = access.local_target(next)
        if settings.api_key is None:
            return RedirectResponse(target, status_code=303)
        if access.cookie_counts(request.headers) and await logins.is_logged_in(
            rt.pool, settings, access.read_cookie(request.headers)
        ):
            return RedirectResponse(target, status_code=303)
        return form(request, templates, target)

    @router.post("/login", response_class=HTMLResponse)
    async def log_in(request: Request, templates: TemplatesDep, rt: RuntimeDep) -> Response:
        settings = _settings(request)
        fields = await read_form(request, MAX_LOGIN_FORM_BYTES)
        target = access.local_target(fields.get("next"))
        if settings.api_key is None:
            return RedirectResponse(target, status_code=303)
        key = fields.get("key", "")
        if not key.strip():  # no key is no guess: nothing is counted
            return form(request, templates, target, "Enter the key.", 401)
        attempts = _attempts(request)
        client = access.client_key(request.scope, request.headers, settings.trusted_proxy_networks)
        wait = attempts.retry_after(client, key)
        if wait is not None:
            detail, retry = access.too_many(wait)
            response = form(request, templates, target, detail, 429)
            response.headers.update(retry)
            return response
        if not access.key_matches(key, settings):
            if access.is_guess(request.headers, key):
                attempts.failed(client, key, "/login")
            return form(request, templates, target, "Wrong key.", 401)
        token = await logins.log_in(rt.pool, settings, access.read_cookie(request.headers))
        response = RedirectResponse(target, status_code=303)
        response.headers["set-cookie"] = access.cookie_header(
            token, secure=request.url.scheme == "https", max_age=settings.login_seconds
        )
        return response

    @router.post("/logout")
    async def log_out(request: Request, rt: RuntimeDep) -> Response:
        settings = _settings(request)
        home = "/login" if settings.api_key is not None else "/"
        await logins.log_out(rt.pool, access.read_cookie(request.headers))
        response = RedirectResponse(home, status_code=303)
        response.headers["set-cookie"] = access.cookie_header(
            "", secure=request.url.scheme == "https", max_age=0
        )
        return response

    return router
