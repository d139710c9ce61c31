"""The call-chain panel in headless Chromium marks a bottleneck outside every GPU pool.

The panel's data is the app's ``/signals/chain``; here the browser is handed an answer
in which tokenizer (on no GPU pool) is blamed, so the drawing is checked without
waiting for baselines to be learnt (the analysis itself is tested in
``test_otel_own_time.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Route

from tests.integration.browser import browser_page, require_chromium
from tests.integration.dashboard_app import serve_sample

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _service(name: str, pool: str | None, verdict: str, **more: object) -> dict[str, object]:
    return {
        "service": name,
        "pool": pool,
        "call_count": 200,
        "p95_ms": 475.0,
        "own_p95_ms": 101.0,
        "status": "ok",
        "culprit": verdict == "outside_gpu_pools",
        "verdict": verdict,
        "callers": [],
        "callees": [],
        "note": f"{name}: {verdict}",
        **more,
    }


CHAIN = {
    "analysed_at": "2026-12-06T21:00:00Z",
    "window_seconds": 300,
    "services": [
        _service("gateway", None, "ok", callees=["tokenizer"]),
        _service("tokenizer", None, "outside_gpu_pools", callers=["gateway"], callees=["llm"]),
        _service("llm", "l4-infer", "ok", callers=["tokenizer"]),
    ],
    "edges": [
        {"caller": "gateway", "callee": "tokenizer"},
        {"caller": "tokenizer", "callee": "llm"},
    ],
    "bottlenecks": ["tokenizer"],
    "pools": {},
    "spans_in_window": 600,
}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    with serve_sample(tmp_path_factory.mktemp("dashboard")) as url:
        yield url


def test_the_panel_says_buying_gpus_will_not_help(base_url: str, tmp_path: Path) -> None:
    def fulfil(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(CHAIN))

    with browser_page() as (page, console):
        page.route("**/signals/chain", fulfil)
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        page.locator('body[data-state="ready"]').wait_for(timeout=30_000)
        chain = page.locator("#bottlenecks svg.chain")
        chain.wait_for(timeout=10_000)
        marked = chain.locator("g.service.outside")
        assert marked.count() == 1
        assert marked.get_attribute("data-service") == "tokenizer"
        assert "GPUs won't help" in (marked.text_content() or "")
        said = page.locator("#bottlenecks p.outside").inner_text()
        assert said.startswith("tokenizer is slow in its own work; buying GPUs will not help")

    assert console.errors == []
