"""GET /forecast/{pool}, /pools, /healthz, /readyz and the OpenAPI docs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.services import Services
from api.settings import AppSettings
from forecaster.registry import LoadedModel
from pipelines.store.store import Store

from .conftest import END, run_forecast_job


def test_forecast_records_of_demand(client: TestClient) -> None:
    response = client.get("/forecast/alpha")

    assert response.status_code == 200
    body = response.json()
    assert body["series_id"] == "alpha/demand_gpus"
    assert body["model_version"] == "7"
    assert body["step_seconds"] == 300.0
    assert body["levels"] == [0.5, 0.8, 0.9]
    first = body["records"][0]
    assert first["ds"] == "2025-03-31T00:00:00Z"
    assert first["step"] == 1
    assert first["model"] == "champion"  # as the forecast job stored it
    assert first["q0.5"] <= first["q0.9"]
    # At least the horizon, and at least the pool's lead time plus a step.
    assert len(body["records"]) >= 12


def test_forecast_of_unknown_pool_is_404(client: TestClient) -> None:
    response = client.get("/forecast/gamma")

    assert response.status_code == 404
    assert "known pools: alpha, beta" in response.json()["message"]


def test_pools_lists_the_config(client: TestClient) -> None:
    body = client.get("/pools").json()

    alpha = body["pools"][0]
    assert [p["name"] for p in body["pools"]] == ["alpha", "beta"]
    assert alpha["lead_time_seconds"] == 600.0
    assert alpha["scale_down"] == {
        "window_seconds": 600.0,
        "max_step_nodes": 1,
        "max_step_percent": 10.0,
    }
    assert 'label_foresight_io_pool="alpha"' in alpha["signals"]["nodes"]["promql"]


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_ready_with_model_store_and_fresh_data(client: TestClient) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True
    assert body["reasons"] == []
    assert body["checks"]["model"] == {
        "ok": True,
        "version": "7",
        "source": "registry",
        "served_version": "7",
        # Injected services without a champion source never ask the registry.
        "registry": {"checked": False},
    }


def test_not_ready_without_model_or_with_stale_data(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    new_clock: Callable[..., Any],
) -> None:
    clock = new_clock()
    clock.advance(timedelta(hours=1))
    services = make_services(model=None, model_problem="registry unreachable", clock=clock)
    with TestClient(make_app(services)) as client:
        response = client.get("/readyz")

    assert response.status_code == 503
    reasons = response.json()["reasons"]
    assert reasons[0] == "no model is loaded: registry unreachable"
    assert reasons[1].startswith("live data is missing or stale for pools: alpha (3600 s old)")
    assert response.json()["checks"]["data"]["stale_pools"] == ["alpha", "beta"]


def test_ready_says_when_serving_the_last_known_good_copy(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    champion: LoadedModel,
    settings: AppSettings,
    store: Store,
) -> None:
    lkg = LoadedModel(champion.model, "6", "last_known_good", "the registry is unreachable")
    run_forecast_job(settings, store, lkg, END + timedelta(seconds=10))
    with TestClient(make_app(make_services(model=lkg))) as client:
        body = client.get("/readyz").json()
        alpha = client.get("/recommendation/alpha").json()

    assert body["ready"] is True
    assert body["checks"]["model"]["source"] == "last_known_good"
    assert body["checks"]["model"]["note"] == "the registry is unreachable"
    assert alpha["model_version"] == "6"


def test_openapi_documents_every_route(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()

    assert {
        "/recommendation",
        "/recommendation/{pool}",
        "/forecast/{pool}",
        "/pools",
        "/signals/metrics",
        "/healthz",
        "/readyz",
    } <= set(spec["paths"])
    item = spec["components"]["schemas"]["PoolRecommendation"]
    assert item["properties"]["desired_nodes"]["type"] == "integer"
    assert client.get("/docs").status_code == 200


def test_requests_before_startup_get_503(
    make_app: Callable[[Services], FastAPI], services: Services
) -> None:
    client = TestClient(make_app(services))  # no context manager: the lifespan never runs

    response = client.get("/recommendation")

    assert response.status_code == 503
