"""MLflow's UI shows a Foresight training: a real ``mlflow server``, a real run, Chromium.

The UI is a React app, so every check waits for rendered text rather than reading
HTML. The run is found by the name training gives it (pools, series count, data end)
and its page must show the champion's metric per horizon.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.models.catalog import default_models
from forecaster.tracking import TrackingConfig, runs_view_url
from forecaster.training import TrainingPlan, default_run_name, train
from tests.integration.browser import browser_page, require_chromium, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DAY = 24
EXPERIMENT = "foresight-ui-e2e"


def tiny_frame() -> pd.DataFrame:
    """Ten days of hourly, daily-seasonal demand for two pools (seeded)."""
    rng = np.random.default_rng(11)
    ds = pd.date_range("2025-01-01", periods=10 * DAY, freq="1h", tz="UTC")
    frames = []
    for pool, level in (("a100-train", 40.0), ("l4-infer", 12.0)):
        wave = level * (1 + 0.5 * np.sin(2 * np.pi * np.arange(ds.size) / DAY))
        y = np.clip(wave + rng.normal(0, 1, ds.size), 0, None)
        frames.append(pd.DataFrame({"unique_id": f"{pool}/demand_gpus", "ds": ds, "y": y}))
    return pd.concat(frames, ignore_index=True)


def test_a_training_run_and_its_metrics_appear_in_the_mlflow_ui(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_chromium()
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    df = tiny_frame()
    tracking = TrackingConfig(tracking_uri=mlflow_server, experiment_name=EXPERIMENT)
    plan = TrainingPlan(
        horizon=6,
        horizons={"1h": 1, "6h": 6},
        selection_horizon="6h",
        n_windows=2,
        levels=(0.5, 0.9),
    )
    models = default_models(pd.Timedelta("1h"), horizon=6, fast=True)
    outcome = train(
        df, models, plan, tracking=tracking, model_name="ui-e2e-demand", models_dir=tmp_path
    )
    run_name = default_run_name(df)
    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(outcome.run_id)
    assert run.info.run_name == run_name
    assert run.data.tags["foresight.pools"] == "a100-train,l4-infer"
    assert "heldout/mase/champion/6h" in run.data.metrics
    experiment_id = run.info.experiment_id

    with browser_page(width=1440, height=1000) as (page, console):
        # The address the banner and the training print: the runs table in the
        # model-training mode (MLflow 3 otherwise opens on a GenAI traces overview).
        page.goto(runs_view_url(mlflow_server, experiment_id), wait_until="domcontentloaded")
        page.get_by_text(run_name).first.wait_for(timeout=60_000)
        assert page.get_by_text("Traces 0").count() == 0
        screenshot(page, "mlflow_experiment.png")
        page.goto(
            f"{mlflow_server}/#/experiments/{experiment_id}/runs/{outcome.run_id}",
            wait_until="domcontentloaded",
        )
        page.get_by_text(run_name).first.wait_for(timeout=60_000)
        # The run page lists metrics by key; the champion's score per horizon is there.
        page.get_by_text("heldout/mase/champion/6h").first.wait_for(timeout=60_000)
        page.get_by_text("foresight.pools").first.wait_for(timeout=30_000)
        path = screenshot(page, "mlflow_run.png")

    assert path.stat().st_size > 10_000
    # MLflow's UI logs its own warnings; a JavaScript exception would be ours to see.
    assert not [e for e in console.errors if e.startswith("uncaught:")], console.errors
