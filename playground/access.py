"""Who may reach the playground at all: the Host it is asked for, the key, and how often a key may be guessed.

- **Host.** Every route answers only to localhost, 127.0.0.1, [::1], the address the request came in
  on, and the names in PLAYGROUND_ALLOWED_HOSTS (400 otherwise). A page on another site that rebinds
  its own name to this machine's address sends its own name as the Host, so it is refused.
- **The key.** With PLAYGROUND_API_KEY set, the pages need a login: the login form (a POST, so the key
  is never in an address that a log, a history or a Referer keeps) checks it once and starts a
  server-side login (playground.logins), whose random token the cookie holds, HttpOnly and
  SameSite=Strict. It counts only on a request the browser says is same-origin (Sec-Fetch-Site), so a
  cookie sent along with another site's request opens nothing. The API takes only the bearer
  header, never the cookie.
- **No key.** The app is open only to a request that arrived on a loopback socket and names no proxy
  (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`); anything else is refused (403), pages and API
  alike, so `--host 0.0.0.0` never serves an open page. Whatever forwards to the loopback port
  without those headers (a bare proxy_pass, `ssh -R`, socat) is as trusted as the machine's own
  users: set a key then.
- **Who is asking.** A wrong key is counted against the client as the socket knows it, never as a
  header says (`client_key`): forwarding headers count only from PLAYGROUND_TRUSTED_PROXIES (none by
  default), and a client address a server took from such a header (uvicorn does, for 127.0.0.1)
  is not believed.
- **Guessing.** A wrong key is logged (the client and the route, never the key) and counted per
  (client, key tried); past `auth_failures_per_minute` in a minute that pair gets 429, with
  Retry-After. The right key is its own pair and never fails, so no one can lock the real user out
  by sending wrong keys from the same address (every local client is 127.0.0.1). A request without
  a key, or one the browser says another site made, is no guess and is not counted. What stops a
  guesser trying many keys is the key's strength (about 64 bits at least, settings.api_key_problem),
  not this count. The count is per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from starlette.datastructures import Headers

from playground.settings import PlaygroundSettings

_log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")
COOKIE = "playground_login"
WINDOW_SECONDS = 60.0
#: (client, key) pairs with recent failures past which a new failure first forgets the stale ones
SWEEP_AT = 1_024
#: the most pairs remembered: past it (after the sweep) the pairs whose last failure is oldest are
#: forgotten, so a guesser trying a new key each time cannot grow the table without bound
MAX_PAIRS = 65_536
#: the client of every request whose address came from a forwarding header nothing vouches for: they
#: share one count, so rotating the header's address earns no fresh one
FORWARDED_CLIENT = "a forwarded request (address unknown)"
#: Sec-Fetch-Site values of a request that another site's page made: never a guess at the key
_OTHER_SITES = frozenset({"cross-site", "same-site"})
# Sec-Fetch-Site values under which the login cookie counts; absent (an older browser, curl) too
_FETCH_SITES_TRUSTED = frozenset({"same-origin", "none"})


# -- the Host --------------------------------------------------------------------------------------


def host_name(host: str) -> str:
    """The name in a Host header, without its port, lowercased: "[::1]:8000" -> "::1"; "" for what
    is no Host at all ("[::1].evil.com", "localhost:evil": a port is digits, after the name)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1 :] if end > 0 else ""
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return ""
        return host[1:end]
    if host.count(":") == 1:
        host, port = host.split(":", 1)
        if not port.isdigit():
            return ""
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


def cookie_header(value: str, *, secure: bool, max_age: int) -> str:
    flags = f"; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={value}{flags}{'; Secure' if secure else ''}"


def read_cookie(headers: Headers) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


# -- who is asking ----------------------------------------------------------------------------------


def _address(value: str) -> str:
    """An address as a forwarding header or a server writes it, without brackets or port, normalised
    where it parses ("[::1]:80" -> "::1", "10.0.0.1:5000" -> "10.0.0.1"); anything else lowercased."""
    value = value.strip().strip('"').lower()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else value[1:]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def _forwarded_for(headers: Headers) -> list[str]:
    """Every address X-Forwarded-For names, nearest hop last."""
    values = headers.getlist("x-forwarded-for")
    return [_address(part) for value in values for part in value.split(",") if part.strip()]


def _named_addresses(headers: Headers) -> set[str]:
    """Every address any forwarding header names (X-Forwarded-For, X-Real-IP, Forwarded's for=)."""
    named = set(_forwarded_for(headers))
    named.update(_address(v) for v in headers.getlist("x-real-ip"))
    for value in headers.getlist("forwarded"):
        for element in value.replace(",", ";").split(";"):
            key, _, found = element.strip().partition("=")
            if key.strip().lower() == "for" and found:
                named.add(_address(found))
    return named


def _in(address: str, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in networks)


