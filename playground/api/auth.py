"""Who may call the API: a bearer key when one is set, and never an open API off loopback.

With `PLAYGROUND_API_KEY` set, every /api/ route asks for `Authorization: Bearer <key>` (401
otherwise; the key is compared in constant time; the login cookie of the pages does not count here).
A wrong key is logged and counted against the client (the socket's peer, or what a trusted proxy
says) and the key tried; past the limit that key gets 429 with Retry-After from that client, while
the right key keeps working (playground.access). Unset, the API answers only a request that arrived on a
loopback socket and names no proxy: bound to any other address, or reached through a proxy that says
so (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`), it answers 403, saying how to set a key, so that
starting the playground with `--host 0.0.0.0` never publishes a memory that anyone on the network may
read or forget.

One key opens every session: the API is for one trusted backend, which may read, write and forget any
session's memory. It holds no per-user scope.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from playground import access
from playground.api.errors import ApiError
from playground.settings import PlaygroundSettings

_log = logging.getLogger(__name__)

# documents the scheme in the OpenAPI schema; the check itself is below (auto_error=False: a missing
# header is ours to answer, as JSON)
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="PLAYGROUND_API_KEY",
    description="The key set in PLAYGROUND_API_KEY, as `Authorization: Bearer <key>`. Needed only when "
    "the key is set; without one the API answers on loopback only and needs no header.",
)

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _settings(request: Request) -> PlaygroundSettings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def require_api_access(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    """The dependency every /api/ route has (see the module docstring)."""
    settings = _settings(request)
    if settings.api_key is None:
        allowed, host = access.open_without_key(request.headers, request.scope.get("server"))
        if allowed:
            return
        state = request.app.state
        if not getattr(state, "api_refusal_logged", False):
            state.api_refusal_logged = True
            _log.warning("the API is refused on %s: set PLAYGROUND_API_KEY to serve it off loopback", host)
        raise ApiError(403, access.KEY_NEEDED.format(host=host), error="api_key_required")
    token = credentials.credentials if credentials is not None else ""
    if not token.strip():  # no key is no guess: nothing is counted
        raise ApiError(
            401,
            "This API needs 'Authorization: Bearer <key>' with the key set in PLAYGROUND_API_KEY.",
            error="unauthorized",
            headers=_CHALLENGE,
        )
    attempts: access.FailedAttempts = request.app.state.access_attempts
    client = access.client_key(request.scope, request.headers, settings.trusted_proxy_networks)
    wait = attempts.retry_after(client, token)
    if wait is not None:
        detail, retry = access.too_many(wait)
        raise ApiError(429, detail, error="too_many_attempts", headers=retry)
    if not access.key_matches(token, settings):
        if access.is_guess(request.headers, token):
            attempts.failed(client, token, request.url.path)
        raise ApiError(401, "Wrong API key.", error="unauthorized", headers=_CHALLENGE)


def log_api_state(settings: PlaygroundSettings) -> None:
    """One line at startup saying how the app is guarded."""
    if settings.api_key is None:
        _log.info(
            "no PLAYGROUND_API_KEY: the pages and the API at /api/ (docs at /docs) answer on loopback only"
        )
    else:
        _log.info(
            "PLAYGROUND_API_KEY set: the pages need a login (/login), the API at /api/ (docs at /docs) "
            "the bearer key"
        )


__all__ = ["bearer", "log_api_state", "require_api_access"]
