"""Training on a Dask LocalCluster picks the same champions as the local process pool.

Both runs go through ``pipelines.executors.make_executor`` and the same
``forecaster.training.train``; only the executor differs, so every score, selection
and forecast must be equal, not merely close.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from distributed import LocalCluster

from forecaster.models.catalog import default_models
from forecaster.tracking import TrackingConfig
from forecaster.training import TrainingOutcome, TrainingPlan, train
from pipelines.executors import make_executor

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

STEP = pd.Timedelta(hours=1)  # hourly steps keep the fast model set quick
DAY = 24
PLAN = TrainingPlan(
    horizon=6,
    horizons={"1h": 1, "6h": 6},
    selection_horizon="6h",
    n_windows=3,
    levels=(0.5, 0.9),
    max_train=10 * DAY,
    champion="select",  # per-series choices that differ make equal selections telling
)


def mixed_frame(seed: int = 11, days: int = 14) -> pd.DataFrame:
    """Series of different shapes, so different families win on different series."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-03-01", periods=n, freq=STEP, tz="UTC")
    shapes = {
        "a/daily": 30 + 20 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 1.0, n),
        "b/daily_noisy": 12 + 6 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 2.0, n),
        "c/random_walk": 50 + np.cumsum(rng.normal(0, 1.5, n)),
        "d/bursts": 5 + rng.poisson(0.3, n) * rng.uniform(5, 25, n),
        "e/trend_daily": 10 + 0.05 * t + 8 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 0.5, n),
        "f/flat": 20 + rng.normal(0, 0.2, n),
    }
    return pd.concat(
        [
            pd.DataFrame({"unique_id": uid, "ds": ds, "y": np.clip(y, 0, None)})
            for uid, y in shapes.items()
        ],
        ignore_index=True,
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as local:
        yield local


def _train(
    df: pd.DataFrame, root: Path, *, workers: int, dask_address: str | None
) -> TrainingOutcome:
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{root}/mlflow.db",
        experiment_name="dask-vs-pool",
        artifact_location=(root / "artifacts").as_uri(),
    )
    candidates = default_models(STEP, PLAN.horizon, fast=True)
    with make_executor(workers, dask_address) as executor:
        assert executor is not None
        return train(
            df,
            candidates,
            PLAN,
            tracking=tracking,
            model_name="demand",
            models_dir=root / "models",
            executor=executor,
        )


def test_dask_cluster_picks_the_same_champions_as_the_local_pool(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    df = mixed_frame()

    pooled = _train(df, tmp_path / "pool", workers=2, dask_address=None)
    distributed = _train(df, tmp_path / "dask", workers=2, dask_address=cluster.scheduler_address)

    # The work really ran on the cluster: six series fan out one task each
    # (forecaster.fanout), once for the backtest and once for the champion's fit.
    computed = {
        entry[0]
        for entry in cluster.scheduler.transition_log
        if str(entry[0]).startswith("_run_chunk-") and entry[2] == "memory"
    }
    assert len(computed) == 2 * df["unique_id"].nunique()
    # More than one family wins, so equal selections are not a foregone conclusion.
    assert len(set(pooled.selection.values())) > 1, pooled.selection
    assert distributed.selection == pooled.selection
    pd.testing.assert_frame_equal(distributed.scores, pooled.scores)
    pd.testing.assert_frame_equal(
        distributed.champion.predict(PLAN.horizon, PLAN.levels),
        pooled.champion.predict(PLAN.horizon, PLAN.levels),
    )
    assert distributed.promoted
    assert pooled.promoted
