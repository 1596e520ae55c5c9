"""Headless Chromium for the console's browser tests: Debian's ``chromium`` (installed by
``python -m pool_admin.localservices install --tests``, which ``make test`` runs), driven by
Playwright, whose own browser download is not reachable from these machines.

Screenshots go to ``test-artifacts/console/`` at the repository's root (the README names it),
one PNG per page a test visits, kept after the run for whoever reads it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "console"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One browser per test module. Playwright's sync API keeps an event loop running in this
    thread while it is open, and Django refuses database calls from a thread with a running
    loop: the tests' own (synchronous, on this thread) are allowed for as long as the browser
    lives, and only then (DJANGO_ALLOW_ASYNC_UNSAFE, restored after)."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:  # never a silent skip: make test installs it
        pytest.fail("Debian's chromium is missing: python -m pool_admin.localservices install "
                    "--tests")  # fmt: skip
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(
                executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            yield launched
            launched.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})  # type: ignore[attr-defined]
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    # What went wrong in the page: script errors, refused resources (CSP), failed loads.
    opened.console_errors = []  # type: ignore[attr-defined]
    opened.on("console", lambda m: m.type == "error" and opened.console_errors.append(m.text))  # type: ignore[attr-defined]
    opened.on("pageerror", lambda e: opened.console_errors.append(str(e)))  # type: ignore[attr-defined]
    yield opened
    context.close()


def screenshot(page: object, name: str) -> Path:
    """A full-page PNG of what the browser shows now, as ``test-artifacts/console/<name>.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path


def log_in(page: object, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/admin/login/?next=/admin/")  # type: ignore[attr-defined]
    page.fill("#id_username", username)  # type: ignore[attr-defined]
    page.fill("#id_password", password)  # type: ignore[attr-defined]
    page.click("input[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_load_state()  # type: ignore[attr-defined]
