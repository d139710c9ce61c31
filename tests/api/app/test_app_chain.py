"""GET /signals/chain and the per-service gauges of /metrics, from a real analysis."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.callchain.incremental import ChainWindow
from api.main import create_app
from api.services import Services
from pipelines.config.pools import PoolsConfig
from tests.api.app.test_app_traces import chain


@pytest.fixture
def services(make_services: Callable[..., Services], clock: Any) -> Services:
    """Services whose span window folds spans in at once (no settle delay)."""
    return make_services(clock=clock, spans=ChainWindow(settle=timedelta(0)))


@pytest.fixture
def pools() -> PoolsConfig:
    """alpha runs the gateway (SLO 500 ms) and the ranker (SLO 100 ms)."""
    return PoolsConfig.model_validate(
        {
            "pools": [
                {
                    "name": "alpha",
                    "node_group_id": "ng-alpha",
                    "max_nodes": 40,
                    "services": [
                        {"name": "gateway", "slo_p95_ms": 500},
                        {"name": "ranker", "slo_p95_ms": 100},
                    ],
                }
            ]
        }
    )


def test_chain_shows_services_edges_exclusive_time_and_the_blamed_service(
    services: Services,
) -> None:
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    with TestClient(app) as client:
        empty = client.get("/signals/chain").json()
        client.post("/signals/spans", json=chain(30, 400))
        app.state.latency.update(app.state.service.live)
        body = client.get("/signals/chain").json()
        metrics = client.get("/metrics").text

    assert (empty["analysed_at"], empty["services"]) == (None, [])  # before any analysis
    assert empty["bottlenecks"] == []
    by_name = {entry["service"]: entry for entry in body["services"]}
    gateway, ranker = by_name["gateway"], by_name["ranker"]
    assert body["edges"] == [{"caller": "gateway", "callee": "ranker"}]
    assert body["bottlenecks"] == ["ranker"]
    assert body["spans_in_window"] == 60
    assert (ranker["verdict"], ranker["culprit"], ranker["pool"]) == ("bottleneck", True, "alpha")
    # Sketched quantiles are within 0.1 % of the data.
    assert ranker["p95_ms"] == pytest.approx(400, rel=0.002)
    assert ranker["callers"] == ["gateway"]
    assert gateway["callees"] == ["ranker"]
    # The gateway's call lasts 420 ms, 400 of them in the ranker: its own p95 is 20 ms.
    assert gateway["p95_ms"] == pytest.approx(420, rel=0.002)
    assert gateway["own_p95_ms"] == pytest.approx(20, rel=0.002)
    assert gateway["verdict"] == "near"  # 420 of 500 ms, but not blamed
    assert body["pools"]["alpha"]["extra_nodes"] > 0
    gauges = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line[:1] != "#")
    own = float(gauges['foresight_service_own_p95_ms{pool="alpha",service="gateway"}'])
    assert own == pytest.approx(20, rel=0.002)
    p95 = float(gauges['foresight_service_p95_ms{pool="alpha",service="ranker"}'])
    assert p95 == pytest.approx(400, rel=0.002)
    assert (
        'foresight_service_bottleneck{pool="alpha",service="ranker",verdict="bottleneck"} 1.0'
        in metrics
    )
    assert 'foresight_service_slo_ms{pool="alpha",service="ranker"} 100.0' in metrics
