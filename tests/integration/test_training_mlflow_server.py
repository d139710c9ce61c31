"""A whole training, twice, against a real ``mlflow server``: run, registry, gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import champion_version
from forecaster.tracking import TrackingConfig
from forecaster.training import TrainingPlan, train

pytestmark = pytest.mark.integration

DAY = 24


def test_training_runs_register_and_gate_over_http(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    rng = np.random.default_rng(5)
    n = 10 * DAY
    ds = pd.date_range("2025-01-01", periods=n, freq="1h", tz="UTC")
    y = 20 + 15 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.normal(0, 0.5, n)
    df = pd.DataFrame({"unique_id": "pool/demand_gpus", "ds": ds, "y": np.clip(y, 0, None)})
    config = TrackingConfig(tracking_uri=mlflow_server, experiment_name="foresight-train-it")
    plan = TrainingPlan(
        horizon=6,
        horizons={"6h": 6},
        selection_horizon="6h",
        n_windows=3,
        levels=(0.5, 0.9),
        # Selection lets seasonal naive win this seasonal series, so the second training
        # beats the first (the guarded rule chooses among persistence and gbm families).
        champion="select",
    )

    def run(models: list[Persistence | SeasonalNaive]):  # type: ignore[no-untyped-def]
        return train(df, models, plan, tracking=config, model_name="it-demand", models_dir=tmp_path)

    first = run([Persistence(horizon=6)])
    second = run([Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)])

    assert first.promoted
    assert second.promoted, second.decision.reason
    assert champion_version("it-demand", tracking=config) == second.version
    client = MlflowClient(tracking_uri=mlflow_server)
    version = client.get_model_version("it-demand", second.version)
    artifacts = {a.path for a in client.list_artifacts(second.run_id)}
    assert {"scores.csv", "backtest.parquet", "champions.json", "backtest_plots"} <= artifacts
    run = client.get_run(second.run_id)
    metrics = run.data.metrics
    assert metrics["heldout/mase/champion/6h"] < metrics["heldout/mase/persistence/6h"]
    # The reviewer's summary and the per-window series, through the server too.
    assert {"summary.json", "gate.json"} <= artifacts
    assert metrics["summary/promoted"] == 1.0
    assert metrics["summary/mase_vs_persistence_6h"] < 1.0
    assert run.data.tags["mlflow.note.content"].startswith("**Promoted to @champion.**")
    steps = client.get_metric_history(second.run_id, "window/champion/mase_6h")
    assert sorted(m.step for m in steps) == [0, 1, 2, 3, 4]  # 3 selection, 2 held out
    assert run.info.end_time is not None
    assert run.info.end_time >= version.creation_timestamp  # closed after registration
    assert version.tags["foresight.promotion"] == "promoted"
