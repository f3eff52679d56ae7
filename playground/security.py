"""Request safety for every route: same-origin writes, bounded bodies, and strict response headers.

The JSON API under /api/ (playground.api) is called by programs, not by forms: a request without an
Origin header (curl, a script) may write there, one a browser sends from another origin may not, and
a body must be JSON. Its bodies are read here, up to the limit, before the app sees them, so a body
sent without a Content-Length is bounded too; its refusals are JSON.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from fastapi import HTTPException, Request
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from playground.api.errors import error_response, is_api_path

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

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
    """Refuses cross-origin writes (403) and oversized bodies (413); adds the security headers."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    response_headers.setdefault(name, value)
            await send(message)

        if is_api_path(scope["path"]):
            await self._api(scope, receive, send_with_headers, headers)
            return
        refusal: PlainTextResponse | None = None
        if scope["method"] in UNSAFE_METHODS and not same_origin(headers):
            refusal = PlainTextResponse("Cross-origin request refused: Origin must match Host.", 403)
        elif _declared_length(headers) > self.max_body_bytes:
            refusal = PlainTextResponse(f"Request body too large (limit {self.max_body_bytes} bytes).", 413)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

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
