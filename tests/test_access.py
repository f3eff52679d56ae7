"""Who may reach the playground (playground.access): the Host allow-list on every route, the login the
pages need when a key is set (a server-side login that a logout ends), no open app off loopback, wrong
keys logged and limited per (client, key) where the client is what a request cannot forge, no key in
an address that reaches the access log, weak keys refused, and one key for every session.

Through the real app on real Postgres: httpx over ASGI (the transport's `server` is the URL's host and
port, `client` the caller's address), and over real HTTP (uvicorn in a thread) for the request a
rebound name sends and for the streams.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import uuid
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI
from playground_helpers import play_db, playground_template, scalar, serve, settings_for
from pydantic import ValidationError
from starlette.datastructures import Headers

from playground import access
from playground.access import client_key
from playground.app import create_app
from playground.chats import create_chat, get_chat
from playground.settings import PlaygroundSettings
from playground.startup import open_runtime

__all__ = ["play_db", "playground_template"]  # fixtures

KEY = "k" * 12 + "-access-test-key"
LOOPBACK = "http://127.0.0.1:8765"
PUBLIC = "http://192.0.2.10:8765"  # a documentation address: the app bound to a public one
BROWSER = {"accept": "text/html,application/xhtml+xml"}
HTMX = {"hx-request": "true"}


@contextlib.asynccontextmanager
async def serving(db: str, **overrides: Any) -> AsyncIterator[FastAPI]:
    app = create_app(settings_for(db, workers=1, consolidate_every=0, **overrides))
    async with open_runtime(app.state.settings) as rt:
        app.state.runtime = rt
        yield app


def client(
    app: FastAPI, base: str = LOOPBACK, caller: str = "127.0.0.1", **headers: str
) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(caller, 50_000))
    return httpx.AsyncClient(transport=transport, base_url=base, headers=headers, cookies=no_cookie_jar())


def no_cookie_jar() -> CookieJar:
    """A jar that keeps nothing: each request carries only the cookie its test gives it."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


async def a_chat(app: FastAPI) -> str:
    return str((await create_chat(app.state.runtime.pool)).id)


def page_routes(chat: str) -> list[tuple[str, str, dict[str, str]]]:
    """Every kind of page route: full pages, partials, both streams, and a write."""
    turn = uuid.uuid4()
    return [
        ("GET", "/", BROWSER),
        ("GET", f"/chats/{chat}", HTMX),
        ("GET", f"/chats/{chat}/inspector", {}),
        ("GET", "/partials/chats", HTMX),
        ("GET", f"/chats/{chat}/events", {"accept": "text/event-stream"}),
        ("GET", f"/chats/{chat}/turns/{turn}/events", {"accept": "text/event-stream"}),
        ("POST", "/chats", {}),
        ("POST", f"/chats/{chat}/delete", {}),
    ]


API_ROUTES = [
    ("GET", "/api/health"),
    ("GET", "/api/stats"),
    ("POST", "/api/sessions/s/search"),
    ("DELETE", "/api/sessions/s"),
]


# -- the Host ---------------------------------------------------------------------------------------


