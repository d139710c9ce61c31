"""The service serves what the forecast job stored: it never fits or predicts a model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, NoReturn

import pandas as pd
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.service import RecommendationService
from api.services import Services
from api.settings import AppSettings
from forecaster.champion import ChampionForecaster
from forecaster.models.base import Forecaster
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.registry import LoadedModel
from pipelines.store.store import Store

from .conftest import FakeClock, run_forecast_job

AT = "2025-03-31T00:00:00Z"


def _forbidden(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("the service fitted or predicted a model")


@pytest.fixture
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fit and predict of every model family raises from here on."""
    for cls in (ChampionForecaster, Forecaster, PeakQuantileForecaster):
        for name in ("fit", "predict", "predict_peak"):
            if hasattr(cls, name):
                monkeypatch.setattr(cls, name, _forbidden)
    for sub in Forecaster.__subclasses__():
        for name in ("fit", "predict"):
            if name in vars(sub):
                monkeypatch.setattr(sub, name, _forbidden)


def test_the_service_never_fits_or_predicts(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    champion: LoadedModel,
    settings: AppSettings,
    store: Store,
    clock: FakeClock,
    no_models: None,
) -> None:
    with TestClient(make_app(make_services(clock=clock))) as client:
        service: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
        first = client.get("/recommendation").json()["pools"]
        assert [pool["mode"] for pool in first] == ["predictive", "predictive"]
        assert client.get("/forecast/alpha").status_code == 200

        clock.advance(timedelta(minutes=5))
        parts = [
            {"series_id": "alpha/allocated_gpus", "ts": AT, "value": 30},
            {"series_id": "alpha/queue_gpus", "ts": AT, "value": 6},
            {"series_id": "alpha/nodes", "ts": AT, "value": 5},
        ]
        assert client.post("/signals/metrics", json=parts).status_code == 200
        service.refresh()
        assert client.get("/recommendation/alpha").json()["mode"] == "predictive"

        service.use_model(replace(champion, version="9"))  # a promotion: read, not fitted
        assert client.get("/recommendation/alpha").json()["mode"] == "reactive"


def test_a_pool_without_a_stored_forecast_says_why(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    store: Store,
) -> None:
    with store.database.transaction("wipe") as session:
        session.execute(text("DELETE FROM forecasts"))
    with TestClient(make_app(make_services())) as client:
        alpha = client.get("/recommendation/alpha").json()
        answer = client.get("/forecast/alpha")

    assert alpha["mode"] == "reactive"
    assert alpha["explanation"]["health_reasons"] == ["no_forecast"]
    assert answer.status_code == 503
    assert "the forecast job makes them" in answer.json()["message"]


def test_a_forecast_older_than_a_few_steps_goes_reactive_and_says_so(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: FakeClock,
    settings: AppSettings,
    store: Store,
    champion: LoadedModel,
) -> None:
    with TestClient(make_app(make_services(clock=clock))) as client:
        assert client.get("/recommendation/alpha").json()["mode"] == "predictive"
        clock.advance(timedelta(minutes=30))  # the forecast job stopped; live data did not
        for pool, nodes in (("alpha", 5), ("beta", 3)):
            at = clock.now.isoformat().replace("+00:00", "Z")
            body = [
                {"series_id": f"{pool}/allocated_gpus", "ts": at, "value": 30},
                {"series_id": f"{pool}/queue_gpus", "ts": at, "value": 0},
                {"series_id": f"{pool}/nodes", "ts": at, "value": nodes},
            ]
            assert client.post("/signals/metrics", json=body).status_code == 200
        stale = client.get("/recommendation/alpha").json()

        run_forecast_job(settings, store, champion, clock.now)
        client.app.state.service.refresh()  # type: ignore[attr-defined]
        fresh = client.get("/recommendation/alpha").json()

    assert stale["mode"] == "reactive"
    assert stale["explanation"]["health_reasons"] == ["stale_forecast"]
    assert "the forecast is 1799 s old" in stale["explanation"]["summary"]
    assert stale["desired_nodes"] >= 4  # the reactive floor: 30 GPUs on 8-GPU nodes
    assert fresh["mode"] == "predictive"


def stored_with_peak(
    champion: LoadedModel, history: pd.DataFrame, settings: AppSettings, store: Store
) -> LoadedModel:
    """Version 8: the champion with a small peak model fitted on ``history``, its
    forecasts stored by the forecast job."""
    peak_model = PeakQuantileForecaster(
        lead_steps=(2, 3), quantiles=(0.5, 0.8, 0.9), max_iter=20, min_samples_leaf=20
    ).fit(history)
    with_peak = replace(champion, version="8", peak=peak_model)
    run_forecast_job(settings, store, with_peak)
    return with_peak


