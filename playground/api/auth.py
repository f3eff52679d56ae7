"""Who may call the API: a bearer key when one is set, and never an open API off loopback.

With `PLAYGROUND_API_KEY` set, every /api/ route asks for `Authorization: Bearer <key>` (401
otherwise; the key is compared in constant time). Unset, the API answers only when the app is bound
to a loopback address (the ASGI scope's `server`, the socket the request came in on): bound to any
other address it answers 403, saying how to set a key, so that starting the playground with
`--host 0.0.0.0` never publishes a memory that anyone on the network may read or forget. A request
that names a proxy (`Forwarded`, `X-Forwarded-For`) counts as off loopback too: a reverse proxy on the
same machine connects through loopback on behalf of anyone.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from playground.api.errors import ApiError
from playground.settings import PlaygroundSettings

_log = logging.getLogger(__name__)

# documents the scheme in the OpenAPI schema; the check itself is below (auto_error=False: a missing
# header is ours to answer, as JSON)
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="PLAYGROUND_API_KEY",
    description="The key set in PLAYGROUND_API_KEY, as `Authorization: Bearer <key>`.",
)

PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")
KEY_NEEDED = (
    "The API is served on a non-loopback address ({host}) without a key, so it is refused. Set "
    "PLAYGROUND_API_KEY (at least 16 characters, e.g. python -c 'import secrets; "
    "print(secrets.token_urlsafe(32))') and send it as 'Authorization: Bearer <key>', or bind the app "
    "to 127.0.0.1."
)


def is_loopback(server: Any) -> bool:
    """Whether the ASGI `server` (host, port) names a loopback address; unknown counts as not."""
    if not server or not isinstance(server[0], str):
        return False
    host = server[0].strip("[]")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a socket path, or a name: nothing says who can reach it
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _settings(request: Request) -> PlaygroundSettings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def require_api_access(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    """The dependency every /api/ route has (see the module docstring)."""
    key = _settings(request).api_key
    if key is None:
        server = request.scope.get("server")
        proxied = next((h for h in PROXY_HEADERS if h in request.headers), None)
        if is_loopback(server) and proxied is None:
            return
        host = server[0] if server else "unknown"
        if proxied is not None:
            host = f"{host}, through a proxy ({proxied})"
        state = request.app.state
        if not getattr(state, "api_refusal_logged", False):
            state.api_refusal_logged = True
            _log.warning("the API is refused on %s: set PLAYGROUND_API_KEY to serve it off loopback", host)
        raise ApiError(403, KEY_NEEDED.format(host=host), error="api_key_required")
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise ApiError(
            401,
            "This API needs 'Authorization: Bearer <key>' with the key set in PLAYGROUND_API_KEY.",
            error="unauthorized",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(token.encode("utf-8", "replace"), key.get_secret_value().encode("utf-8")):
        raise ApiError(401, "Wrong API key.", error="unauthorized", headers={"WWW-Authenticate": "Bearer"})


def log_api_state(settings: PlaygroundSettings) -> None:
    """One line at startup saying how the API is guarded."""
    if settings.api_key is None:
        _log.info(
            "API at /api/ (docs at /docs): no PLAYGROUND_API_KEY, so it answers on loopback addresses only"
        )
    else:
        _log.info("API at /api/ (docs at /docs): every request needs the bearer key")


__all__ = ["bearer", "is_loopback", "log_api_state", "require_api_access"]