async def test_a_foreign_host_is_refused_on_every_route(play_db: str) -> None:
    async with serving(play_db) as app, client(app) as c:
        chat = await a_chat(app)
        public = ["/healthz", "/static/app.css", "/login", "/docs", "/openapi.json"]
        routes = [*page_routes(chat), *((m, p, {}) for m, p in API_ROUTES), *(("GET", p, {}) for p in public)]
        for host in (
            "evil.example",
            "evil.example:8765",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "[::1].evil.example",
            "localhost:evil",
            "[::1]:evil",
        ):
            # a rebound page's requests name its own host, and its Origin matches that host
            foreign = {"host": host, "origin": f"http://{host}"}
            for method, path, extra in routes:
                json = {"query": "x"} if path.endswith("/search") else None
                response = await c.request(method, path, headers={**extra, **foreign}, json=json)
                assert response.status_code == 400, (host, method, path, response.text)
                assert "PLAYGROUND_ALLOWED_HOSTS" in response.text, (host, path)
                assert "script-src 'self'" in response.headers["content-security-policy"]
                if path.startswith("/api/"):
                    assert response.json()["error"] == "host_not_allowed"
        assert await get_chat(app.state.runtime.pool, uuid.UUID(chat)) is not None  # the delete was refused
        for host in ("localhost:8765", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST", "localhost."):
            assert (await c.get("/api/health", headers={"host": host})).status_code == 200, host
            assert (await c.get("/", headers={"host": host})).status_code == 200, host


async def test_the_bound_address_and_the_allowed_names_are_served(play_db: str) -> None:
    async with (
        serving(play_db, api_key=KEY, allowed_hosts="memory.example.com, .corp.example") as app,
        client(app, PUBLIC, authorization=f"Bearer {KEY}") as c,
    ):
        served = [
            "192.0.2.10:8765",
            "memory.example.com",
            "MEMORY.example.com:443",
            "corp.example",
            "a.b.corp.example",
        ]
        for host in served:
            assert (await c.get("/api/health", headers={"host": host})).status_code == 200, host
        refused = ["192.0.2.11:8765", "memory.example.com.evil", "evilcorp.example", "corp.example.evil", "x"]
        for host in refused:
            assert (await c.get("/api/health", headers={"host": host})).status_code == 400, host


def test_over_http_a_rebound_name_reads_nothing(play_db: str) -> None:
    """The request a page on a rebound name sends, as curl sends it: to 127.0.0.1, Host its own name."""
    with (
        serve(create_app(settings_for(play_db, workers=1))) as base,
        httpx.Client(timeout=10, cookies=no_cookie_jar()) as c,
    ):
        chat = c.post(f"{base}/chats", headers={"origin": base}, follow_redirects=False).headers["location"]
        foreign = {"host": "evil.example", "origin": "http://evil.example"}
        for path in ("/api/stats", chat, f"{chat}/inspector", f"{chat}/events"):
            refused = c.get(base + path, headers=foreign)
            assert refused.status_code == 400, (path, refused.text)
        wrote = c.post(f"{base}/api/sessions/rebound/messages", headers=foreign, json={"messages": []})
        assert wrote.status_code == 400
        assert c.get(f"{base}/api/stats").status_code == 200
        # the stream itself answers on the right name
        with c.stream("GET", f"{base}{chat}/events", headers={"accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")


# -- the login --------------------------------------------------------------------------------------


async def test_with_a_key_the_pages_need_the_login(play_db: str) -> None:
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        chat = await a_chat(app)
        for method, path, extra in page_routes(chat):
            response = await c.request(method, path, headers=extra, follow_redirects=False)
            if extra is BROWSER:  # a browser asking for a page is sent to the login, and back after it
                assert response.status_code == 303
                assert response.headers["location"] == "/login?next=%2F"
            else:
                assert response.status_code == 401, (method, path, response.text)
                assert "/login" in response.text
        assert await get_chat(app.state.runtime.pool, uuid.UUID(chat)) is not None
        for path in ("/healthz", "/static/app.css", "/docs", "/openapi.json"):
            assert (await c.get(path)).status_code == 200, path

        form = await c.get("/login?next=/chats/" + chat)
        assert form.status_code == 200
        assert 'name="key" type="password"' in form.text and f'value="/chats/{chat}"' in form.text
        wrong = await c.post("/login", data={"key": "x" * len(KEY), "next": f"/chats/{chat}"})
        assert wrong.status_code == 401 and "Wrong key." in wrong.text and "set-cookie" not in wrong.headers
        elsewhere = await c.post("/login", data={"key": KEY}, headers={"origin": "http://evil.example"})
        assert elsewhere.status_code == 403  # a login form on another site cannot log this browser in

        login = await c.post("/login", data={"key": KEY, "next": f"/chats/{chat}"})
        assert login.status_code == 303 and login.headers["location"] == f"/chats/{chat}"
        cookie = login.headers["set-cookie"]
        for flag in ("HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={app.state.settings.login_seconds}"):
            assert flag in cookie
        assert KEY not in cookie and "Secure" not in cookie  # plain http here; https adds Secure
        value = cookie.split(";")[0].split("=", 1)[1]

    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        logged_in = {"cookie": f"{access.COOKIE}={value}"}
        for method, path, extra in page_routes(chat)[:5]:
            if "events" in path:
                continue  # a stream that opens never ends over ASGI: the HTTP test below reads one
            response = await c.request(method, path, headers={**extra, **logged_in})
            assert response.status_code == 200, (method, path, response.text)
        page = await c.get(f"/chats/{chat}", headers=logged_in)
        assert 'action="/logout"' in page.text
        made = await c.post("/chats", headers=logged_in, follow_redirects=False)
        assert made.status_code == 303
        # the login is a page's, never the API's
        assert (await c.get("/api/stats", headers=logged_in)).status_code == 401
        # a request the browser says another site made carries no login
        for site, status in (("same-origin", 200), ("none", 200), ("same-site", 401), ("cross-site", 401)):
            response = await c.get(f"/chats/{chat}", headers={**logged_in, "sec-fetch-site": site, **HTMX})
            assert response.status_code == status, site
        # a logged-in browser sent to the login goes on to the page it asked for
        again = await c.get("/login?next=/partials/chats", headers=logged_in, follow_redirects=False)
        assert again.status_code == 303 and again.headers["location"] == "/partials/chats"
        logout = await c.post("/logout", headers=logged_in, follow_redirects=False)
        assert logout.status_code == 303 and logout.headers["location"] == "/login"
        assert "Max-Age=0" in logout.headers["set-cookie"]


async def test_a_forged_or_stale_login_opens_nothing(play_db: str) -> None:
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        login = await c.post("/login", data={"key": KEY}, follow_redirects=False)
        good = login.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        assert KEY not in good and len(good) >= 40  # a random token, never the key or a function of it
        forged = [
            good[:-1] + ("A" if good[-1] != "A" else "B"),
            good + "x",
            KEY,  # the key itself is no login
            "1.é",  # not ASCII
            "",
            "x" * 5000,
        ]
        for value in forged:
            cookie = f"{access.COOKIE}={value}".encode()  # bytes: a header as it arrives, UTF-8 and all
            response = await c.get("/partials/chats", headers={"cookie": cookie, **HTMX})
            assert response.status_code == 401, value[:40]
        logged_in = {"cookie": f"{access.COOKIE}={good}", **HTMX}
        assert (await c.get("/partials/chats", headers=logged_in)).status_code == 200

    # a key change ends every login
    other = KEY.replace("k", "q", 3)
    async with serving(play_db, api_key=other) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        assert (await c.get("/partials/chats", headers=logged_in)).status_code == 401
    # and a login ends when it expires (the row says when; no clock is waited for)
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        assert (await c.get("/partials/chats", headers=logged_in)).status_code == 200
        scalar(play_db, "UPDATE playground.logins SET expires_at = now() - interval '1 second' RETURNING 1")
        assert (await c.get("/partials/chats", headers=logged_in)).status_code == 401


async def test_a_logout_ends_the_login_wherever_the_cookie_went(play_db: str) -> None:
    """A cookie is sent to every port of its host: one caught there and replayed after the logout opens
    nothing, pages, partials and writes alike. A login replaces the one the browser came with."""
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        chat = await a_chat(app)
        first = await c.post("/login", data={"key": KEY}, follow_redirects=False)
        stale = {"cookie": first.headers["set-cookie"].split(";")[0]}
        # logging in again from the same browser rotates its login: the earlier token ends
        second = await c.post("/login", data={"key": KEY}, headers=stale, follow_redirects=False)
        caught = {"cookie": second.headers["set-cookie"].split(";")[0]}
        assert caught != stale
        assert (await c.get("/partials/chats", headers={**stale, **HTMX})).status_code == 401
        assert (await c.get(f"/chats/{chat}/inspector", headers=caught)).status_code == 200
        assert scalar(play_db, "SELECT count(*) FROM playground.logins") == 1

        logout = await c.post("/logout", headers=caught, follow_redirects=False)
        assert logout.status_code == 303 and "Max-Age=0" in logout.headers["set-cookie"]
        assert scalar(play_db, "SELECT count(*) FROM playground.logins") == 0
        replayed = await c.get(f"/chats/{chat}/inspector", headers=caught)
        assert replayed.status_code == 401
        page = await c.get("/", headers={**caught, **BROWSER}, follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        made = await c.post("/chats", headers=caught, follow_redirects=False)
        assert made.status_code == 401
        assert await get_chat(app.state.runtime.pool, uuid.UUID(chat)) is not None


async def test_a_key_in_the_url_logs_in_nothing(play_db: str) -> None:
    """The login is a POST: `?token=<key>` opens nothing, and is taken out of the address at once."""
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC) as c:
        chat = await a_chat(app)
        response = await c.get(
            f"/chats/{chat}/inspector?tab=facts&token={KEY}", headers=BROWSER, follow_redirects=False
        )
        assert response.status_code == 303 and "set-cookie" not in response.headers
        # the browser is sent to the login, and back to the page without the key
        assert response.headers["location"] == "/login?" + urlencode(
            {"next": f"/chats/{chat}/inspector?tab=facts"}
        )
        assert (await c.get(f"/chats/{chat}?token={KEY}", headers=HTMX)).status_code == 401
        api = await c.get(f"/api/stats?token={KEY}")
        assert api.status_code == 401


def test_the_key_never_reaches_the_access_log(play_db: str, caplog: pytest.LogCaptureFixture) -> None:
    """Over real HTTP with uvicorn's access log on: a key pasted into an address is not in the log line."""
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    app = create_app(settings_for(play_db, workers=1, api_key=KEY))
    # log_config=None: uvicorn's records go to the root logger, where caplog reads them
    with (
        serve(app, log_level="info", access_log=True, log_config=None) as base,
        httpx.Client(timeout=10, cookies=no_cookie_jar()) as c,
    ):
        for path in (
            f"/?token={KEY}",
            f"/?tab=x&token={KEY}&y=1",
            f"/api/stats?TOKEN={KEY}",
            f"/?%74oken={KEY}",
        ):
            c.get(base + path, headers=BROWSER, follow_redirects=False)
        c.post(f"{base}/login", data={"key": KEY}, headers={"origin": base}, follow_redirects=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert len(lines) == 5, lines
    assert any('"GET /?tab=x&y=1 HTTP/1.1" 303' in line for line in lines), lines
    assert not any(KEY in line for line in lines), lines
    assert not any(KEY in r.getMessage() for r in caplog.records)


async def test_the_login_only_sends_the_browser_to_this_app(play_db: str) -> None:
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, origin=PUBLIC) as c:
        for target in (
            "//evil.example/x",
            "https://evil.example",
            "/\\evil.example",
            "/\t/evil.example",
            "x",
        ):
            page = await c.get("/login", params={"next": target})
            assert page.status_code == 200 and "evil" not in page.text, target
            login = await c.post("/login", data={"key": KEY, "next": target})
            assert login.headers["location"] == "/", target
    assert access.local_target("/chats/1?x=2") == "/chats/1?x=2"


async def test_without_a_key_nothing_is_served_off_loopback(
    play_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(play_db) as app, client(app, PUBLIC, origin=PUBLIC) as public:
        chat = await a_chat(app)
        for method, path, extra in page_routes(chat):
            response = await public.request(method, path, headers=extra, follow_redirects=False)
            assert response.status_code == 403, (method, path)
            assert "PLAYGROUND_API_KEY" in response.text
        for method, path in API_ROUTES:
            assert (await public.request(method, path)).status_code == 403
        assert (await public.get("/healthz")).status_code == 200
        assert (await public.get("/login", follow_redirects=False)).status_code == 303  # nothing to log in to
        # whatever forwards to the loopback port and says so is off loopback too
        for header in ("x-forwarded-for", "forwarded", "x-real-ip"):
            async with client(app, LOOPBACK, **{header: "203.0.113.7"}) as proxied:
                refused = await proxied.get("/", headers=BROWSER)
            assert refused.status_code == 403 and "through a proxy" in refused.text, header
        async with client(app) as local:
            assert (await local.get("/", headers=BROWSER)).status_code == 200
    assert sum("pages refused" in r.getMessage() for r in caplog.records) == 1  # logged once


# -- wrong keys -------------------------------------------------------------------------------------


async def test_wrong_keys_are_logged_and_limited_per_client_and_key(
    play_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="playground.access")
    guess = "g" * 8 + "-not-the-key-at-all"
    async with (
        serving(play_db, api_key=KEY, auth_failures_per_minute=3) as app,
        client(app, PUBLIC, caller="203.0.113.5", origin=PUBLIC) as guesser,
        client(app, PUBLIC, caller="203.0.113.6", origin=PUBLIC) as neighbour,
    ):
        for _ in range(3):
            wrong = await guesser.get("/api/stats", headers={"authorization": f"Bearer {guess}"})
            assert wrong.status_code == 401
        # past the limit, that key is refused from that client, the form included
        again = await guesser.get("/api/stats", headers={"authorization": f"Bearer {guess}"})
        assert again.status_code == 429 and again.json()["error"] == "too_many_attempts"
        assert 1 <= int(again.headers["retry-after"]) <= 60
        login = await guesser.post("/login", data={"key": guess})
        assert (
            login.status_code == 429 and "retry-after" in login.headers and "set-cookie" not in login.headers
        )
        # the right key is not held back by another key's failures: nobody can lock the user out
        right = await guesser.get("/api/stats", headers={"authorization": f"Bearer {KEY}"})
        assert right.status_code == 200
        assert (await guesser.post("/login", data={"key": KEY}, follow_redirects=False)).status_code == 303
        # nor is another client sending the same wrong key; a missing key is no guess and is not counted
        assert (
            await neighbour.get("/api/stats", headers={"authorization": f"Bearer {guess}"})
        ).status_code == 401
        for _ in range(5):
            assert (await neighbour.get("/api/stats")).status_code == 401
            assert (await neighbour.post("/login", data={"key": ""})).status_code == 401
        for _ in range(2):
            assert (await neighbour.post("/login", data={"key": guess})).status_code == 401
        assert (await neighbour.post("/login", data={"key": guess})).status_code == 429  # the form counts too
    logged = [r.getMessage() for r in caplog.records if r.name == "playground.access"]
    assert sum("203.0.113.5" in line and "/api/stats" in line for line in logged) == 3
    assert sum("203.0.113.6" in line for line in logged) == 3
    assert not any(KEY in line or guess in line for line in logged)


async def test_another_sites_page_cannot_lock_the_user_out(play_db: str) -> None:
    """Every local client is 127.0.0.1: a page on another origin sending wrong keys there (`<img>` tags,
    form posts) must count nothing, so the right key and the login keep working."""
    guess = "g" * 8 + "-not-the-key-at-all"
    async with (
        serving(play_db, api_key=KEY, auth_failures_per_minute=2) as app,
        client(app, LOOPBACK) as local,
    ):
        cross_site = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "accept": "image/*"}
        for _ in range(12):
            img = await local.get(f"/?token={guess}", headers=cross_site, follow_redirects=False)
            assert img.status_code in (303, 401)
            form = await local.post(
                "/login", data={"key": guess}, headers={"origin": "http://evil.example", **cross_site}
            )
            assert form.status_code == 403
            same_site = {"origin": LOOPBACK, "sec-fetch-site": "same-site"}  # another port of this host
            assert (await local.post("/login", data={"key": guess}, headers=same_site)).status_code == 401
            bearer = {"authorization": f"Bearer {guess}", "sec-fetch-site": "cross-site"}
            assert (await local.get("/api/stats", headers=bearer)).status_code == 401
        assert app.state.access_attempts._failures == {}
        right = await local.get("/api/stats", headers={"authorization": f"Bearer {KEY}"})
        assert right.status_code == 200
        login = await local.post(
            "/login", data={"key": KEY}, headers={"origin": LOOPBACK}, follow_redirects=False
        )
        assert login.status_code == 303


def test_a_forwarded_address_earns_no_fresh_count(play_db: str, caplog: pytest.LogCaptureFixture) -> None:
    """Over real HTTP, uvicorn as the Quick start runs it (it takes X-Forwarded-For from 127.0.0.1): a
    rotating X-Forwarded-For, as a guesser or a TCP forwarder on this machine sends it, is one client."""
    caplog.set_level(logging.WARNING, logger="playground.access")
    guess = "g" * 8 + "-not-the-key-at-all"
    app = create_app(settings_for(play_db, workers=1, api_key=KEY, auth_failures_per_minute=3))
    with serve(app) as base, httpx.Client(timeout=10, cookies=no_cookie_jar()) as c:
        statuses = []
        for n in range(20):
            forged = {"x-forwarded-for": f"198.51.100.{n}", "authorization": f"Bearer {guess}"}
            statuses.append(c.get(f"{base}/api/stats", headers=forged).status_code)
        assert statuses == [401] * 3 + [429] * 17
        # without the header, the socket's peer (127.0.0.1) has a count of its own: two clients in all,
        # however the header rotates
        assert c.get(f"{base}/api/stats", headers={"authorization": f"Bearer {guess}"}).status_code == 401
        right = {"x-forwarded-for": "198.51.100.99", "authorization": f"Bearer {KEY}"}
        assert c.get(f"{base}/api/stats", headers=right).status_code == 200
    logged = [r.getMessage() for r in caplog.records if r.name == "playground.access"]
    assert sum(access.FORWARDED_CLIENT in line for line in logged) == 3
    assert not any("198.51.100." in line for line in logged)


def _scope(peer: str | None) -> dict[str, Any]:
    return {"client": (peer, 40_000) if peer else None}


def test_the_client_is_what_cannot_be_forged() -> None:
    trusted = PlaygroundSettings(trusted_proxies="10.0.0.5, 192.168.0.0/24").trusted_proxy_networks
    xff = lambda value: Headers({"x-forwarded-for": value})  # noqa: E731
    # no header: the socket's peer, with or without trusted proxies
    assert client_key(_scope("203.0.113.5"), Headers({})) == "203.0.113.5"
    assert client_key(_scope("::FFFF:7F00:1"), Headers({}), trusted) == "::ffff:7f00:1"
    assert client_key(_scope(None), Headers({})) == "unknown"
    # a header from a peer nothing trusts: the peer, which the header does not change
    assert client_key(_scope("203.0.113.5"), xff("198.51.100.1")) == "203.0.113.5"
    assert client_key(_scope("203.0.113.5"), Headers({"x-real-ip": "1.2.3.4"}), trusted) == "203.0.113.5"
    # a peer the headers name was taken from them by the server (uvicorn, for 127.0.0.1): not believed
    for headers in (
        xff("198.51.100.1"),
        xff("1.1.1.1, 198.51.100.1:4000"),
        Headers({"forwarded": 'for="198.51.100.1:80";proto=https'}),
        Headers({"x-real-ip": "198.51.100.1"}),
    ):
        assert client_key(_scope("198.51.100.1"), headers) == access.FORWARDED_CLIENT
        assert client_key(_scope("198.51.100.1"), headers, trusted) == access.FORWARDED_CLIENT
    # a trusted proxy: the nearest address in its X-Forwarded-For that is not a trusted proxy itself
    assert client_key(_scope("10.0.0.5"), xff("198.51.100.7"), trusted) == "198.51.100.7"
    assert (
        client_key(_scope("10.0.0.5"), xff("6.6.6.6, 198.51.100.7, 192.168.0.9"), trusted) == "198.51.100.7"
    )
    assert client_key(_scope("10.0.0.5"), xff("192.168.0.2"), trusted) == "192.168.0.2"
    assert client_key(_scope("10.0.0.5"), xff("unknown"), trusted) == access.FORWARDED_CLIENT
    assert client_key(_scope("10.0.0.5"), Headers({"x-real-ip": "1.2.3.4"}), trusted) == "10.0.0.5"
    # without the proxy list, the same proxy's header is not believed
    assert client_key(_scope("10.0.0.5"), xff("198.51.100.7")) == "10.0.0.5"
    with pytest.raises(ValidationError, match="trusted_proxies"):
        PlaygroundSettings(trusted_proxies="proxy.example")


async def test_behind_a_trusted_proxy_each_client_has_its_own_count(play_db: str) -> None:
    guess = "g" * 8 + "-not-the-key-at-all"
    async with (
        serving(play_db, api_key=KEY, auth_failures_per_minute=2, trusted_proxies="10.0.0.5") as app,
        client(app, PUBLIC, caller="10.0.0.5") as proxy,
    ):

        def sent(by: str) -> dict[str, str]:
            return {"x-forwarded-for": by, "authorization": f"Bearer {guess}"}

        for _ in range(2):
            assert (await proxy.get("/api/stats", headers=sent("198.51.100.7"))).status_code == 401
        assert (await proxy.get("/api/stats", headers=sent("198.51.100.7"))).status_code == 429
        assert (await proxy.get("/api/stats", headers=sent("198.51.100.8"))).status_code == 401


def test_failed_attempts_are_forgotten_after_the_window() -> None:
    now = [1000.0]
    attempts = access.FailedAttempts(limit=2, clock=lambda: now[0])
    attempts.failed("a", "wrong", "/api/stats")
    assert attempts.retry_after("a", "wrong") is None
    now[0] += 10
    attempts.failed("a", "wrong", "/api/stats")
    assert attempts.retry_after("a", "wrong") == 50  # until the first of the two is a minute old
    assert attempts.retry_after("a", "right") is None and attempts.retry_after("b", "wrong") is None
    assert all("wrong" not in part for pair in attempts._failures for part in pair)  # a digest, never the key
    now[0] += 50
    assert attempts.retry_after("a", "wrong") is None
    # keys that were tried once, long ago, are swept once the table reaches its sweep size
    attempts = access.FailedAttempts(limit=2, clock=lambda: now[0])
    for n in range(access.SWEEP_AT - 1):
        attempts.failed("a", f"guess {n}", "/login")
    now[0] += access.WINDOW_SECONDS + 1
    attempts.failed("b", "wrong", "/login")
    assert len(attempts._failures) == access.SWEEP_AT
    attempts.failed("b", "another", "/login")
    assert len(attempts._failures) == 2


def test_a_guesser_trying_new_keys_cannot_grow_the_table_without_bound() -> None:
    attempts = access.FailedAttempts(limit=2, clock=lambda: 1000.0, max_pairs=100)
    attempts.failed("a", "repeated", "/login")
    attempts.failed("a", "repeated", "/login")
    for n in range(1_000):  # all within the window: only the size bound forgets them
        attempts.failed("b", f"guess {n}", "/login")
        assert len(attempts._failures) <= 100


# -- keys and hosts as settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("a" * 16, "too weak"),
        ("a" * 64, "too weak"),
        ("abababababababababab", "too weak"),
        ("short-key", "at least 16"),
        (" " + secrets.token_urlsafe(20) + " ", "surrounding spaces"),
        (secrets.token_urlsafe(20) + "é", "printable ASCII"),
    ],
)
def test_a_weak_key_is_refused_with_a_message(key: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says) as refused:
        PlaygroundSettings(api_key=key)
    assert "secrets.token_urlsafe" in str(refused.value)  # and it says how to make a good one


