"""Headless Debian Chromium for the browser tests, driven by Playwright.

Playwright's own browser download needs the internet; the Debian package ``chromium``
does not, so the tests launch ``/usr/bin/chromium``. Without it they skip naming the
package, except in CI (``CI=true``) where a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Error, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
"""Where screenshots go (git-ignored)."""


def require_chromium() -> Path:
    """Return the Chromium binary; skip (fail under CI=true) when it is missing."""
    if CHROMIUM.exists():
        return CHROMIUM
    message = f"{CHROMIUM} not found: install the Debian package chromium"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI must run the browser tests")
    pytest.skip(message)


@dataclass
class Console:
    """Console errors and uncaught exceptions seen by a page."""

    errors: list[str] = field(default_factory=list)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} ({message.location.get('url', '')})")

    def on_page_error(self, error: Error) -> None:
        self.errors.append(f"uncaught: {error.message}")


@contextmanager
def browser_page(width: int = 1280, height: int = 900) -> Iterator[tuple[Page, Console]]:
    """Yield a fresh page of headless Chromium and the console errors it records."""
    binary = require_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(binary), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            console = Console()
            page.on("console", console.on_console)
            page.on("pageerror", console.on_page_error)
            yield page, console
        finally:
            browser.close()


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot under :data:`ARTIFACTS`, print and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot saved to {path}")
    return path
