"""Per pool, a training logs a child run with each series' champion scores, and a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from mlflow import MlflowClient

from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.pool_review import POOL_TAG, pool_scores
from forecaster.tracking import TrackingConfig, ensure_experiment, runs_view_url
from forecaster.training import TrainingPlan, train

DAY = 24
POOLS = ("a100-train", "l4-infer")
SIGNALS = ("demand_gpus", "queue_gpus")


def fleet(days: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = days * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-01-01", periods=n, freq="1h", tz="UTC")
    parts = []
    for i, pool in enumerate(POOLS):
        for j, signal in enumerate(SIGNALS):
            level = 10.0 * (i + 1) + j
            y = level + 0.5 * level * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 0.5, n)
            parts.append(pd.DataFrame({"unique_id": f"{pool}/{signal}", "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture
def tracking(tmp_path: Path) -> TrackingConfig:
    return TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        experiment_name="test-pool-review",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )


def test_a_training_has_one_child_run_per_pool_with_per_series_scores(
    tracking: TrackingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders: list[object] = []
    savefig = Figure.savefig

    def counting_savefig(self: Figure, *args: Any, **kwargs: Any) -> None:
        renders.append(self)
        savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", counting_savefig)
    plan = TrainingPlan(
        horizon=6,
        horizons={"1h": 1, "6h": 6},
        selection_horizon="6h",
        n_windows=3,
        levels=(0.5, 0.9),
    )
    models = [Persistence(horizon=6), SeasonalNaive(horizon=6, season_length=DAY)]
    outcome = train(
        fleet(), models, plan, tracking=tracking, model_name="demand", models_dir=tmp_path / "m"
    )
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    parent = client.get_run(outcome.run_id)
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{outcome.run_id}'"
    )
    assert sorted(c.data.tags[POOL_TAG] for c in children) == sorted(POOLS)
    for child in children:
        pool = child.data.tags[POOL_TAG]
        assert child.info.run_name == pool
        assert child.info.status == "FINISHED"
        at_6h = outcome.scores[outcome.scores["horizon"] == "6h"]
        for signal in SIGNALS:
            uid = f"{pool}/{signal}"
            champion = outcome.selection[uid]
            assert child.data.params[f"champion.{signal}"] == champion
            expected = at_6h[(at_6h["unique_id"] == uid) & (at_6h["model"] == champion)]
            assert child.data.metrics[f"mase/6h/{signal}"] == pytest.approx(
                float(expected["mase"].iloc[0])
            )
        assert child.data.metrics["mase/6h/mean"] == pytest.approx(
            np.mean([child.data.metrics[f"mase/6h/{s}"] for s in SIGNALS])
        )
        assert [a.path for a in client.list_artifacts(child.info.run_id)] == [
            f"backtest_{pool}.png"
        ]
    plots = {a.path for a in client.list_artifacts(outcome.run_id, "backtest_plots")}
    assert plots == {f"backtest_plots/{pool}.png" for pool in POOLS}
    # Each pool's figure is rendered once, for both runs (rendering is the cost).
    assert len(renders) == len(set(map(id, renders))) == len(POOLS)
    for child in children:
        pool = child.data.tags[POOL_TAG]
        in_child = Path(client.download_artifacts(child.info.run_id, f"backtest_{pool}.png"))
        in_run = Path(client.download_artifacts(outcome.run_id, f"backtest_plots/{pool}.png"))
        assert in_child.read_bytes() == in_run.read_bytes()


def test_pool_scores_leave_out_non_finite_values_and_average_the_rest() -> None:
    scores = pd.DataFrame(
        {
            "unique_id": ["p/a", "p/b", "p/b", "q/a"],
            "model": ["m1", "m2", "m1", "m1"],
            "horizon": ["1h"] * 4,
            "mase": [1.0, 3.0, 99.0, np.inf],
            "n_windows": [3] * 4,
        }
    )
    got = pool_scores(scores, {"p/a": "m1", "p/b": "m2", "q/a": "m1"})
    assert got == {"p": {"mase/1h/a": 1.0, "mase/1h/b": 3.0, "mase/1h/mean": 2.0}, "q": {}}


def test_the_experiment_opens_on_its_runs(tracking: TrackingConfig) -> None:
    experiment_id = ensure_experiment(tracking)
    tags = MlflowClient(tracking_uri=tracking.tracking_uri).get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    url = runs_view_url("http://127.0.0.1:5000/", experiment_id)
    assert url == (
        f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    )


def test_an_existing_experiment_gets_the_kind_once(tracking: TrackingConfig) -> None:
    client = MlflowClient(tracking_uri=tracking.tracking_uri)
    experiment_id = client.create_experiment(tracking.experiment_name)
    assert ensure_experiment(tracking) == experiment_id
    tags = client.get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