def test_a_strong_key_and_real_host_names_are_accepted() -> None:
    key = secrets.token_urlsafe(32)
    assert PlaygroundSettings(api_key=key).api_key is not None
    assert PlaygroundSettings(api_key="").api_key is None  # empty is unset
    hosts = PlaygroundSettings(allowed_hosts="Memory.Example.com., .corp.example,[::1]").allowed_host_names
    assert hosts == frozenset({"memory.example.com", ".corp.example", "::1"})
    for bad in ("*", "evil host", "a/b", "http://x"):
        with pytest.raises(ValidationError, match="allowed_hosts"):
            PlaygroundSettings(allowed_hosts=bad)


# -- tenancy ----------------------------------------------------------------------------------------


async def test_one_key_reads_and_forgets_every_session(play_db: str) -> None:
    """The API's tenancy: one key is one trusted backend, with every session; there is no per-user scope."""
    async with (
        serving(play_db, api_key=KEY) as app,
        client(app, PUBLIC, authorization=f"Bearer {KEY}") as backend,
    ):
        for session in ("alice", "bob"):
            said = {"messages": [{"role": "user", "text": f"{session.title()}'s budget is $100k."}]}
            assert (await backend.post(f"/api/sessions/{session}/messages", json=said)).status_code == 200
        stats = (await backend.get("/api/stats")).json()
        assert {"alice", "bob"} <= {s["session_id"] for s in stats["sessions"]}
        found = await backend.post("/api/sessions/bob/search", json={"query": "What is the budget?"})
        assert "Bob" in found.json()["hits"][0]["text"]
        assert (await backend.delete("/api/sessions/alice")).status_code == 200
        assert (await backend.post("/api/sessions/alice/search", json={"query": "budget"})).status_code == 404


