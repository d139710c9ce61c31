"""``/docs`` and ``/redoc`` load their scripts and styles from the app, not a CDN."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from api.docs_ui import ASSETS


def _asset_urls(page: str) -> list[str]:
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", page) + re.findall(
        r"""url: *["']([^"']+)["']""", page
    )


def test_docs_pages_name_only_this_apps_assets(client: TestClient) -> None:
    for route in ("/docs", "/redoc"):
        page = client.get(route)
        assert page.status_code == 200, route
        urls = _asset_urls(page.text)
        assert urls, route
        outside = [u for u in urls if u.startswith(("http:", "https:", "//"))]
        assert outside == [], (route, outside)
        for url in urls:
            assert client.get(url).status_code == 200, (route, url)


def test_every_asset_is_served_with_its_media_type(client: TestClient) -> None:
    for name, media_type in ASSETS.items():
        got = client.get(f"/docs/assets/{name}")
        assert got.status_code == 200, name
        assert got.headers["content-type"].startswith(media_type), name
        assert len(got.content) > 1000, name


def test_an_unknown_asset_is_404(client: TestClient) -> None:
    assert client.get("/docs/assets/../main.py").status_code == 404
    assert client.get("/docs/assets/other.js").status_code == 404