def client_key(
    scope: Any,
    headers: Headers,
    trusted: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network] = (),
) -> str:
    """Who a wrong key is counted against: what the client cannot forge.

    Without a forwarding header, the socket's peer (ASGI's `client`). With one, the peer may be what
    a server took from it (uvicorn does for 127.0.0.1 unless told not to): an address the headers
    name is never believed as the peer, and such requests share FORWARDED_CLIENT. A peer in
    `trusted` (PLAYGROUND_TRUSTED_PROXIES) is a proxy, and its client is the nearest address in its
    X-Forwarded-For that is not itself a trusted proxy."""
    client = scope.get("client")
    peer = _address(str(client[0])) if client else "unknown"
    if not any(h in headers for h in PROXY_HEADERS):
        return peer
    if peer in _named_addresses(headers):
        return FORWARDED_CLIENT
    trusted = tuple(trusted)
    if not _in(peer, trusted):
        return peer  # the socket's own peer, naming a proxy it did not come through
    chain = _forwarded_for(headers)
    for hop in reversed(chain):
        if not _in(hop, trusted):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return FORWARDED_CLIENT  # "unknown", a name: nothing to count by
    return chain[0] if chain else peer


def is_guess(headers: Headers, credential: str) -> bool:
    """Whether a wrong `credential` counts as a guess: it is one (an empty key is no guess), and no
    other site's page sent it (a page cannot make a browser send a key it does not know)."""
    return bool(credential.strip()) and headers.get("sec-fetch-site") not in _OTHER_SITES


# -- wrong keys ------------------------------------------------------------------------------------

#: per process: the table keeps a digest of each wrong key, never the key (a typo of the real one is
#: close to it)
_PAIR_SECRET = secrets.token_bytes(32)


def _pair(client: str, credential: str) -> tuple[str, str]:
    digest = hmac.new(_PAIR_SECRET, credential.strip().encode("utf-8", "replace"), hashlib.sha256)
    return client, digest.hexdigest()[:32]


class FailedAttempts:
    """Wrong keys per (client, key tried) over the last WINDOW_SECONDS (see the module docstring)."""

    def __init__(
        self, limit: int, clock: Callable[[], float] = time.monotonic, max_pairs: int = MAX_PAIRS
    ) -> None:
        self.limit = limit
        self.clock = clock
        self.max_pairs = max_pairs
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()
        # the size at which a failure first sweeps: doubled past what a sweep leaves, so a table of
        # live pairs is not walked again on every failure
        self._sweep_at = min(SWEEP_AT, max_pairs)

    def _recent(self, pair: tuple[str, str], now: float) -> deque[float]:
        failures = self._failures.setdefault(pair, deque())
        while failures and now - failures[0] >= WINDOW_SECONDS:
            failures.popleft()
        return failures

    def _sweep(self, now: float) -> None:
        """Forget the pairs whose failures are all older than the window (many keys that were tried
        once must not grow the table for ever), then, at `max_pairs`, the half that failed longest ago."""
        for pair in [p for p, f in self._failures.items() if not f or now - f[-1] >= WINDOW_SECONDS]:
            del self._failures[pair]
        if len(self._failures) >= self.max_pairs:
            by_age = sorted(self._failures, key=lambda p: self._failures[p][-1])
            for pair in by_age[: len(self._failures) - self.max_pairs // 2]:
                del self._failures[pair]
        self._sweep_at = min(max(SWEEP_AT, 2 * len(self._failures)), self.max_pairs)

    def retry_after(self, client: str, credential: str) -> int | None:
        """Seconds until `client` may try `credential` again, or None when it may now."""
        pair = _pair(client, credential)
        with self._lock:
            now = self.clock()
            if pair not in self._failures:
                return None
            failures = self._recent(pair, now)
            if len(failures) < self.limit:
                if not failures:
                    del self._failures[pair]
                return None
            return max(1, math.ceil(WINDOW_SECONDS - (now - failures[-self.limit])))

    def failed(self, client: str, credential: str, where: str) -> None:
        with self._lock:
            now = self.clock()
            if len(self._failures) >= self._sweep_at:
                self._sweep(now)
            failures = self._recent(_pair(client, credential), now)
            failures.append(now)
            count = len(failures)
        _log.warning(
            "a wrong key from %s on %s (this key %d times in the last %d s; %d allowed)",
            client,
            where,
            count,
            WINDOW_SECONDS,
            self.limit,
        )


def too_many(retry_after: int) -> tuple[str, dict[str, str]]:
    return (
        f"This key was wrong too many times from this address: try again in {retry_after} s.",
        {"Retry-After": str(retry_after)},
    )


__all__ = [
    "COOKIE",
    "FORWARDED_CLIENT",
    "KEY_NEEDED",
    "PROXY_HEADERS",
    "FailedAttempts",
    "client_key",
    "cookie_counts",
    "cookie_header",
    "host_allowed",
    "host_name",
    "host_refusal",
    "is_guess",
    "is_loopback",
    "key_matches",
    "local_target",
    "open_without_key",
    "read_cookie",
    "too_many",
]
