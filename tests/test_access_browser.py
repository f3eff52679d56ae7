"""The login in a real browser (Debian's headless Chromium): with a key set, a page sends the browser to
the login, the key logs it in, the chat streams over the login cookie (htmx and EventSource send it
as this site's own requests), and the logout ends it. The cookie is one script cannot read."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from playground_helpers import play_db, playground_template, serve, settings_for

from playground import access
from playground.app import create_app

__all__ = ["play_db", "playground_template"]  # fixtures

CHROMIUM = "/usr/bin/chromium"
KEY = "k" * 12 + "-browser-login-key"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


def test_log_in_chat_over_the_cookie_and_log_out(play_db: str) -> None:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    app = create_app(settings_for(play_db, workers=1, api_key=KEY))
    with serve(app) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless"])
        try:
            page: Any = browser.new_page()
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(f"{base}/")
            assert page.url == f"{base}/login?next=%2F"
            page.fill("#key", "not-the-key-at-all")
            page.click("button[type=submit]")
            assert page.locator(".error").inner_text() == "Wrong key."
            page.fill("#key", KEY)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")

            [cookie] = page.context.cookies()
            assert cookie["name"] == access.COOKIE and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert KEY not in cookie["value"]
            assert access.COOKIE not in page.evaluate("() => document.cookie")

            page.click("text=New chat")
            page.wait_for_selector("#composer textarea")
            page.fill("#composer textarea", "Our budget is $100k per year.")
            page.click("#composer button[type=submit]")
            # the reply arrives over the stream, which the login cookie opened
            page.wait_for_function(
                """() => {
                    const badges = [...document.querySelectorAll('#turns .turn .lane-bar .badge')];
                    return badges.length === 2 && badges.every(b => b.textContent.trim().startsWith('done'));
                }""",
                timeout=30_000,
            )
            for lane in ("beads", "stock"):
                assert page.locator(f"#turns .turn .lane-{lane} .reply").inner_text().strip(), lane

            chat = page.url
            page.click(".logout button")
            page.wait_for_url(f"{base}/login")
            assert page.context.cookies() == []
            page.goto(chat)
            assert page.url.startswith(f"{base}/login?next=")
        finally:
            browser.close()
    assert problems == []
