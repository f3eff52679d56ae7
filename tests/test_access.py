"""Who may reach the playground (playground.access): the Host allow-list on every route, the login the
pages need when a key is set, no open app off loopback, wrong keys logged and limited, weak keys refused,
and one key for every session.

Through the real app on real Postgres: httpx over ASGI (the transport's `server` is the URL's host and
port, `client` the caller's address), and over real HTTP (uvicorn in a thread) for the request a
rebound name sends and for the streams.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playground_helpers import play_db, playground_template, serve, settings_for
from pydantic import ValidationError

from playground import access
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
        for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "localhost.evil.example"):
            # a rebound page's requests name its own host, and its Origin matches that host
            foreign = {"host": host, "origin": f"http://{host}"}
            for method, path, extra in routes:
                json = {"query": "x"} if path.endswith("/search") else None
                response = await c.request(method, path, headers={**extra, **foreign}, json=json)
                assert response.status_code == 400, (host, method, path, response.text)
                assert "PLAYGROUND_ALLOWED_HOSTS" in response.text
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
        for flag in ("HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={access.LOGIN_SECONDS}"):
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
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC, **HTMX) as c:
        settings = app.state.settings
        good = access.login_cookie(settings)
        other_key = settings.model_copy(update={"api_key": PlaygroundSettings(api_key=KEY + "-2").api_key})
        issued = good.split(".")[0]
        forged = [
            f"{issued}.{'0' * 64}",
            f"{int(issued) + 3600}.{good.split('.')[1]}",  # another time under the same signature
            access.login_cookie(settings, now=time.time() - access.LOGIN_SECONDS - 60),  # expired
            access.login_cookie(settings, now=time.time() + 3600),  # from the future
            access.login_cookie(other_key),  # signed with another key: a key change ends every login
            KEY,  # the key itself is no login
            "1.é",  # not ASCII
            "",
            "x" * 5000,
        ]
        for value in forged:
            cookie = f"{access.COOKIE}={value}".encode()  # bytes: a header as it arrives, UTF-8 and all
            response = await c.get("/partials/chats", headers={"cookie": cookie})
            assert response.status_code == 401, value[:40]
        assert (
            await c.get("/partials/chats", headers={"cookie": f"{access.COOKIE}={good}"})
        ).status_code == 200


async def test_a_token_in_the_url_logs_in_once_and_leaves_the_url(play_db: str) -> None:
    async with serving(play_db, api_key=KEY) as app, client(app, PUBLIC) as c:
        chat = await a_chat(app)
        response = await c.get(f"/chats/{chat}/inspector?tab=facts&token={KEY}", follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == f"/chats/{chat}/inspector?tab=facts"
        assert "HttpOnly" in response.headers["set-cookie"]
        wrong = await c.get(f"/chats/{chat}?token=nope", follow_redirects=False)
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        # the redirect stays on this app whatever the path looks like
        odd = await c.get(httpx.URL(f"{PUBLIC}//evil.example/?token={KEY}"), follow_redirects=False)
        assert odd.status_code == 303 and odd.headers["location"] == "/"


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


async def test_wrong_keys_are_logged_and_limited_per_address(
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
        # past the limit, every request that needs the key is refused from that address, the right key too
        right = await guesser.get("/api/stats", headers={"authorization": f"Bearer {KEY}"})
        assert right.status_code == 429 and right.json()["error"] == "too_many_attempts"
        assert 1 <= int(right.headers["retry-after"]) <= 60
        login = await guesser.post("/login", data={"key": KEY})
        assert (
            login.status_code == 429 and "retry-after" in login.headers and "set-cookie" not in login.headers
        )
        token = await guesser.get(f"/?token={KEY}", follow_redirects=False)
        assert token.status_code == 429
        # another address is not held back; a missing key is no guess and is not counted
        for _ in range(5):
            assert (await neighbour.get("/api/stats")).status_code == 401
        assert (
            await neighbour.get("/api/stats", headers={"authorization": f"Bearer {KEY}"})
        ).status_code == 200
        for _ in range(3):
            assert (await neighbour.post("/login", data={"key": guess})).status_code == 401
        assert (await neighbour.post("/login", data={"key": KEY})).status_code == 429  # the form counts too
    logged = [r.getMessage() for r in caplog.records if r.name == "playground.access"]
    assert sum("203.0.113.5" in line and "/api/stats" in line for line in logged) == 3
    assert sum("203.0.113.6" in line and "/login" in line for line in logged) == 3
    assert not any(KEY in line or guess in line for line in logged)


def test_failed_attempts_are_forgotten_after_the_window() -> None:
    now = [1000.0]
    attempts = access.FailedAttempts(limit=2, clock=lambda: now[0])
    attempts.failed("a", "/api/stats")
    assert attempts.retry_after("a") is None
    now[0] += 10
    attempts.failed("a", "/api/stats")
    assert attempts.retry_after("a") == 50  # until the first of the two is a minute old
    now[0] += 50
    assert attempts.retry_after("a") is None
    for n in range(access.SWEEP_AT + 10):  # addresses that guessed once, long ago, are swept
        attempts.failed(f"10.0.{n // 256}.{n % 256}", "/login")
    now[0] += access.WINDOW_SECONDS + 1
    attempts.failed("b", "/login")
    assert len(attempts._failures) <= 2


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
        assert chat_url.status_code == 401  # a token logs in on a page, never on a write
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
