"""Fixtures shared by the forecaster tests."""

from __future__ import annotations

import pytest

from forecaster.tracking import TrackingConfig, ensure_experiment


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> TrackingConfig:
    """One migrated sqlite MLflow store per module: MLflow's first migration takes seconds."""
    root = tmp_path_factory.mktemp("mlflow")
    config = TrackingConfig(
        tracking_uri=f"sqlite:///{root}/mlflow.db",
        experiment_name="foresight-test",
        artifact_location=str(root / "artifacts"),
    )
    ensure_experiment(config)
    return config
