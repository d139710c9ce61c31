"""Log a simulation to MLflow: one run with each policy's figures and the plots.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/tracking.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from forecaster.tracking import TrackingConfig, ensure_experiment, metric_key, tracking_errors
from pipelines.simulate.result import SimResult


def log_simulation(
    config: TrackingConfig,
    *,
    pool: str,
    params: Mapping[str, str | float | int],
    runs: Mapping[str, SimResult],
    artifacts: Sequence[Path],
) -> str:
    """Create a run named ``simulate-<pool>`` holding every policy's summary as metrics.

    Metric keys are ``<policy>/<figure>`` (e.g. ``foresight/waiting_gpu_hours``).

    Returns:
        The MLflow run id.

    Raises:
        TrackingError: the tracking server or store cannot be written.
    """
    client = config.client()
    experiment = ensure_experiment(config, client)
    with tracking_errors(config.tracking_uri, "log a simulation run"):
        run = client.create_run(experiment, run_name=f"simulate-{pool}", tags={"kind": "simulate"})
        run_id = str(run.info.run_id)
        for key, value in params.items():
            client.log_param(run_id, key, value)
        for policy, result in runs.items():
            for figure, value in result.summary().items():
                client.log_metric(run_id, metric_key(policy, figure), float(value))
        for path in artifacts:
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id)
    return run_id
