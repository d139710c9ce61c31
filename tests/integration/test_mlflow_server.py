"""Train-register-promote-load against a real ``mlflow server`` over HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.models.naive import Persistence
from forecaster.registry import champion_version, load_champion, promote, register
from forecaster.tracking import TrackingConfig, start_training_run

pytestmark = pytest.mark.integration

LEVELS = (0.5, 0.9)


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


def test_log_register_promote_and_load_by_alias_over_http(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    ds = pd.date_range("2024-01-01", periods=48, freq="10min", tz="UTC")
    rng = np.random.default_rng(3)
    frame = pd.concat(
        pd.DataFrame({"unique_id": uid, "ds": ds, "y": rng.gamma(2.0, 3.0, len(ds))})
        for uid in ("a100/queue_gpus", "h100/queue_gpus")
    )
    model = Persistence(horizon=6, window=24).fit(frame)
    config = TrackingConfig(tracking_uri=mlflow_server, experiment_name="foresight-it")

    with start_training_run(config, run_name="it") as run:
        run.log_params({"horizon": 6})
        run.log_frame("backtest.csv", frame)
        info = run.log_forecaster(model, levels=LEVELS)
        run_id = run.run_id

    version = register(info.model_uri, "foresight-it", tracking=config, run_id=run_id)
    assert champion_version("foresight-it", tracking=config) is None
    assert promote("foresight-it", version, Decision(True, "first model"), tracking=config)
    assert champion_version("foresight-it", tracking=config) == version

    loaded = load_champion("foresight-it", models_dir=tmp_path, tracking=config)
    assert (loaded.source, loaded.version) == ("registry", version)
    pd.testing.assert_frame_equal(loaded.model.predict(6, LEVELS), model.predict(6, LEVELS))

    client = MlflowClient(tracking_uri=mlflow_server)
    assert client.get_run(run_id).data.tags["foresight.kind"] == "train"
    assert {a.path for a in client.list_artifacts(run_id)} >= {"backtest.csv"}
