"""The pages' logins, kept on the server (the `playground.logins` table, migration 0002).

A login is a random token: the cookie holds it, the table its SHA-256, so a logout (the row deleted)
ends it wherever the cookie went, a copy caught on another port of the same host included (browsers
send a host's cookies to every port of it). A login replaces the one the browser came with, lasts
`login_hours`, and ends at once when the key changes. Every process of the app reads the same table,
so a login made through one is a login on all of them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from playground.db import AppPool
from playground.settings import PlaygroundSettings

#: 32 random bytes, URL-safe: a cookie value, never a key
TOKEN_BYTES = 32
#: longer than any token this module makes: anything longer is not one of ours and is not looked up
MAX_TOKEN_CHARS = 64

FIND = """
SELECT 1 FROM playground.logins
WHERE token_hash = %(hash)s AND key_check = %(key_check)s AND expires_at > now()
"""
# a login deletes the expired rows (an index scan) and the browser's earlier login, then adds its own
START = """
WITH gone AS (
    DELETE FROM playground.logins WHERE expires_at <= now() OR token_hash = %(earlier)s
)
INSERT INTO playground.logins (token_hash, key_check, expires_at)
VALUES (%(hash)s, %(key_check)s, now() + %(lasts)s)
"""
END = "DELETE FROM playground.logins WHERE token_hash = %(hash)s"


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


def _key_check(settings: PlaygroundSettings) -> bytes:
    assert settings.api_key is not None
    key = settings.api_key.get_secret_value().encode("utf-8")
    return hmac.new(key, b"playground login", hashlib.sha256).digest()


def _ours(token: str | None) -> bool:
    return bool(token) and len(token or "") <= MAX_TOKEN_CHARS


async def is_logged_in(pool: AppPool, settings: PlaygroundSettings, token: str | None) -> bool:
    """Whether `token` (a login cookie's value) is a login that has not ended."""
    if settings.api_key is None or token is None or not _ours(token):
        return False
    async with pool.connection() as conn:
        cur = await conn.execute(FIND, {"hash": _hash(token), "key_check": _key_check(settings)})
        return await cur.fetchone() is not None


async def log_in(pool: AppPool, settings: PlaygroundSettings, earlier: str | None) -> str:
    """A new login's token, replacing the login `earlier` (the cookie the browser sent), if any."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    params = {
        "hash": _hash(token),
        "key_check": _key_check(settings),
        "lasts": timedelta(seconds=settings.login_seconds),
        "earlier": _hash(earlier) if earlier and _ours(earlier) else None,
    }
    async with pool.connection() as conn:
        await conn.execute(START, params)
    return token


async def log_out(pool: AppPool, token: str | None) -> None:
    """End the login `token`, if it is one."""
    if token is None or not _ours(token):
        return
    async with pool.connection() as conn:
        await conn.execute(END, {"hash": _hash(token)})


__all__ = ["is_logged_in", "log_in", "log_out"]
