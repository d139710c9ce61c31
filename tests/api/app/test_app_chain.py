"""GET /signals/chain and the per-service gauges of /metrics, from a real analysis."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.service import Services
from forecaster.config.pools import PoolsConfig
from tests.api.app.test_app_traces import chain


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
    assert ranker["p95_ms"] == 400
    assert ranker["callers"] == ["gateway"]
    assert gateway["callees"] == ["ranker"]
    # The gateway's call lasts 420 ms, 400 of them in the ranker: its own p95 is 20 ms.
    assert gateway["p95_ms"] == 420
    assert gateway["own_p95_ms"] == 20
    assert gateway["verdict"] == "near"  # 420 of 500 ms, but not blamed
    assert body["pools"]["alpha"]["extra_nodes"] > 0
    assert 'foresight_service_own_p95_ms{pool="alpha",service="gateway"} 20.0' in metrics
    assert 'foresight_service_p95_ms{pool="alpha",service="ranker"} 400.0' in metrics
    assert (
        'foresight_service_bottleneck{pool="alpha",service="ranker",verdict="bottleneck"} 1.0'
        in metrics
    )
    assert 'foresight_service_slo_ms{pool="alpha",service="ranker"} 100.0' in metrics