def test_the_login_stream_over_http(play_db: str) -> None:
    """Over real HTTP with a key: the stream refuses a request without the login and follows one with it."""
    settings = settings_for(play_db, workers=1, api_key=KEY)
    with serve(create_app(settings)) as base, httpx.Client(timeout=30, cookies=no_cookie_jar()) as c:
        chat_url = c.post(f"{base}/chats?token={KEY}", headers={"origin": base}, follow_redirects=False)
        assert chat_url.status_code == 401  # a key in the address logs no one in
        login = c.post(f"{base}/login", data={"key": KEY}, headers={"origin": base}, follow_redirects=False)
        assert login.status_code == 303
        cookie = {"cookie": login.headers["set-cookie"].split(";")[0]}
        chat = c.post(f"{base}/chats", headers={"origin": base, **cookie}, follow_redirects=False)
        path = chat.headers["location"]
        sent = c.post(
            f"{base}{path}/messages",
            data={"text": "Our budget is $100k.", "idempotency_key": "k"},
            headers={"origin": base, **HTMX, **cookie},
        )
        assert sent.status_code == 200, sent.text
        turn = sent.headers["x-turn-id"]
        events = f"{base}{path}/turns/{turn}/events"
        assert c.get(events).status_code == 401
        with c.stream("GET", events, headers={**cookie, "sec-fetch-site": "cross-site"}) as refused:
            assert refused.status_code == 401
        with c.stream("GET", events, headers=cookie) as stream:
            assert stream.status_code == 200
            body = "".join(stream.iter_text())  # a turn's stream ends with its turn
        assert "data:" in body
