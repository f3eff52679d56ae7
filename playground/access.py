"""Who may reach the playground at all: the Host it is asked for, the key, and how often a key may be guessed.

- **Host.** Every route answers only to localhost, 127.0.0.1, [::1], the address the request came in
  on, and the names in PLAYGROUND_ALLOWED_HOSTS (400 otherwise). A page on another site that rebinds
  its own name to this machine's address sends its own name as the Host, so it is refused.
- **The key.** With PLAYGROUND_API_KEY set, the pages need it too: the login form (or `?token=KEY` on
  any page, as Jupyter does) checks it once and sets a cookie, HttpOnly and SameSite=Strict, that
  carries its time of issue and an HMAC of it keyed with the key, never the key. It is honoured for
  LOGIN_SECONDS, and only on a request the browser says is same-origin (Sec-Fetch-Site), so a
  cookie sent along with another site's request opens nothing. The API takes only the bearer
  header, never the cookie. Changing the key ends every login.
- **No key.** The app is open only to a request that arrived on a loopback socket and names no proxy
  (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`); anything else is refused (403), pages and API
  alike, so `--host 0.0.0.0` never serves an open page. Whatever forwards to the loopback port
  without those headers (a bare proxy_pass, `ssh -R`, socat) is as trusted as the machine's own
  users: set a key then.
- **Guessing.** A wrong key is logged (the client's address and the route, never the key) and
  counted per client address; past `auth_failures_per_minute` in a minute that address gets 429, with
  Retry-After, for every request that needs the key, the right key included (a limit that let the
  right key through would confirm a guess). The count is per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers

from playground.settings import PlaygroundSettings

_log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")
COOKIE = "playground_login"
LOGIN_SECONDS = 7 * 24 * 3600
WINDOW_SECONDS = 60.0
#: addresses with recent failures past which a new failure first forgets the stale ones
SWEEP_AT = 1_024
# Sec-Fetch-Site values under which the login cookie counts; absent (an older browser, curl) too
_FETCH_SITES_TRUSTED = frozenset({"same-origin", "none"})


# -- the Host --------------------------------------------------------------------------------------


def host_name(host: str) -> str:
    """The name in a Host header, without its port, lowercased: "[::1]:8000" -> "::1"."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def host_allowed(headers: Headers, server: Any, allowed: frozenset[str]) -> bool:
    name = host_name(headers.get("host", ""))
    if not name:
        return False
    if name in LOOPBACK_NAMES or name in allowed:
        return True
    if any(entry.startswith(".") and (name.endswith(entry) or name == entry[1:]) for entry in allowed):
        return True
    # the address the request came in on, as the socket knows it (uvicorn's scope["server"])
    return bool(server) and isinstance(server[0], str) and name == host_name(server[0])


def host_refusal(headers: Headers) -> str:
    return (
        f"Host {headers.get('host', '')[:100]!r} is not served here: this app answers to localhost, "
        "127.0.0.1, [::1] and the address it is reached on. To serve it under a name, add the name "
        "to PLAYGROUND_ALLOWED_HOSTS."
    )


# -- loopback ------------------------------------------------------------------------------------


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


def open_without_key(headers: Headers, server: Any) -> tuple[bool, str]:
    """(whether a keyless app may answer this request, the address it came in on, for a refusal)."""
    proxied = next((h for h in PROXY_HEADERS if h in headers), None)
    host = server[0] if server else "unknown"
    if proxied is not None:
        return False, f"{host}, through a proxy ({proxied})"
    return is_loopback(server), str(host)


KEY_NEEDED = (
    "The playground is served on a non-loopback address ({host}) without a key, so it is refused. "
    "Set PLAYGROUND_API_KEY (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'); "
    "the pages then ask for it once, the API as 'Authorization: Bearer <key>'. Or bind the app to "
    "127.0.0.1."
)


# -- the key and the login cookie ----------------------------------------------------------------


def key_matches(given: str, settings: PlaygroundSettings) -> bool:
    assert settings.api_key is not None
    expected = settings.api_key.get_secret_value().encode("utf-8")
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"), expected)


