"""GET /metrics: per-pool gauges from the service and request latency, per app."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.services import Services
from pipelines.config.pools import PoolConfig


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def pool(name: str) -> frozenset[tuple[str, str]]:
    return frozenset({("pool", name)})


def test_metrics_expose_the_recommendation_of_each_pool(client: TestClient) -> None:
    recs = {p["pool"]: p for p in client.get("/recommendation").json()["pools"]}
    configured = {p["name"]: p for p in client.get("/pools").json()["pools"]}

    response = client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = samples(response.text)
    for name, rec in recs.items():
        assert got[("foresight_desired_nodes", pool(name))] == rec["desired_nodes"]
        assert got[("foresight_current_nodes", pool(name))] == rec["current_nodes"]
        assert got[("foresight_headroom_pods", pool(name))] == rec["headroom_pods"]
        assert got[("foresight_recommendation_available", pool(name))] == 1.0
        assert got[("foresight_min_nodes", pool(name))] == configured[name]["min_nodes"]
        assert got[("foresight_max_nodes", pool(name))] == configured[name]["max_nodes"]
        forecast_age = rec["explanation"]["inputs"]["forecast_peak_gpus"]["age_seconds"]
        assert got[("foresight_model_age_seconds", pool(name))] == forecast_age
        # The fixture's clock is at the newest sample.
        assert got[("foresight_data_age_seconds", pool(name))] == 0.0
    model = frozenset({("version", "7"), ("source", "registry")})
    assert got[("foresight_model_info", model)] == 1.0
    assert got[("foresight_spans_in_window", frozenset())] == 0.0
    # No live error is measured by the fixture's services.
    assert not any(name == "foresight_live_forecast_error" for name, _ in got)


def test_request_latency_is_labelled_by_route_template(client: TestClient) -> None:
    for name in ("alpha", "beta", "alpha"):
        client.get(f"/recommendation/{name}")
    client.get("/no/such/path")

    got = samples(client.get("/metrics").text)

    labels = frozenset({("method", "GET"), ("route", "/recommendation/{pool}"), ("status", "200")})
    assert got[("foresight_http_request_duration_seconds_count", labels)] == 3
    assert got[("foresight_http_request_duration_seconds_sum", labels)] > 0
    unmatched = frozenset({("method", "GET"), ("route", "unmatched"), ("status", "404")})
    assert got[("foresight_http_request_duration_seconds_count", unmatched)] == 1


def test_live_forecast_error_is_exposed_when_measured(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
) -> None:
    def error(p: PoolConfig, now: datetime) -> tuple[float | None, datetime | None]:
        return (0.8, now) if p.name == "alpha" else (None, None)

    with TestClient(make_app(make_services(clock=clock, live_error=error))) as client:
        got = samples(client.get("/metrics").text)

    assert got[("foresight_live_forecast_error", pool("alpha"))] == 0.8
    assert ("foresight_live_forecast_error", pool("beta")) not in got


def test_each_app_counts_only_its_own_requests(
    services: Services, make_app: Callable[[Services], FastAPI]
) -> None:
    first, second = make_app(services), make_app(services)
    with TestClient(first) as one:
        one.get("/pools")
        one.get("/pools")
    with TestClient(second) as two:
        two.get("/pools")
        got = samples(two.get("/metrics").text)

    labels = frozenset({("method", "GET"), ("route", "/pools"), ("status", "200")})
    assert got[("foresight_http_request_duration_seconds_count", labels)] == 1


def test_metrics_count_the_webhook_outbox_by_status_dead_letters_included(
    client: TestClient, services: Services
) -> None:
    outbox = services.store.outbox
    ids = [outbox.enqueue("http://receiver.test/hook", b"{}", f"k{i}") for i in range(4)]
    outbox.claim_due()
    outbox.mark_delivered(ids[0])
    outbox.give_up(ids[1], "HTTP 410 Gone")
    outbox.give_up(ids[2], "HTTP 401 Unauthorized")

    got = samples(client.get("/metrics").text)

    def status(name: str) -> frozenset[tuple[str, str]]:
        return frozenset({("status", name)})

    assert got[("foresight_webhook_outbox_items", status("pending"))] == 1.0
    assert got[("foresight_webhook_outbox_items", status("delivered"))] == 1.0
    assert got[("foresight_webhook_outbox_items", status("dead"))] == 2.0


def test_live_coverage_and_calibration_offset_are_exposed_when_measured(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
) -> None:
    from policy.types import Calibration

    def calibration(p: PoolConfig, level: float) -> Calibration | None:
        return Calibration(3.5, 0.82, 40) if (p.name, level) == ("alpha", 0.9) else None

    services = make_services(clock=clock, calibration=calibration)
    with TestClient(make_app(services)) as client:
        got = samples(client.get("/metrics").text)

    assert got[("foresight_live_coverage", pool("alpha"))] == 0.82
    assert got[("foresight_calibration_offset_gpus", pool("alpha"))] == 3.5
    assert ("foresight_live_coverage", pool("beta")) not in got
