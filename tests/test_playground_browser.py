"""The real page in headless Chromium (Debian's, never a downloaded one): both lanes stream, our lane
shows what it injected, a reload mid-reply neither loses nor repeats text, and the walkthrough ends
with the verdict that our lane used the corrected value."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from playground_helpers import play_db, playground_template, rows, serve, settings_for

from playground.app import create_app
from playground.walkthrough import STEPS

__all__ = ["play_db", "playground_template"]  # fixtures

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# Records, from the very start of each page, every streamed token element and the reply it landed in.
RECORD_TOKENS = """
window.__streamed = [];
new MutationObserver(function (mutations) {
  for (const m of mutations) for (const n of m.addedNodes) {
    if (n.nodeType === 1 && n.id && n.id.startsWith("e-")) window.__streamed.push(n.parentElement.id);
  }
}).observe(document, {childList: true, subtree: true});
"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium"),
]


def last_turn_done(page: Any, turns: int) -> None:
    page.wait_for_function(
        """(n) => {
            const all = document.querySelectorAll('#turns .turn');
            if (all.length !== n) return false;
            const last = all[all.length - 1];
            return [...last.querySelectorAll('.lane-bar .badge')].every(b => b.textContent.trim().startsWith('done'));
        }""",
        arg=turns,
        timeout=30_000,
    )


def send(page: Any, text: str | None = None) -> None:
    if text is not None:
        page.fill("#composer textarea", text)
    page.click("#composer button[type=submit]")


def test_both_lanes_stream_and_the_walkthrough_reaches_its_verdict(play_db: str) -> None:
    from playwright.sync_api import sync_playwright

    app = create_app(settings_for(play_db, scripted_token_delay_ms=50))
    problems: list[str] = []
    with serve(app) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.add_init_script(RECORD_TOKENS)

            page.goto(f"{base}/")
            page.click("text=New chat")
            page.wait_for_selector("#composer textarea")
            send(page, "Our budget is $100k per year. It must be self-hostable.")
            last_turn_done(page, 1)
            send(page, "What is our budget per year?")
            last_turn_done(page, 2)

            turn = page.locator("#turns .turn").nth(1)
            turn_id = turn.get_attribute("id").removeprefix("turn-")  # type: ignore[union-attr]
            streamed = page.evaluate("window.__streamed")
            assert (
                f"text-{turn_id}-stock" in streamed and f"text-{turn_id}-beads" in streamed
            )  # token by token
            assert (
                "From memory: Our budget is $100k per year."
                in turn.locator(".lane-beads .reply").inner_text()
            )
            facts = turn.locator(".lane-beads .fact-list .fact-text").all_inner_texts()
            assert "Our budget is $100k per year." in facts
            assert turn.locator(".lane-beads .fact-meta").first.inner_text().startswith("distance")
            assert "search_memory" in turn.locator(".lane-stock .tool-name").all_inner_texts()
            assert "model call" in turn.locator(".lane-stock .metrics").inner_text()

            # a reload mid-reply: the page shows what the log has, the stream goes on from there
            send(page, "What must the database be? Is it self-hostable?")
            page.wait_for_function(
                "() => window.__streamed.length > 0 && document.querySelectorAll('#turns .turn').length === 3"
            )
            page.reload()
            # (a function, not an expression: the page's policy forbids eval)
            page.wait_for_function(
                """() => window.__streamed.length > 0
                    || document.querySelectorAll('#turns .turn')[2].querySelector('.lane-stock .badge-done')"""
            )
            midway = page.locator("#turns .turn").nth(2).locator(".lane-stock .reply").inner_text()
            last_turn_done(page, 3)
            chat_id = page.url.rsplit("/", 1)[1]
            [(final,)] = rows(
                play_db,
                "SELECT m.body FROM playground.messages m JOIN playground.turn_worker t ON t.id = m.turn_id"
                " WHERE t.chat_id = %s AND t.turn_no = 3 AND m.author = 'stock'",
                (chat_id,),
            )
            assert (
                final.startswith(midway)
                and page.locator("#turns .turn").nth(2).locator(".lane-stock .reply").inner_text() == final
            )

            page.click("text=Guided walkthrough")
            for number, step in enumerate(STEPS, 1):
                page.wait_for_function(
                    "(text) => document.querySelector('#composer textarea').value === text", arg=step.text
                )
                send(page)
                last_turn_done(page, number)
            page.wait_for_selector("#verdict", timeout=30_000)
            verdicts = {
                item.get_attribute("data-lane"): item.get_attribute("data-verdict")
                for item in page.locator("#verdict li").all()
            }
            assert verdicts == {"beads": "corrected", "stock": "both"}
            page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
        finally:
            browser.close()
    assert problems == []  # no script errors and no Content-Security-Policy violations
