"""Issue #37: what a flood of span service names and far-future span times can do.

10,000 distinct service names in one push must leave ``/signals/chain`` and
``/metrics`` within a small fixed size, and span times outside the limits of metric
samples are refused per span (partial success).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from api.callchain.bottleneck_settings import DEFAULT_MAX_SERVICES
from api.callchain.incremental import ChainWindow
from api.main import create_app
from api.services import Services
from tests.api.app.test_app_traces import MS, T0, chain, otlp_request


@pytest.fixture
def services(make_services: Callable[..., Services], clock: Any) -> Services:
    return make_services(clock=clock, spans=ChainWindow(settle=timedelta(0)))


def _names(count: int, first: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"n{i}",
            "span_id": "s",
            "service": f"svc-{i}",
            "start": T0 + i * MS,
            "duration_ms": 5,
        }
        for i in range(first, first + count)
    ]


def _sizes(client: TestClient, app: Any) -> tuple[int, int, str]:
    app.state.latency.update(app.state.service.live)
    chain_body = client.get("/signals/chain")
    metrics = client.get("/metrics").text
    return len(chain_body.content), len(metrics), metrics


def test_ten_thousand_service_names_leave_chain_and_metrics_a_fixed_size(
    services: Services,
) -> None:
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    with TestClient(app) as client:
        client.post("/signals/spans", json=chain(30, 50))
        chain_before, metrics_before, _ = _sizes(client, app)
        assert client.post("/signals/spans", json=_names(10_000)).json()["accepted"] == 10_000
        chain_after, metrics_after, metrics = _sizes(client, app)
        body = client.get("/signals/chain").json()
        client.post("/signals/spans", json=_names(10_000, first=10_000))
        chain_twice, metrics_twice, _ = _sizes(client, app)

    names = {s["service"] for s in body["services"]}
    assert len(names) <= DEFAULT_MAX_SERVICES + 1
    assert "other" in names
    # A hundred names' worth, whatever more is sent (it was 5.1 MB and 4.04 MB).
    assert chain_after - chain_before < 100_000
    assert metrics_after - metrics_before < 60_000
    assert (chain_twice, metrics_twice) == pytest.approx((chain_after, metrics_after), rel=0.05)
    overflow = 10_000 - (DEFAULT_MAX_SERVICES - 2)  # gateway and ranker took two places
    assert f"foresight_span_services_overflow_total {float(overflow)}" in metrics


def test_span_times_outside_the_sample_limits_are_refused_per_span(client: TestClient) -> None:
    far = 2**63 - 1  # year 2262
    spans = chain(2, 50)
    spans[0]["start"] = far
    spans.append({**spans[1], "span_id": "old", "start": 946_684_799 * 10**9})  # 1999

    body = client.post("/signals/spans", json=spans).json()

    assert (body["accepted"], body["rejected"]) == (3, 2)
    reasons = " ".join(body["rejected_reasons"])
    assert "service.max_sample_future_seconds" in reasons
    assert "before the earliest accepted 2000-01-01" in reasons


def test_an_otlp_span_from_2262_is_a_partial_success(client: TestClient) -> None:
    request = otlp_request("ranker", 3)
    far = request.resource_spans[0].scope_spans[0].spans[1]
    far.start_time_unix_nano = 2**63 - 1
    far.end_time_unix_nano = 2**63 - 1

    response = client.post(
        "/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )

    assert response.status_code == 200
    reply = ExportTraceServiceResponse.FromString(response.content)
    assert reply.partial_success.rejected_spans == 1
    assert "start time 2262-04-11T23:47:16Z is later than now" in (
        reply.partial_success.error_message
    )
