"""Request safety for every route: the Host, the key, same-origin writes, bounded bodies, strict headers.

Who may reach the app at all (the Host allow-list, the login the pages need when a key is set, and
the refusal of an open app off loopback) is playground.access's; this middleware applies it to
every HTTP request before any route runs, the streams included. A `token` in a query string is taken
out of the request before anything reads it, the server's access log included: a key is never
taken from an address (it would be written wherever the address is), and one pasted there by
habit stays out of the log.

The JSON API under /api/ (playground.api) is called by programs, not by forms: a request without an
Origin header (curl, a script) may write there, one a browser sends from another origin may not, and
a body must be JSON. Its bodies are read here, up to the limit, before the app sees them, so a body
sent without a Content-Length is bounded too; its refusals are JSON.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

import psycopg
from fastapi import HTTPException, Request
from psycopg_pool import PoolTimeout
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from playground import access, logins
from playground.api.errors import error_response, is_api_path
from playground.settings import PlaygroundSettings

_log = logging.getLogger(__name__)

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: what answers without the login when a key is set: the login itself, the assets, the liveness
#: probe, and the API's schema and its page (they hold no data; the API checks its own key)
PUBLIC_PATHS = frozenset({"/login", "/logout", "/healthz", "/docs", "/openapi.json"})
PUBLIC_PREFIXES = ("/static/",)

# No inline script or style anywhere: every script and stylesheet is a file under /static.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}


def same_origin(headers: Headers) -> bool:
    """True when the request's Origin (or, failing that, its Referer) names the host it was sent to."""
    host = headers.get("host", "").lower()
    source = headers.get("origin")
    if not source or source == "null":
        source = headers.get("referer")
    if not host or not source:
        return False
    parts = urlsplit(source)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host


class SecurityMiddleware:
    """Refuses a foreign Host (400), pages without the login (401, or a redirect to it), an open app
    off loopback (403), cross-origin writes (403) and oversized bodies (413); adds the security headers."""

    def __init__(self, app: ASGIApp, settings: PlaygroundSettings, attempts: access.FailedAttempts) -> None:
        self.app = app
        self.settings = settings
        self.attempts = attempts
        self.max_body_bytes = settings.max_body_bytes
        self.allowed_hosts = settings.allowed_host_names
        self._refusal_logged = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # in place: the server logs this same scope's query string once the response starts
        scope["query_string"] = without_token(scope.get("query_string", b""))
        headers = Headers(scope=scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    response_headers.setdefault(name, value)
            await send(message)

        api = is_api_path(scope["path"])
        if not access.host_allowed(headers, scope.get("server"), self.allowed_hosts):
            detail = access.host_refusal(headers)
            foreign: Response = (
                error_response(400, detail, error="host_not_allowed")
                if api
                else PlainTextResponse(detail, 400)
            )
            await foreign(scope, receive, send_with_headers)
            return
        if api:
            await self._api(scope, receive, send_with_headers, headers)
            return
        refusal: Response | None = None
        if scope["method"] in UNSAFE_METHODS and not same_origin(headers):
            refusal = PlainTextResponse("Cross-origin request refused: Origin must match Host.", 403)
        elif _declared_length(headers) > self.max_body_bytes:
            refusal = PlainTextResponse(f"Request body too large (limit {self.max_body_bytes} bytes).", 413)
        elif not _public(scope["path"]):
            refusal = await self._page_access(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    async def _page_access(self, scope: Scope, headers: Headers) -> Response | None:
        """None when the page may be served; else the refusal (see playground.access)."""
        if self.settings.api_key is None:
            allowed, host = access.open_without_key(headers, scope.get("server"))
            if allowed:
                return None
            if not self._refusal_logged:
                self._refusal_logged = True
                _log.warning("pages refused on %s: set PLAYGROUND_API_KEY to serve them off loopback", host)
            return PlainTextResponse(access.KEY_NEEDED.format(host=host), 403)
        if access.cookie_counts(headers):
            try:
                pool = scope["app"].state.runtime.pool
                if await logins.is_logged_in(pool, self.settings, access.read_cookie(headers)):
                    return None
            except (psycopg.OperationalError, PoolTimeout):
                message = "The database is unreachable right now; try again in a moment."
                return PlainTextResponse(message, 503, headers={"Retry-After": "2"})
        is_page = (
            scope["method"] in ("GET", "HEAD")
            and headers.get("hx-request") != "true"
            and "text/html" in headers.get("accept", "")
        )
        if is_page:
            target = quote(scope["path"]) + (
                f"?{scope['query_string'].decode('latin-1')}" if scope["query_string"] else ""
            )
            return RedirectResponse(
                f"/login?{urlencode({'next': access.local_target(target)})}", status_code=303
            )
        return PlainTextResponse("Log in first: open /login and enter the key.", 401)

    async def _api(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        refusal: Response | None = None
        if scope["method"] in UNSAFE_METHODS and headers.get("origin") and not same_origin(headers):
            refusal = error_response(
                403, "Cross-origin request refused: a browser page of another origin may not call the API."
            )
        elif _declared_length(headers) > self.max_body_bytes:
            refusal = _too_large(self.max_body_bytes)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                await _too_large(self.max_body_bytes)(scope, receive, send)
                return
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if body and content_type != "application/json":
            refusal = error_response(
                415, "Send the request body as JSON, with the header Content-Type: application/json."
            )
            await refusal(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # after the body: wait for the disconnect

        await self.app(scope, replay, send)


def without_token(query: bytes) -> bytes:
    """`query` less any `token` parameter (the rest as it was, when there is none)."""
    if not query:
        return query
    # latin-1 both ways: each byte a percent escape stood for comes back as the same escape
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, encoding="latin-1")
    kept = [(k, v) for k, v in pairs if k.strip().lower() != "token"]
    return urlencode(kept, encoding="latin-1").encode("ascii") if len(kept) != len(pairs) else query


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _too_large(limit: int) -> Response:
    return error_response(413, f"Request body too large (limit {limit} bytes).")


def _declared_length(headers: Headers) -> int:
    try:
        return int(headers.get("content-length", "0"))
    except ValueError:
        return 0


async def read_form(request: Request, max_bytes: int) -> dict[str, str]:
    """An urlencoded form body (what browsers and htmx send), read up to `max_bytes` (413 past it)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise HTTPException(415, "Send the form as application/x-www-form-urlencoded.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise HTTPException(413, f"Request body too large (limit {max_bytes} bytes).")
    try:
        # errors="strict": a percent-escaped invalid sequence (a lone surrogate's bytes, say) is refused,
        # not silently replaced with U+FFFD
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, errors="strict")
    except UnicodeDecodeError:
        raise HTTPException(400, "The form is not valid UTF-8.") from None
    form = {name: values[-1] for name, values in fields.items()}
    if any("\x00" in name or "\x00" in value for name, value in form.items()):
        # Postgres text cannot hold a NUL: refuse it rather than store something else
        raise HTTPException(400, "The form contains a NUL character (U+0000), which cannot be stored.")
    return form
