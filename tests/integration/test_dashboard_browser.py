"""The dashboard in real headless Chromium: every sample pool drawn, no console errors.

Each element an SRE reads is checked against the JSON it comes from: the nodes that
existed against the nodes recommended (with the scale events), the forecast band and
its share of the chart, the headline and the table of terms, the freshness, scheduler,
live-error and MLflow-link rows, and the call chain's hint when no span has arrived.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator

from pipelines.config.pools_file import load_pools
from tests.integration.browser import browser_page, require_chromium, screenshot
from tests.integration.dashboard_app import SAMPLE_POOLS, record_jobs, record_plan, serve_sample

MLFLOW_UI = "http://127.0.0.1:5999"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    workdir = tmp_path_factory.mktemp("dashboard")
    with serve_sample(workdir, prepare=(record_plan, record_jobs), mlflow_ui=MLFLOW_UI) as url:
        yield url


def _check_chart(section: Locator, view: dict[str, Any], name: str) -> None:
    """The chart draws what /dashboard/pool/{pool} holds, one mark per scale event."""
    chart = section.locator("svg.chart")
    for part in (
        "path.demand",
        "path.nodes",
        "path.recommended",
        "line.desired",
        "polygon.band",
        "path.served",
        "line.now",
    ):
        assert chart.locator(part).count() == 1, (name, part)
    # The recommendations in force, not today's value: one vertical per change.
    d = chart.locator("path.recommended").get_attribute("d") or ""
    assert d.count("V") == len(view["recommended"]) - 1 > 3, (name, d[:80])
    for kind, mark in (("recommended", "polygon"), ("nodes", "circle")):
        want = sum(event["kind"] == kind for event in view["events"])
        assert want > 0, (name, kind)
        assert chart.locator(f"{mark}.event.{kind}").count() == want, (name, kind)
    # The band is the served quantile, one vertex per step on each edge, and it gets a
    # readable share of the width (6 h of history, then the forecast).
    points = (chart.locator("polygon.band").get_attribute("points") or "").split()
    assert len(points) == 2 * len(view["band"]["points"]), name
    band = chart.locator("polygon.band").bounding_box()
    axis = chart.locator("line.axis").first.bounding_box()
    assert band is not None
    assert axis is not None
    assert band["width"] / axis["width"] > 0.25, (name, band, axis)


def _check_explanation(section: Locator, view: dict[str, Any], rec: dict[str, Any]) -> None:
    """A short headline and a table of terms whose node counts are the decision's stages."""
    name = rec["pool"]
    headline = section.locator(".headline").inner_text()
    assert headline == view["headline"], name
    assert str(rec["desired_nodes"]) in headline
    assert len(headline.split()) <= 15, headline
    stages = rec["explanation"]["stages"]
    expected = {
        "forecast": stages["forecast_nodes"],
        "floor": stages["floor_nodes"],
        "bounds": stages["bounded"],
        "stabilisation": stages["stabilised"],
        "final": rec["desired_nodes"],
    }
    for term, nodes in expected.items():
        row = section.locator(f'table.terms tr[data-term="{term}"]')
        assert row.locator("td").nth(1).inner_text() == str(nodes), (name, term)
    decisive = section.locator("table.terms tr.decisive")
    assert decisive.count() == 1, name
    # The long sentence is still there for whoever wants it, folded away.
    assert not section.locator("details.summary p").is_visible()


def _check_freshness(section: Locator, name: str) -> None:
    rows = section.locator("table.freshness")
    assert "2025-03-30 23:55Z" in rows.locator('[data-field="newest-sample"]').inner_text()
    assert "from data until 2025-03-30" in rows.locator('[data-field="forecast"]').inner_text()
    assert "MASE 0.74" in rows.locator('[data-field="live-error"]').inner_text(), name


def test_dashboard_shows_every_pool_without_console_errors(base_url: str) -> None:
    names = load_pools(SAMPLE_POOLS).names
    expected = httpx.get(f"{base_url}/recommendation", timeout=30).json()
    recs = {rec["pool"]: rec for rec in expected["pools"]}
    assert set(recs) == set(names), expected["unavailable"]
    views = {
        name: httpx.get(f"{base_url}/dashboard/pool/{name}", timeout=30).json() for name in names
    }

    with browser_page() as (page, console):
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        for name in names:
            section = page.locator(f'section[data-pool="{name}"][data-state="ready"]')
            section.wait_for(timeout=30_000)
            assert section.locator("h2").first.inner_text().startswith(name)
            shown = section.locator('[data-field="desired nodes"] b').inner_text()
            assert shown == str(recs[name]["desired_nodes"])
            _check_chart(section, views[name], name)
            _check_explanation(section, views[name], recs[name])
            _check_freshness(section, name)
        page.locator('body[data-state="ready"]').wait_for(timeout=10_000)
        _check_status(page.locator('#status[data-state="ready"]'))
        path = screenshot(page, "dashboard.png")

    assert console.errors == []
    assert path.stat().st_size > 10_000


def _check_status(status: Locator) -> None:
    """The model (linked in MLflow), its forecast run and the scheduler's jobs."""
    link = status.locator("a.mlflow")
    assert link.get_attribute("href") == f"{MLFLOW_UI}/#/models/foresight-demand/versions/1"
    assert "(wall clock)" in status.locator('[data-field="promoted"]').inner_text()
    run = status.locator('[data-field="forecast-run"] td').inner_text()
    assert run.startswith("made 2025-03-30"), run
    assert "sample-host:4242" in status.locator('[data-field="leader"]').inner_text()
    assert status.locator('tr[data-job="evaluate"] .outcome').inner_text() == "ok"
    assert status.locator('tr[data-job="ingest"] .outcome').inner_text() == "never ran"


def test_the_range_control_redraws_the_chart_over_a_day(base_url: str) -> None:
    name = load_pools(SAMPLE_POOLS).names[0]
    day = httpx.get(f"{base_url}/dashboard/pool/{name}?hours=24", timeout=30).json()
    with browser_page() as (page, console):
        page.goto(f"{base_url}/", wait_until="domcontentloaded")
        page.locator('body[data-state="ready"]').wait_for(timeout=30_000)
        page.locator('#range button[data-hours="24"]').click()
        page.locator('#range button[data-hours="24"][aria-pressed="true"]').wait_for()
        page.wait_for_function(
            f"document.querySelectorAll('section[data-pool=\"{name}\"] circle.event.nodes')"
            f".length === {sum(e['kind'] == 'nodes' for e in day['events'])}",
            timeout=15_000,
        )
    assert console.errors == []


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
    with serve_sample(tmp_path_factory.mktemp("scorecard"), prepare=(record_plan,)) as url:
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


def test_an_empty_call_chain_says_how_to_send_spans(scorecard_url: str) -> None:
    """No span has reached this app: the panel gives the OTLP route and exporter settings."""
    with browser_page() as (page, console):
        page.goto(f"{scorecard_url}/", wait_until="domcontentloaded")
        page.locator('body[data-state="ready"]').wait_for(timeout=30_000)
        hint = page.locator("#bottlenecks .chain-hint")
        assert "POST /v1/traces" in hint.inner_text()
        sdk = hint.locator("pre.otel-sdk").inner_text()
        assert f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={scorecard_url}/v1/traces" in sdk
        collector = hint.locator("pre.otel-collector").inner_text()
        assert f"traces_endpoint: {scorecard_url}/v1/traces" in collector
    assert console.errors == []
