"""``/docs`` in real headless Chromium with every other host blocked: it still renders.

Without internet a CDN-hosted Swagger UI is a blank page; here any request that leaves
the server is aborted and recorded, so the page must draw from the app's own assets.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route

from tests.integration.browser import browser_page, require_chromium, screenshot
from tests.integration.dashboard_app import serve_sample

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    with serve_sample(tmp_path_factory.mktemp("docs")) as url:
        yield url


# ReDoc's "powered by" badge is an image on its vendor's CDN; blocked, only it is missing.
REDOC_BADGE = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@pytest.mark.parametrize(
    ("route", "rendered", "allowed_outside"),
    [
        ("/docs", ".swagger-ui .opblock", set()),
        ("/redoc", "[data-section-id^='tag/']", {REDOC_BADGE}),
    ],
)
def test_api_docs_render_offline(
    base_url: str, route: str, rendered: str, allowed_outside: set[str]
) -> None:
    own = urlsplit(base_url).netloc
    left: list[str] = []

    def only_this_server(request_route: Route) -> None:
        url = request_route.request.url
        if urlsplit(url).netloc == own or url.startswith("data:"):
            request_route.continue_()
        else:
            left.append(url)
            request_route.abort()

    with browser_page() as (page, console):
        page.route("**/*", only_this_server)
        page.goto(f"{base_url}{route}", wait_until="domcontentloaded")
        page.locator(rendered).first.wait_for(timeout=30_000)
        assert page.get_by_text("/recommendation/{pool}").first.is_visible()
        screenshot(page, f"api{route.replace('/', '_')}.png")

    assert set(left) <= allowed_outside, left
    assert [e for e in console.errors if not any(url in e for url in allowed_outside)] == []
