"""Live calibration reaches what is served: from the evaluate run's details to a decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.live_error import StoredLiveError, calibrations_of
from api.services import Services
from api.settings import AppSettings
from forecaster.exceptions import DataValidationError
from pipelines.config.pools import PoolConfig
from pipelines.store.store import Store
from policy.types import Calibration

DETAILS: dict[str, Any] = {
    "model_version": "7",
    "calibration": {
        "alpha/demand_gpus": {
            "q0.9": {"offset": 40.0, "live_coverage": 0.7, "forecasts": 96},
            "q0.5": {"offset": "x", "live_coverage": 0.5, "forecasts": 96},  # malformed
        },
        "beta/demand_gpus": {
            "q0.9": {"offset": 1.0, "live_coverage": float("nan"), "forecasts": 3},
        },
    },
}


def test_calibrations_of_keeps_valid_entries_of_the_served_version() -> None:
    got = calibrations_of(DETAILS, "7")
    assert got == {"alpha/demand_gpus": {"q0.9": Calibration(40.0, 0.7, 96)}}
    assert calibrations_of(DETAILS, "8") == {}  # a predecessor's calibration is not used
    assert calibrations_of({"model_version": "7"}, "7") == {}


def _record_evaluation(store: Store, details: dict[str, Any]) -> None:
    run = store.job_runs.start("evaluate", runner="test")
    store.job_runs.finish(run, "ok", "scored", details=details)


def test_the_stored_evaluate_run_gives_each_pool_its_calibration(
    store: Store, services: Services
) -> None:
    _record_evaluation(store, DETAILS)
    source = StoredLiveError(store, lambda: "7")
    alpha, beta = (services.pools.get(name) for name in ("alpha", "beta"))
    assert source.calibration(alpha, 0.9) == Calibration(40.0, 0.7, 96)
    assert source.calibration(alpha, 0.95) is None
    assert source.calibration(beta, 0.9) is None


def _peak(client: TestClient) -> tuple[float, str]:
    explanation = client.get("/recommendation/alpha").json()["explanation"]
    return explanation["inputs"]["forecast_peak_gpus"]["value"], explanation["summary"]


def test_the_offset_raises_the_served_quantile_and_the_explanation_says_so(
    store: Store,
    settings: AppSettings,
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
) -> None:
    _record_evaluation(store, DETAILS)
    with TestClient(make_app(make_services(clock=clock))) as client:
        raised, summary = _peak(client)
    off = settings.model_copy(
        update={"service": settings.service.model_copy(update={"live_calibration": False})}
    )
    with TestClient(make_app(make_services(clock=clock, settings=off))) as client:
        plain, plain_summary = _peak(client)
    assert "live calibration" in summary
    assert "covered 70% of the last 96" in summary
    assert "live calibration" not in plain_summary
    assert raised == pytest.approx(plain + 40.0)


def test_a_callers_own_calibration_source_is_used(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
) -> None:
    asked: list[tuple[str, float]] = []

    def calibration(pool: PoolConfig, level: float) -> Calibration | None:
        asked.append((pool.name, level))
        return Calibration(-1000.0, 1.0, 10) if pool.name == "alpha" else None

    with TestClient(make_app(make_services(clock=clock, calibration=calibration))) as client:
        body = client.get("/recommendation/alpha").json()
    assert ("alpha", 0.9) in asked
    assert "-1e+03 GPUs of live calibration" in body["explanation"]["summary"]


@pytest.mark.parametrize("offset", [float("nan"), float("inf")])
def test_a_calibration_needs_a_finite_offset(offset: float) -> None:
    with pytest.raises(DataValidationError, match="finite offset"):
        Calibration(offset, 0.9, 10)
