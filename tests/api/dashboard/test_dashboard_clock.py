"""The dashboard shows one time: the decision clock's, whatever the spans ride (#35).

The operator's page said "as of 2025-03-30" (the replay clock of the recommendations)
beside "analysed 2026-12-06" (the call-chain analysis, dated by the span window's wall
clock). Every time the page reads comes from the decision clock now: the set's
``generated_at``, the history's ``until`` and the chain's ``analysed_at``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from api.clock import ReplayClock
from api.main import create_app
from api.services import Services

END_ISO = "2025-03-30T23:55:00Z"
WALL = datetime(2026, 12, 6, 21, 0, tzinfo=UTC)


def _z(text: str) -> str:
    return text.replace("+00:00", "Z")


def test_every_time_the_page_reads_is_the_decision_clocks(services: Services) -> None:
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    with TestClient(app) as client:
        # As `serve --clock replay` builds it; the spans keep the wall clock they arrive by.
        app.state.services.clock = ReplayClock(app.state.service.live.newest, fallback=lambda: WALL)
        app.state.latency.update(app.state.service.live)
        recs = client.get("/recommendation").json()
        history = client.get("/dashboard/history/alpha", params={"hours": 1}).json()
        chain = client.get("/signals/chain").json()

    assert _z(recs["generated_at"]) == END_ISO
    assert _z(history["until"]) == END_ISO
    assert _z(chain["analysed_at"]) == END_ISO
    for rec in recs["pools"]:
        assert _z(rec["generated_at"]) == END_ISO
        assert rec["valid_until"] > rec["generated_at"]
    assert all(_z(p["ds"]) <= END_ISO for p in history["series"]["demand_gpus"])


def test_the_chart_draws_now_at_the_recommendations_time() -> None:
    from api.dashboard.page import asset_text

    script = asset_text("dashboard.js")

    # The "now" line is the set's generated_at, not a second reading of the clock.
    assert "history.until" not in script
    assert "Date.parse(recs.generated_at)" in script
