"""POST /signals/metrics: validated, stored, demand derived, recommendations recomputed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.schemas import MAX_SAMPLES_PER_PUSH
from api.settings import AppSettings
from forecaster.registry import LoadedModel
from pipelines.store.store import Store

from .conftest import run_forecast_job

AT = "2025-03-31T00:00:00Z"


def _burst(allocated: float, queue: float, nodes: float, at: str = AT) -> list[dict[str, Any]]:
    return [
        {"series_id": "alpha/allocated_gpus", "ts": at, "value": allocated},
        {"series_id": "alpha/queue_gpus", "ts": at, "value": queue},
        {"series_id": "alpha/nodes", "ts": at, "value": nodes},
    ]


def test_pushed_samples_change_the_recommendation(
    client: TestClient, store: Store, clock: Any
) -> None:
    before = client.get("/recommendation/alpha").json()
    clock.advance(timedelta(minutes=5))

    response = client.post("/signals/metrics", json=_burst(200, 120, 12))
    after = client.get("/recommendation/alpha").json()

    assert response.status_code == 200
    assert response.json() == {"accepted": 3, "rows_written": 4, "pools": ["alpha"]}
    assert after["generated_at"] == AT
    assert after["explanation"]["inputs"]["live_demand_gpus"]["value"] == 320.0
    # 320 GPUs occupy 40 nodes: the live floor wins over the older forecast, capped at max.
    assert after["desired_nodes"] == 40
    assert after["desired_nodes"] > before["desired_nodes"]
    assert after["action"] == "scale_up"
    demand = store.samples.read(["alpha/demand_gpus"], start=datetime(2025, 3, 31, tzinfo=UTC))
    assert demand["y"].tolist() == [320.0]
    # The change is in the audit trail.
    assert store.recommendations.latest("alpha").desired_nodes == 40  # type: ignore[union-attr]


def test_a_push_keeps_the_stored_forecast_until_the_forecast_job_stores_a_newer_one(
    client: TestClient, clock: Any, settings: AppSettings, store: Store, champion: LoadedModel
) -> None:
    before = client.get("/forecast/alpha").json()
    clock.advance(timedelta(minutes=5))

    client.post("/signals/metrics", json=_burst(10, 0, 3))
    pushed = client.get("/forecast/alpha").json()
    run_forecast_job(settings, store, champion, clock.now)
    client.app.state.service.refresh()  # type: ignore[attr-defined]
    after = client.get("/forecast/alpha").json()

    assert before["last_observed"] == "2025-03-30T23:55:00Z"
    # The service makes no forecast of its own: the stored one stands.
    assert pushed["last_observed"] == "2025-03-30T23:55:00Z"
    assert after["last_observed"] == "2025-03-31T00:00:00Z"
    assert after["records"][0]["ds"] == "2025-03-31T00:05:00Z"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([{"series_id": "alpha/nodes", "ts": "2025-03-31T00:00:00", "value": 1}], "timezone"),
        ([{"series_id": "alpha-nodes", "ts": AT, "value": 1}], "series_id"),
        ([{"series_id": "alpha/nodes", "ts": AT}], "value"),
        ([{"series_id": "alpha/nodes", "ts": AT, "value": "many"}], "value"),
        ([{"series_id": "alpha/nodes", "ts": AT, "value": 1, "extra": 1}], "extra"),
        ({"series_id": "alpha/nodes", "ts": AT, "value": 1}, "list"),
    ],
)
def test_malformed_samples_are_422_with_a_message(
    client: TestClient, body: Any, fragment: str
) -> None:
    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"
    assert fragment in response.text


def test_samples_checked_off_the_event_loop_keep_the_frameworks_words_and_places(
    client: TestClient, store: Store
) -> None:
    # The framework only checks the body is a list; the samples are validated in the
    # worker thread, with the shape and words the framework gives a body it validates.
    body = [{"series_id": "alpha/nodes", "ts": AT, "value": 1}, 7, {"series_id": "alpha/nodes"}]

    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "loc": ["body", 1],
            "msg": "Input should be a valid dictionary or object to extract fields from",
            "type": "model_attributes_type",
        },
        {"loc": ["body", 2, "ts"], "msg": "Field required", "type": "missing"},
        {"loc": ["body", 2, "value"], "msg": "Field required", "type": "missing"},
    ]
    assert response.json()["message"].startswith("invalid request: body.1: Input should be")
    assert store.samples.last_timestamp("alpha/nodes").isoformat() == (  # type: ignore[union-attr]
        "2025-03-30T23:55:00+00:00"
    )


def test_non_finite_values_are_rejected(client: TestClient) -> None:
    raw = '[{"series_id": "alpha/nodes", "ts": "2025-03-31T00:00:00Z", "value": NaN}]'

    response = client.post(
        "/signals/metrics", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 422


def test_invalid_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/signals/metrics", content=b"[{", headers={"content-type": "application/json"}
    )

    assert response.status_code == 422
    assert "json" in response.json()["message"].lower()


def test_unknown_pool_and_negative_counts_store_nothing(client: TestClient, store: Store) -> None:
    body = [
        {"series_id": "gamma/nodes", "ts": AT, "value": 1},
        {"series_id": "alpha/queue_gpus", "ts": AT, "value": -3},
    ]

    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422
    message = response.json()["message"]
    assert "unknown pools ['gamma']; known pools: alpha, beta" in message
    assert "alpha/queue_gpus: queue_gpus counts GPUs or nodes, got negative -3.0" in message
    assert store.samples.last_timestamp("alpha/queue_gpus").isoformat() == (  # type: ignore[union-attr]
        "2025-03-30T23:55:00+00:00"
    )


def test_too_many_samples_is_422(client: TestClient) -> None:
    body = [{"series_id": "alpha/gpu_util", "ts": AT, "value": 1}] * (MAX_SAMPLES_PER_PUSH + 1)

    response = client.post("/signals/metrics", json=body)

    assert response.status_code == 422


def test_empty_push_is_accepted(client: TestClient) -> None:
    response = client.post("/signals/metrics", json=[])

    assert response.status_code == 200
    assert response.json() == {"accepted": 0, "rows_written": 0, "pools": []}


def test_a_backfill_is_stored_without_deciding_again(
    client: TestClient, store: Store, clock: Any
) -> None:
    before = client.get("/recommendation/alpha").json()
    clock.advance(timedelta(minutes=1))  # the answer stands until its valid_until
    audited = store.recommendations.latest("alpha")

    # Older than every reading: stored (demand derived), but no input of the decision moved.
    old = "2025-03-30T12:00:00Z"
    response = client.post("/signals/metrics", json=_burst(200, 120, 12, at=old))
    after = client.get("/recommendation/alpha").json()

    assert response.json() == {"accepted": 3, "rows_written": 4, "pools": ["alpha"]}
    demand = store.samples.read(["alpha/demand_gpus"], start=datetime(2025, 3, 30, 12, tzinfo=UTC))
    assert demand["y"].iloc[0] == 320.0
    assert after == before  # the standing answer, not one decided again at the later clock
    assert store.recommendations.latest("alpha") == audited
    # A newer sample of the same pool is decided at once.
    client.post("/signals/metrics", json=_burst(200, 120, 12))
    assert client.get("/recommendation/alpha").json()["generated_at"] == "2025-03-30T23:56:00Z"
