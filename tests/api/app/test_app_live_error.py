"""The evaluate job's live error reaches the decision and /metrics (#13 item 5).

The scheduler stores each evaluate run with its details (live MASE per series); the
app wires that in as the policy's error source, so a pool whose demand forecast
errs beyond the bound goes reactive and ``foresight_live_forecast_error`` has samples.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from pipelines.jobs.evaluate import JOB, LIVE_MASE, MODEL_VERSION_KEY
from pipelines.store.store import Store


def record_evaluation(store: Store, errors: dict[str, float], version: str = "7") -> None:
    """Record a finished evaluate run as the scheduler does."""
    at = datetime(2025, 3, 30, 23, 0, tzinfo=UTC)
    run = store.job_runs.start(JOB, runner="test", started_at=at)
    store.job_runs.finish(
        run,
        "ok",
        "scored",
        finished_at=at,
        details={LIVE_MASE: errors, MODEL_VERSION_KEY: version, "retrain": False},
    )


def test_a_degraded_pool_goes_reactive_and_its_error_is_exposed(
    client: TestClient, store: Store
) -> None:
    record_evaluation(store, {"alpha/demand_gpus": 3.5, "beta/demand_gpus": 0.5})
    client.app.state.service.invalidate()  # type: ignore[attr-defined]

    alpha = client.get("/recommendation/alpha").json()
    beta = client.get("/recommendation/beta").json()
    metrics = client.get("/metrics").text

    assert alpha["mode"] == "reactive"
    assert "error" in alpha["explanation"]["health_reasons"]
    assert beta["mode"] == "predictive"
    assert 'foresight_live_forecast_error{pool="alpha"} 3.5' in metrics
    assert 'foresight_live_forecast_error{pool="beta"} 0.5' in metrics


def test_another_versions_scores_are_ignored(client: TestClient, store: Store) -> None:
    record_evaluation(store, {"alpha/demand_gpus": 3.5}, version="6")
    client.app.state.service.invalidate()  # type: ignore[attr-defined]

    alpha = client.get("/recommendation/alpha").json()

    assert alpha["mode"] == "predictive"
    assert "foresight_live_forecast_error{" not in client.get("/metrics").text
