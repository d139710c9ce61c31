"""The dashboard in real headless Chromium: every sample pool drawn, no console errors."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from forecaster.loaders import DEMAND
from pipelines.config.pools import load_pools
from pipelines.store import open_store
from tests.integration.browser import browser_page, require_chromium, screenshot
from tests.integration.dashboard_app import SAMPLE_POOLS, serve_sample

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    with serve_sample(tmp_path_factory.mktemp("dashboard")) as url:
        yield url


def test_dashboard_shows_every_pool_without_console_errors(base_url: str) -> None:
    names = load_pools(SAMPLE_POOLS).names
    expected = httpx.get(f"{base_url}/recommendation", timeout=30).json()
    desired = {rec["pool"]: rec["desired_nodes"] for rec in expected["pools"]}
    assert set(desired) == set(names), expected["unavailable"]

    with browser_page() as (page, console):
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        for name in names:
            section = page.locator(f'section[data-pool="{name}"][data-state="ready"]')
            section.wait_for(timeout=30_000)
            assert section.locator("h2").first.inner_text().startswith(name)
            # The chart has the demand history, the forecast band and the capacity line.
            for part in ("path.demand", "polygon.band", "path.mean", "line.capacity"):
                assert section.locator(f"svg.chart {part}").count() == 1, (name, part)
            shown = section.locator('[data-field="desired nodes"] b').inner_text()
            assert shown == str(desired[name])
            assert section.locator(".explanation .summary").inner_text().strip()
        page.locator('body[data-state="ready"]').wait_for(timeout=10_000)
        path = screenshot(page, "dashboard.png")

    assert console.errors == []
    assert path.stat().st_size > 10_000


def test_dashboard_marks_an_unknown_route_as_an_error(base_url: str, tmp_path: Path) -> None:
    """The harness itself: a 404 is seen as a console error (else the check above is void)."""
    with browser_page() as (page, console):
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        page.evaluate("fetch('no-such-route').catch(() => null)")
        page.wait_for_timeout(500)
    assert any("404" in error for error in console.errors), console.errors


def test_dashboard_draws_the_call_chain_and_marks_the_bottleneck(base_url: str) -> None:
    # gateway (no SLO) -> embedder (SLO 80 ms, takes 300 ms itself) -> generator (fast).
    now = time.time_ns()
    spans = []
    for i in range(40):
        start = now - (60 - i) * 1_000_000_000
        spans += [
            {"trace_id": f"b{i}", "span_id": "g", "service": "gateway", "start": start,
             "duration_ms": 420},
            {"trace_id": f"b{i}", "span_id": "e", "parent_span_id": "g", "service": "embedder",
             "start": start + 10_000_000, "duration_ms": 400},
            {"trace_id": f"b{i}", "span_id": "n", "parent_span_id": "e",
             "service": "generator", "start": start + 20_000_000, "duration_ms": 100},
        ]  # fmt: skip
    pushed = httpx.post(f"{base_url}/signals/spans", json=spans, timeout=30)
    assert pushed.status_code == 200, pushed.text
    # Spans settle 5 s after arrival and are analysed every 2 s.
    deadline = time.monotonic() + 30
    while httpx.get(f"{base_url}/signals/chain", timeout=30).json()["bottlenecks"] != ["embedder"]:
        assert time.monotonic() < deadline, "the analysis never blamed the embedder"
        time.sleep(0.5)

    with browser_page() as (page, console):
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        page.locator('body[data-state="ready"]').wait_for(timeout=30_000)
        chain = page.locator("#bottlenecks svg.chain")
        chain.wait_for(timeout=10_000)
        assert chain.locator("g.service").count() == 3
        assert chain.locator("line.edge").count() == 2
        marked = chain.locator("g.service.bottleneck")
        assert marked.count() == 1
        assert marked.get_attribute("data-service") == "embedder"
        assert marked.get_attribute("data-verdict") == "bottleneck"
        assert "BOTTLENECK" in (marked.text_content() or "")
        summary = page.locator("#bottlenecks .summary").inner_text()
        assert "bottleneck: embedder" in summary
        # One time on the page: the chain is analysed as of the recommendations' now
        # (the sample's newest time), though its spans arrived on the wall clock.
        now = page.locator("#clock").get_attribute("data-now")
        assert now is not None
        assert now.startswith("2025-"), now
        assert f"analysed {now}" in summary, (now, summary)
        screenshot(page, "dashboard_chain.png")

    assert console.errors == []


# -- the shadow scorecard panel -----------------------------------------------------------


@pytest.fixture(scope="module")
def scorecard_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The sample app whose store holds a day of recommendations, as a shadow run records.

    The recorded plan asks, one lead time ahead, for the nodes each sample's demand
    needed plus one: what a forecast-only deployment might have written to its trail.
    """
    require_chromium()
    workdir = tmp_path_factory.mktemp("scorecard")
    with serve_sample(workdir) as url:
        pools = {pool.name: pool for pool in load_pools(SAMPLE_POOLS).pools}
        with open_store(f"sqlite:///{workdir / 'store.db'}") as store:
            newest = max(store.samples.last_timestamps().values())
            for name, pool in pools.items():
                demand = store.samples.read(
                    [pool.series_id(DEMAND)], start=newest - timedelta(days=1)
                )
                for ds, gpus in zip(demand["ds"], demand["y"], strict=True):
                    nodes = math.ceil(gpus / pool.gpus_per_node) + 1
                    made = ds.to_pydatetime() - pool.lead_time
                    store.recommendations.append(name, made, nodes, "hold", {})
        yield url


def test_the_scorecard_panel_shows_each_pools_figures_and_plot(scorecard_url: str) -> None:
    names = load_pools(SAMPLE_POOLS).names
    cards = {
        name: httpx.get(f"{scorecard_url}/scorecard/{name}", timeout=30).json() for name in names
    }
    assert all(card["windows"]["day"]["samples"] > 100 for card in cards.values()), cards

    with browser_page() as (page, console):
        page.goto(f"{scorecard_url}/", wait_until="domcontentloaded")
        page.locator('#scorecard[data-state="ready"]').wait_for(timeout=30_000)
        for name in names:
            panel = page.locator(f'#scorecard article[data-pool="{name}"][data-state="ready"]')
            assert panel.count() == 1, name
            for window in ("day", "week"):
                want = cards[name]["windows"][window]
                row = panel.locator(f'tr[data-window="{window}"]')
                shown = row.locator('[data-field="avoided"]').inner_text()
                assert shown == f"{want['waiting_gpu_hours_avoided']:.1f}", (name, window)
                shown = row.locator('[data-field="added"]').inner_text()
                assert shown == f"{want['node_hours_added']:.1f}", (name, window)
            for line in ("sc-demand", "sc-nodes", "sc-plan"):
                d = panel.locator(f"svg.scorecard-plot path.{line}").get_attribute("d") or ""
                # One point per sample of the day, drawn as one unbroken line.
                assert d.count("L") + 1 == len(cards[name]["timeline"]), (name, line)
        path = screenshot(page, "dashboard_scorecard.png")

    assert console.errors == []
    assert path.stat().st_size > 10_000