def _signature(settings: PlaygroundSettings, issued: int) -> str:
    assert settings.api_key is not None
    key = settings.api_key.get_secret_value().encode("utf-8")
    return hmac.new(key, f"playground login {issued}".encode(), hashlib.sha256).hexdigest()


def login_cookie(settings: PlaygroundSettings, now: float | None = None) -> str:
    issued = int(time.time() if now is None else now)
    return f"{issued}.{_signature(settings, issued)}"


def cookie_valid(value: str | None, settings: PlaygroundSettings, now: float | None = None) -> bool:
    if not value or settings.api_key is None or "." not in value:
        return False
    issued_text, signature = value.split(".", 1)
    if not issued_text.isdigit() or len(issued_text) > 12:
        return False
    issued = int(issued_text)
    age = (time.time() if now is None else now) - issued
    # bytes, not str: compare_digest raises on a str that is not ASCII, and a cookie may be anything
    given = signature.encode("utf-8", "replace")
    return 0 <= age <= LOGIN_SECONDS and hmac.compare_digest(given, _signature(settings, issued).encode())


def cookie_counts(headers: Headers) -> bool:
    """Whether the browser says this request is its own page's (a cross-site one carries no login)."""
    site = headers.get("sec-fetch-site")
    return site is None or site in _FETCH_SITES_TRUSTED


def local_target(target: str | None) -> str:
    """Where a login may send the browser next: a path on this app, never another site. "//evil",
    a backslash second, "https://..." and any control character (a browser drops a tab from a URL,
    which would make "/<tab>/evil" "//evil") become "/"."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    if any(ord(c) < 0x20 or c == "\x7f" for c in target):
        return "/"
    return target


def cookie_header(value: str, *, secure: bool, max_age: int = LOGIN_SECONDS) -> str:
    flags = f"; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={value}{flags}{'; Secure' if secure else ''}"


def read_cookie(headers: Headers) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


# -- wrong keys ------------------------------------------------------------------------------------


class FailedAttempts:
    """Wrong keys per client address over the last WINDOW_SECONDS (see the module docstring)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and now - failures[0] >= WINDOW_SECONDS:
            failures.popleft()
        return failures

    def _sweep(self, now: float) -> None:
        """Forget the addresses whose failures are all older than the window (many addresses that
        guessed once must not grow the table for ever)."""
        for client in [c for c, f in self._failures.items() if not f or now - f[-1] >= WINDOW_SECONDS]:
            del self._failures[client]

    def retry_after(self, client: str) -> int | None:
        """Seconds until `client` may try again, or None when it may now."""
        with self._lock:
            now = self.clock()
            failures = self._recent(client, now)
            if len(failures) < self.limit:
                if not failures:
                    self._failures.pop(client, None)
                return None
            return max(1, math.ceil(WINDOW_SECONDS - (now - failures[-self.limit])))

    def failed(self, client: str, where: str) -> None:
        with self._lock:
            now = self.clock()
            if len(self._failures) >= SWEEP_AT:
                self._sweep(now)
            failures = self._recent(client, now)
            failures.append(now)
            count = len(failures)
        _log.warning(
            "a wrong key from %s on %s (%d in the last %d s; %d allowed)",
            client,
            where,
            count,
            WINDOW_SECONDS,
            self.limit,
        )


def client_address(scope: Any) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def too_many(retry_after: int) -> tuple[str, dict[str, str]]:
    return (
        f"Too many wrong keys from this address: try again in {retry_after} s.",
        {"Retry-After": str(retry_after)},
    )


__all__ = [
    "COOKIE",
    "KEY_NEEDED",
    "LOGIN_SECONDS",
    "PROXY_HEADERS",
    "FailedAttempts",
    "client_address",
    "cookie_counts",
    "cookie_header",
    "cookie_valid",
    "host_allowed",
    "host_name",
    "host_refusal",
    "is_loopback",
    "key_matches",
    "local_target",
    "login_cookie",
    "open_without_key",
    "read_cookie",
    "too_many",
]
