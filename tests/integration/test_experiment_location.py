"""Against a real ``mlflow server``: where a tracking server puts Foresight's artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient

from api.settings import load_app_settings
from forecaster.tracking import ensure_experiment
from pipelines.config.tracking import tracking_config

pytestmark = pytest.mark.integration


def test_a_new_experiment_gets_server_artifacts_and_an_old_local_one_is_named(
    mlflow_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_app_settings(
        root=tmp_path, mlflow_tracking_uri=mlflow_server, experiment_name="location-new"
    )
    client = MlflowClient(tracking_uri=mlflow_server)

    created = ensure_experiment(tracking_config(settings))

    location = client.get_experiment(created).artifact_location
    assert location.startswith("mlflow-artifacts:"), location
    assert "local path" not in caplog.text

    # An experiment made before the server proxied artifacts, at a trainer's local path.
    client.create_experiment("location-old", artifact_location=(tmp_path / "old").as_uri())
    old = load_app_settings(
        root=tmp_path, mlflow_tracking_uri=mlflow_server, experiment_name="location-old"
    )
    caplog.set_level("WARNING", logger="forecaster.tracking")
    ensure_experiment(tracking_config(old))
    assert "'location-old'" in caplog.text
    assert "local path other machines cannot read" in caplog.text
