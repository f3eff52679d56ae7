"""/docs: Swagger UI from the app's own files, under a policy that names no other host, rendered by
headless Chromium (Debian's) with every request it makes recorded: none leaves the app, and the page
lists the API's routes and calls one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from playground_helpers import play_db, playground_template, serve, settings_for

from playground.app import create_app
from playground.render import STATIC_DIR

__all__ = ["play_db", "playground_template"]  # fixtures

CHROMIUM = "/usr/bin/chromium"
VENDORED = STATIC_DIR / "vendor" / "swagger-ui"


def test_the_page_loads_only_the_apps_own_files(play_db: str) -> None:
    with serve(create_app(settings_for(play_db, workers=1))) as base, httpx.Client(timeout=10) as c:
        page = c.get(f"{base}/docs")
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert "http" not in policy and "'unsafe-inline'" not in policy and "script-src 'self';" in policy
        assert "<script>" not in page.text  # no inline script: every script is a file
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets and all(a.startswith("/static/") for a in assets), assets
        for asset in assets:
            assert c.get(base + asset).status_code == 200, asset
    # the copy is the package's, pinned, with its licence (static/vendor/VERSIONS.md says where from)
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"} <= {
        p.name for p in VENDORED.iterdir()
    }
    versions = (STATIC_DIR / "vendor" / "VERSIONS.md").read_text()
    assert re.search(r"swagger-ui-dist \| 5\.\d+\.\d+ \|", versions)


@pytest.mark.browser
@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium")
def test_swagger_ui_renders_offline_under_the_policy(play_db: str) -> None:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    elsewhere: list[str] = []
    with serve(create_app(settings_for(play_db, workers=1))) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--headless"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))

            def only_here(route: Any) -> None:  # as offline: anything for another host fails
                if route.request.url.startswith(base):
                    route.continue_()
                else:
                    elsewhere.append(route.request.url)
                    route.abort()

            page.route("**/*", only_here)
            page.goto(f"{base}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() >= 9
            assert "langgraph-beads-memory API" in page.locator(".info .title").inner_text()
            assert page.locator(".auth-wrapper .authorize").count() == 1  # the key, as a scheme

            health = page.locator(".opblock", has_text="/api/health").first
            health.locator(".opblock-summary").click()
            health.locator("button.try-out__btn").click()
            health.locator("button.execute").click()
            page.wait_for_selector(".live-responses-table tbody .response-col_status", timeout=15_000)
            status = health.locator(".live-responses-table tbody .response-col_status").first.inner_text()
            assert status.strip().startswith("200"), status
        finally:
            browser.close()
    assert elsewhere == []
    assert problems == []


def test_the_vendored_files_are_unmodified_package_files() -> None:
    # the bundle ends as the package built it, with no source map to fetch from anywhere
    bundle = (VENDORED / "swagger-ui-bundle.js").read_bytes()
    assert b"sourceMappingURL" not in bundle[-500:]
    assert Path(VENDORED / "LICENSE").read_text().lstrip().startswith("Apache License")
