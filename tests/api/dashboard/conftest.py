"""Fixtures of the dashboard tests: a temp store with two pools' history and a champion."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.services import Services
from api.settings import load_app_settings
from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolsConfig
from pipelines.jobs.forecast import run_forecast
from pipelines.store.store import Store, open_store

STEP = timedelta(minutes=5)
END = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
DAY = 288
POOLS = ("alpha", "beta")


def history(pool: str, *, days: int = 2, seed: int = 0) -> pd.DataFrame:
    """A daily-seasonal history of every live signal, ending at :data:`END`."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    ds = pd.date_range(end=END, periods=n, freq=STEP, tz="UTC")
    phase = np.arange(n) % DAY / DAY
    demand = np.round(40 + 30 * np.sin(2 * np.pi * phase) + rng.normal(0, 2, n)).clip(0)
    queue = np.round(demand * 0.25)
    signals = {
        "demand_gpus": demand,
        "queue_gpus": queue,
        "allocated_gpus": demand - queue,
        "nodes": np.ceil((demand - queue) / 8) + 1,
        "gpu_util": np.full(n, 60.0),
    }
    return pd.concat(
        [pd.DataFrame({"unique_id": f"{pool}/{k}", "ds": ds, "y": v}) for k, v in signals.items()],
        ignore_index=True,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        opened.samples.upsert(pd.concat([history(p, seed=i) for i, p in enumerate(POOLS)]))
        yield opened


@pytest.fixture
def services(tmp_path: Path, store: Store) -> Services:
    pools = PoolsConfig.model_validate(
        {
            "pools": [
                {"name": "alpha", "node_group_id": "ng-alpha", "max_nodes": 40, "lead_time": "10m"},
                {"name": "beta", "node_group_id": "ng-beta", "gpus_per_node": 4, "max_nodes": 10},
            ]
        }
    )
    settings = load_app_settings(
        root=tmp_path,
        levels=[0.5, 0.9],
        horizon=12,
        max_train_days=3,
        max_gap_steps=6,
        scheduler={"workers": 1},
    )
    candidates = {
        "persistence": Persistence(horizon=12, window=288),
        "seasonal_naive": SeasonalNaive(season_length=DAY, horizon=12, window=288),
    }
    model = ChampionForecaster(
        {"alpha/demand_gpus": "seasonal_naive"}, candidates, default="persistence"
    )
    model.fit(history("alpha", seed=7))
    champion = LoadedModel(model=model, version="3", source="registry")
    # The service reads the forecasts the forecast job stored; it fits nothing.
    made = run_forecast(settings, store=store, now=END + timedelta(seconds=1), champion=champion)
    assert made.outcome == "ok", made.summary
    return Services(settings, pools, store, champion, clock=lambda: END)


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services=services, refresh_seconds=None)) as test_client:
        yield test_client