def test_the_stored_peak_quantile_is_what_the_pool_is_provisioned_for(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    champion: LoadedModel,
    settings: AppSettings,
    store: Store,
    clock: FakeClock,
) -> None:
    history = store.samples.read()
    with_peak = stored_with_peak(champion, history, settings, store)
    stored = store.peak_forecasts.latest("alpha/demand_gpus", "8")

    with TestClient(make_app(make_services(model=with_peak, clock=clock))) as client:
        alpha = client.get("/recommendation/alpha").json()
        beta = client.get("/recommendation/beta").json()
        forecast = client.get("/forecast/alpha").json()

    # alpha: 10 min lead at 5 min steps is lead 2; its q0.9 over 8-GPU nodes, no margin.
    q90 = float(stored.loc[stored["lead"] == 2, "q0.9"].iloc[0])
    assert alpha["forecast_quantiles"]["q0.9"] == pytest.approx(q90)
    assert alpha["explanation"]["stages"]["forecast_nodes"] == -(-q90 // 8)
    assert "q0.9 of the demand peak over the next 10 min" in alpha["explanation"]["summary"]
    # beta: 15 min lead is lead 3, at its own quantile 0.8.
    assert "q0.8 of the demand peak over the next 15 min" in beta["explanation"]["summary"]
    assert forecast["peak"]["lead_seconds"] == 600.0
    assert forecast["peak"]["quantiles"]["q0.9"] == pytest.approx(q90)
    assert forecast["peak_missing"] == ""


def test_a_pool_whose_work_returns_after_an_idle_spell_gets_its_level_before_back(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    champion: LoadedModel,
    settings: AppSettings,
    store: Store,
    clock: FakeClock,
) -> None:
    history = store.samples.read()
    demand = history[history["unique_id"] == "alpha/demand_gpus"].sort_values("ds")
    # The last 40 minutes: 35 at zero (an outage), then 8 GPUs of work back.
    tail = demand.tail(8).assign(y=[0.0] * 7 + [8.0])
    store.samples.upsert(tail)
    before = float(demand["y"].iloc[-20:-8].max())  # the hour before the outage
    with_peak = stored_with_peak(champion, history, settings, store)
    stored = store.peak_forecasts.latest("alpha/demand_gpus", "8")

    with TestClient(make_app(make_services(model=with_peak, clock=clock))) as client:
        alpha = client.get("/recommendation/alpha").json()
        peak = client.get("/forecast/alpha").json()["peak"]

    assert stored["return_level"].tolist() == [before, before]
    assert peak["return_level"] == before
    assert alpha["forecast_quantiles"]["q0.9"] >= before
    assert alpha["explanation"]["stages"]["forecast_nodes"] >= -(-before // 8)
    assert f"held at {before:.4g} GPUs" in alpha["explanation"]["summary"]


def test_a_reader_never_sees_a_new_forecast_beside_the_answer_made_from_the_old_one(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    champion: LoadedModel,
    settings: AppSettings,
    store: Store,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The twin waits until /forecast serves a step's run, then reads the recommendation:
    # while the refresh was still reading the other pools' new forecasts it got the
    # answer decided from the run before.
    with TestClient(make_app(make_services(clock=clock))) as client:
        service: RecommendationService = client.app.state.service  # type: ignore[attr-defined]
        alpha = service.pool("alpha")
        assert client.get("/recommendation/alpha").status_code == 200
        old = service.forecasts.get(alpha).generated_at

        clock.advance(timedelta(minutes=5))
        parts = [
            {"series_id": f"{pool}/{signal}", "ts": AT, "value": value}
            for pool in ("alpha", "beta")
            for signal, value in (("allocated_gpus", 30), ("queue_gpus", 6), ("nodes", 5))
        ]
        assert client.post("/signals/metrics", json=parts).status_code == 200
        assert client.get("/recommendation/alpha").status_code == 200  # from the old run
        run_forecast_job(settings, store, service.services.model, now=clock.now)  # type: ignore[arg-type]

        seen: list[tuple[Any, Any]] = []
        read = service.forecasts._read

        def watched(pool: Any) -> Any:
            seen.append((service.forecasts.get(alpha).generated_at, service.peek([alpha])))
            return read(pool)

        monkeypatch.setattr(service.forecasts, "_read", watched)
        service.refresh()

        assert len(seen) == 2  # both pools' forecasts were read again
        assert service.forecasts.get(alpha).generated_at != old
        for forecast_at, answer in seen:
            assert forecast_at == old or answer is None
