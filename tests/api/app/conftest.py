"""Fixtures of the app tests: a temp SQLite store, two pools, a fitted champion, a clock.

The store holds the forecasts the forecast job made with the champion at ``END``: the
service reads them and fits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.main import create_app
from api.services import Services
from api.settings import AppSettings, load_app_settings
from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolsConfig
from pipelines.jobs.forecast import run_forecast
from pipelines.store.store import Store, open_store

STEP = timedelta(minutes=5)
END = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
"""The newest sample of the synthetic history."""
DAY = 288


@dataclass
class FakeClock:
    """A settable clock."""

    now: datetime = END

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def history(pool: str, *, days: int = 2, end: datetime = END, seed: int = 0) -> pd.DataFrame:
    """Return a daily-seasonal demand history with allocated, queue, nodes and util."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    ds = pd.date_range(end=end, periods=n, freq=STEP, tz="UTC")
    phase = np.arange(n) % DAY / DAY
    demand = np.round(40 + 30 * np.sin(2 * np.pi * phase) + rng.normal(0, 2, n)).clip(0)
    queue = np.round(demand * 0.25)
    allocated = demand - queue
    nodes = np.ceil(allocated / 8) + 1
    util = np.full(n, 60.0)
    frames = [
        pd.DataFrame({"unique_id": f"{pool}/{name}", "ds": ds, "y": values})
        for name, values in {
            "demand_gpus": demand,
            "queue_gpus": queue,
            "allocated_gpus": allocated,
            "nodes": nodes,
            "gpu_util": util,
        }.items()
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.fixture
def pools() -> PoolsConfig:
    return PoolsConfig.model_validate(
        {
            "pools": [
                {
                    "name": "alpha",
                    "node_group_id": "ng-alpha",
                    "gpus_per_node": 8,
                    "min_nodes": 1,
                    "max_nodes": 40,
                    "lead_time": "10m",
                    "quantile": 0.9,
                    "scale_down": {"window": "10m", "max_step_nodes": 1},
                },
                {
                    "name": "beta",
                    "node_group_id": "ng-beta",
                    "gpus_per_node": 4,
                    "min_nodes": 0,
                    "max_nodes": 10,
                    "lead_time": "15m",
                    "quantile": 0.8,
                },
            ]
        }
    )


@pytest.fixture
def settings(tmp_path: Path) -> AppSettings:
    return load_app_settings(
        root=tmp_path,
        levels=[0.5, 0.8, 0.9],
        horizon=12,
        max_train_days=3,
        max_gap_steps=6,
        scheduler={"workers": 1},
    )


def run_forecast_job(
    settings: AppSettings, store: Store, champion: LoadedModel, now: datetime = END
) -> None:
    """Store forecasts as the scheduled forecast job does, from the samples up to ``now``."""
    report = run_forecast(settings, store=store, now=now + timedelta(seconds=1), champion=champion)
    assert report.outcome in ("ok", "partial"), report.summary


@pytest.fixture
def store(tmp_path: Path, settings: AppSettings, champion: LoadedModel) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        opened.samples.upsert(pd.concat([history("alpha"), history("beta", seed=1)]))
        run_forecast_job(settings, opened, champion)
        yield opened


def make_champion() -> LoadedModel:
    """A champion as training would register it: seasonal naive for alpha."""
    candidates = {
        "persistence": Persistence(horizon=12, window=288),
        "seasonal_naive": SeasonalNaive(season_length=DAY, horizon=12, window=288),
    }
    model = ChampionForecaster(
        {"alpha/demand_gpus": "seasonal_naive"}, candidates, default="persistence"
    )
    # Fitted on other data: serving refits the families on the store's history.
    model.fit(history("alpha", days=2, seed=7))
    return LoadedModel(model=model, version="7", source="registry")


@pytest.fixture(scope="session")
def champion() -> LoadedModel:
    return make_champion()


MakeServices = Callable[..., Services]


@pytest.fixture
def make_services(
    settings: AppSettings, pools: PoolsConfig, store: Store, champion: LoadedModel
) -> MakeServices:
    def build(**changes: object) -> Services:
        fields: dict[str, object] = {
            "settings": settings,
            "pools": pools,
            "store": store,
            "model": champion,
            "clock": FakeClock(),
        }
        fields.update(changes)
        return Services(**fields)  # type: ignore[arg-type]

    return build


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def services(make_services: MakeServices, clock: FakeClock) -> Services:
    return make_services(clock=clock)


def app_of(services: Services) -> FastAPI:
    return create_app(services=services, refresh_seconds=None)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(app_of(services)) as test_client:
        yield test_client


@pytest.fixture
def make_history() -> Callable[..., pd.DataFrame]:
    return history


@pytest.fixture
def make_app() -> Callable[[Services], FastAPI]:
    return app_of


@pytest.fixture
def new_clock() -> Callable[..., FakeClock]:
    return FakeClock
