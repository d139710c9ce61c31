"""The MLflow tracking configuration a deployment's settings name (docs/jobs.md)."""

from __future__ import annotations

from forecaster.tracking import TrackingConfig, is_tracking_server
from pipelines.config.settings import Settings


def tracking_config(settings: Settings) -> TrackingConfig:
    """The MLflow tracking configuration a deployment's settings name.

    With a tracking server the server decides where a new experiment's artifacts go
    (``mlflow-artifacts:/``, proxied by a server run with ``--serve-artifacts``), so
    every trainer and replica reaches them; a local directory here would be the first
    trainer's disk, which no other machine can read. A local store keeps its
    artifacts in ``mlflow_artifacts_dir``.
    """
    remote = is_tracking_server(settings.mlflow_tracking_uri)
    return TrackingConfig(
        tracking_uri=settings.mlflow_tracking_uri,
        experiment_name=settings.experiment_name,
        artifact_location=None if remote else settings.mlflow_artifacts_dir.as_uri(),
    )
