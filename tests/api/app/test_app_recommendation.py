"""GET /recommendation and /recommendation/{pool}: shapes, modes, errors, audit trail."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.services import Services
from pipelines.store.store import Store


def gjson(document: Any, path: str) -> Any:
    """Walk a GJSON path of keys and array indexes (``\\.`` escapes a dot), as KEDA does."""
    parts = [p.replace("\0", ".") for p in path.replace("\\.", "\0").split(".")]
    node = document
    for part in parts:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_all_pools_in_file_order_with_plain_numbers(client: TestClient) -> None:
    response = client.get("/recommendation")

    assert response.status_code == 200
    body = response.json()
    assert [p["pool"] for p in body["pools"]] == ["alpha", "beta"]
    assert body["unavailable"] == []
    alpha = body["pools"][0]
    for key in ("current_nodes", "desired_nodes", "delta", "headroom_nodes", "headroom_pods"):
        assert type(alpha[key]) is int, key
    assert alpha["delta"] == alpha["desired_nodes"] - alpha["current_nodes"]
    assert alpha["action"] in {"scale_up", "hold", "scale_down"}
    assert isinstance(alpha["data_freshness_seconds"], float)
    assert alpha["generated_at"].endswith("Z")
    assert alpha["valid_until"] > alpha["generated_at"]


def test_keda_gjson_path_reads_desired_nodes(client: TestClient) -> None:
    body = client.get("/recommendation", params={"pool": "beta"}).json()

    value = gjson(body, "pools.0.desired_nodes")

    assert isinstance(value, int)
    assert value == client.get("/recommendation/beta").json()["desired_nodes"]
    assert (
        gjson(body, "pools.0.forecast_quantiles.q0\\.8")
        == body["pools"][0]["forecast_quantiles"]["q0.8"]
    )


def test_predictive_with_a_model(client: TestClient) -> None:
    alpha = client.get("/recommendation/alpha").json()

    assert alpha["mode"] == "predictive"
    assert alpha["model_version"] == "7"
    assert alpha["quantile"] == 0.9
    assert set(alpha["forecast_quantiles"]) == {"q0.5", "q0.8", "q0.9"}
    assert alpha["forecast_quantiles"]["q0.9"] >= alpha["forecast_quantiles"]["q0.5"]
    assert alpha["explanation"]["term"] in {"forecast", "floor", "bounds", "stabilisation"}
    assert alpha["explanation"]["inputs"]["live_demand_gpus"]["age_seconds"] == 0.0
    assert alpha["valid_until"] == "2025-03-31T00:00:00Z"  # one 5-min step after now


def test_filter_keeps_file_order_and_rejects_unknown(client: TestClient) -> None:
    body = client.get("/recommendation", params=[("pool", "beta"), ("pool", "alpha")]).json()
    assert [p["pool"] for p in body["pools"]] == ["alpha", "beta"]

    response = client.get("/recommendation", params=[("pool", "alpha"), ("pool", "gamma")])
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_pool"
    assert "'gamma'" in response.json()["message"]
    assert response.json()["known_pools"] == ["alpha", "beta"]


def test_unknown_pool_is_404_naming_known_pools(client: TestClient) -> None:
    response = client.get("/recommendation/gamma")

    assert response.status_code == 404
    assert response.json()["message"] == "no pool named 'gamma'; known pools: alpha, beta"


def test_reactive_without_a_model(
    make_services: Callable[..., Services], make_app: Callable[[Services], FastAPI]
) -> None:
    services = make_services(model=None, model_problem="the registry has no champion")
    with TestClient(make_app(services)) as client:
        alpha = client.get("/recommendation/alpha").json()
        forecast = client.get("/forecast/alpha")

    assert alpha["mode"] == "reactive"
    assert alpha["model_version"] is None
    # No forecast: the live demand the reactive decision used, under every served level
    # (issue #36: KEDA's documented q0.9 path must exist in every mode).
    demand = alpha["explanation"]["inputs"]["live_demand_gpus"]["value"]
    assert set(alpha["forecast_quantiles"].values()) == {demand}
    assert "q0.9" in alpha["forecast_quantiles"]
    assert alpha["explanation"]["health_reasons"] == ["no_forecast"]
    assert alpha["explanation"]["term"] in {"reactive", "stabilisation", "bounds"}
    assert forecast.status_code == 503
    assert "the registry has no champion" in forecast.json()["message"]


def test_stale_live_data_falls_back_to_reactive(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    new_clock: Callable[..., Any],
) -> None:
    clock = new_clock()
    clock.advance(timedelta(minutes=30))  # six steps after the newest sample
    with TestClient(make_app(make_services(clock=clock))) as client:
        alpha = client.get("/recommendation/alpha").json()

    assert alpha["mode"] == "reactive"
    assert "stale_live" in alpha["explanation"]["health_reasons"]
    assert alpha["data_freshness_seconds"] == 1800.0


def test_pool_without_live_data_is_unavailable(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    pools: Any,
) -> None:
    extended = pools.model_validate(
        {"pools": [*pools.model_dump()["pools"], {"name": "gamma", "node_group_id": "ng-g"}]}
    )
    with TestClient(make_app(make_services(pools=extended))) as client:
        listed = client.get("/recommendation").json()
        single = client.get("/recommendation/gamma")

    assert [p["pool"] for p in listed["pools"]] == ["alpha", "beta"]
    assert listed["unavailable"][0]["pool"] == "gamma"
    assert "push them to /signals/metrics" in listed["unavailable"][0]["reason"]
    assert single.status_code == 503
    assert single.json()["error"] == "pool_unavailable"


def test_cached_until_valid_until_then_recomputed(
    client: TestClient, services: Services, clock: Any
) -> None:
    first = client.get("/recommendation/alpha").json()
    clock.advance(timedelta(minutes=2))
    same = client.get("/recommendation/alpha").json()
    clock.advance(timedelta(minutes=4))
    later = client.get("/recommendation/alpha").json()

    assert same["generated_at"] == first["generated_at"]
    assert later["generated_at"] == "2025-03-31T00:01:00Z"


def test_audit_trail_records_changes_only(client: TestClient, store: Store, clock: Any) -> None:
    client.get("/recommendation")
    clock.advance(timedelta(minutes=6))
    client.get("/recommendation")  # recomputed, but nothing changed for beta

    beta = store.recommendations.history("beta")
    assert len(beta) == 1
    assert beta[0].payload["pool"] == "beta"
    assert beta[0].desired_nodes == client.get("/recommendation/beta").json()["desired_nodes"]
