"""MLflow for the evaluate job: the champion's backtest scores, and a run per evaluation.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/tracking.py`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.exceptions import TrackingError
from forecaster.metrics import HORIZON
from forecaster.tracking import (
    KIND_TAG,
    TrackingConfig,
    TrainingRun,
    ensure_experiment,
    summary_metrics,
    tracking_errors,
)
from forecaster.types import MODEL, PERSISTENCE, UID

SCORES_ARTIFACT = "scores.csv"
CHAMPIONS_ARTIFACT = "champions.json"


def backtest_mase(
    tracking: TrackingConfig, model_name: str, version: str, horizon: str | None
) -> dict[str, float]:
    """Per series, the backtest MASE its champion family scored when ``version`` trained.

    Series whose family has no finite MASE there fall back to persistence's.

    Raises:
        TrackingError: the version, its run or the run's artifacts cannot be read.
    """
    client = tracking.client()
    with (
        tracking_errors(tracking.tracking_uri, f"read the backtest of {model_name} v{version}"),
        tempfile.TemporaryDirectory() as tmp,
    ):
        run_id = client.get_model_version(model_name, version).run_id
        if run_id is None:
            raise TrackingError(
                f"{model_name} version {version} has no training run, so its backtest "
                "scores are unknown; register versions through `foresight train`"
            )
        scores = pd.read_csv(client.download_artifacts(run_id, SCORES_ARTIFACT, tmp))
        champions = json.loads(
            Path(client.download_artifacts(run_id, CHAMPIONS_ARTIFACT, tmp)).read_text(
                encoding="utf-8"
            )
        )
    if horizon is not None:
        scores = scores[scores[HORIZON].astype(str) == horizon]
    mase = scores.set_index([UID, MODEL])["mase"].to_dict()
    baseline = {}
    for uid in scores[UID].astype(str).unique():
        value = mase.get((uid, champions.get(uid, PERSISTENCE)), np.nan)
        if not np.isfinite(value):
            value = mase.get((uid, PERSISTENCE), np.nan)
        if np.isfinite(value):
            baseline[uid] = float(value)
    return baseline


def log_evaluation(
    tracking: TrackingConfig,
    *,
    scores: pd.DataFrame,
    params: Mapping[str, object],
    metrics: Mapping[str, float],
    tags: Mapping[str, str],
) -> str:
    """Log one evaluation as a run tagged ``job=evaluate``; return its run id.

    Raises:
        TrackingError: MLflow failed.
    """
    client = tracking.client()
    experiment_id = ensure_experiment(tracking, client)
    all_tags = {KIND_TAG: "evaluate", "job": "evaluate", **tags}
    with tracking_errors(tracking.tracking_uri, "start an evaluation run"):
        run_id = str(
            client.create_run(experiment_id, run_name="evaluate", tags=all_tags).info.run_id
        )
    status = "FAILED"
    try:
        run = TrainingRun(tracking, client, run_id)
        run.log_params(params)
        live = {f"live/{key}": value for key, value in summary_metrics(scores).items()}
        run.log_metrics({**live, **metrics})
        run.log_frame("live_scores.csv", scores)
        status = "FINISHED"
    finally:
        with tracking_errors(tracking.tracking_uri, "end the evaluation run"):
            client.set_terminated(run_id, status)
    return run_id
