"""Where a deployment's settings put MLflow's runs and artifacts."""

from __future__ import annotations

from pathlib import Path

from pipelines.config.settings import load_settings
from pipelines.config.tracking import tracking_config


def test_a_tracking_server_decides_where_artifacts_go(tmp_path: Path) -> None:
    server = load_settings(root=tmp_path, mlflow_tracking_uri="http://mlflow.internal:5000")
    local = load_settings(root=tmp_path)
    assert tracking_config(server).artifact_location is None
    assert (
        tracking_config(local).artifact_location
        == (tmp_path.resolve() / "models" / "mlartifacts").as_uri()
    )
