"""The ``evaluate`` job: live accuracy of stored forecasts, and a degraded-champion alarm.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/evaluate.py`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import numpy as np
import pandas as pd

from forecaster.contract.regularise import mode_step
from forecaster.exceptions import ForesightError
from forecaster.live_calibration import LiveCalibration, calibrate_series
from forecaster.metrics import HORIZON, horizon_steps
from forecaster.models.catalog import steps_in
from forecaster.registry import champion_version
from forecaster.types import DS, MODEL, STEP, UID, quantile_column
from pipelines.config.settings import Settings
from pipelines.config.tracking import tracking_config
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import borrowed_store, finish, utc_now
from pipelines.jobs.scoring import live_frame, live_scales, live_scores
from pipelines.jobs.tracking import backtest_mase, log_evaluation
from pipelines.store.forecasts import GENERATED_AT, MODEL_VERSION
from pipelines.store.store import Store

JOB = "evaluate"
RETRAIN: Final = "retrain"
"""Key of ``JobReport.details``: True when the champion degraded and should retrain."""
LIVE_MASE: Final = "live_mase"
"""Key of ``JobReport.details``: mean live MASE per series at the selection horizon (the
scheduler stores it with the run; the API reads it as each pool's live forecast error)."""
CALIBRATION: Final = "calibration"
"""Key of ``JobReport.details``: per series and quantile column (``q0.9``), the live
calibration: ``offset`` (units of the series), ``live_coverage``,
``calibrated_coverage`` and ``forecasts`` replayed."""
MODEL_VERSION_KEY: Final = "model_version"
"""Key of ``JobReport.details``: the model version whose forecasts were scored."""
EVALUATED_AT: Final = "evaluated_at"
"""Key of ``JobReport.details``: the evaluation's ``now`` (ISO 8601), when its live
error was measured, on the clock it ran by (the run record's times are the wall's)."""
DEFAULT_LOOKBACK: Final = timedelta(days=1)


def run_evaluate(
    settings: Settings,
    *,
    store: Store | None = None,
    now: datetime | None = None,
    lookback: timedelta = DEFAULT_LOOKBACK,
) -> JobReport:
    """Score the forecasts of the last ``lookback`` and flag a degraded champion.

    Args:
        settings: levels, horizons, the retrain ratio, tracking and registry.
        store: forecasts and actuals; default the settings' store.
        now: the evaluation time (default the wall clock): forecasts generated in
            ``[now - lookback, now]`` are scored on actuals up to ``now``.
        lookback: how far back forecasts are scored.

    Returns:
        ``ok`` with live scores and ``details["retrain"]``; ``skipped`` when no
        stored forecast has an actual yet; ``failed`` when the store or MLflow fails.
    """
    started = utc_now()
    try:
        clock = utc_now(now)
        with borrowed_store(settings, store) as opened:
            forecasts = opened.forecasts.read(generated_since=clock - lookback)
            forecasts = forecasts[forecasts[GENERATED_AT] <= pd.Timestamp(clock)]
            if forecasts.empty:
                return finish(JOB, started, "skipped", "no forecasts to evaluate yet")
            series = sorted(forecasts[UID].astype(str).unique())
            history = opened.samples.read(
                series,
                start=(
                    forecasts[GENERATED_AT].min() - timedelta(days=settings.max_train_days)
                ).to_pydatetime(),
                end=clock,
            )
        frame = live_frame(forecasts, history)
        if frame.empty:
            return finish(JOB, started, "skipped", "no actuals have arrived for the forecasts yet")
        step = mode_step(history[DS]) or pd.Timedelta(minutes=5)
        max_step = int(frame[STEP].max())
        horizons = {
            label: steps
            for label, steps in horizon_steps(list(settings.horizons), step).items()
            if steps <= max_step
        } or {f"h{max_step}": max_step}
        max_train = steps_in(pd.Timedelta(days=settings.max_train_days), step)
        scores = live_scores(
            frame, live_scales(frame, history, max_train), settings.levels, horizons
        )
        report = _judge(settings, started, frame, scores, horizons)
        report.details[EVALUATED_AT] = clock.isoformat()
        return report
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))


def _judge(
    settings: Settings,
    started: datetime,
    frame: pd.DataFrame,
    scores: pd.DataFrame,
    horizons: dict[str, int],
) -> JobReport:
    tracking = tracking_config(settings)
    name = settings.registered_model_name
    version = str(frame.sort_values(GENERATED_AT)[MODEL_VERSION].iloc[-1])
    horizon = settings.selection_horizon if settings.selection_horizon in horizons else None
    live = _mean_by_series(scores, version, horizon)
    baseline = backtest_mase(tracking, name, version, horizon)
    judged = sorted(uid for uid in live if uid in baseline)
    ratio = settings.scheduler.retrain_mase_ratio
    live_mean = float(np.mean([live[u] for u in judged])) if judged else float("nan")
    base_mean = float(np.mean([baseline[u] for u in judged])) if judged else float("nan")
    degraded = bool(judged) and live_mean > ratio * base_mean
    current = champion_version(name, tracking=tracking)
    retrain = degraded and current == version
    worse = sorted(u for u in judged if live[u] > ratio * baseline[u])
    served = frame[frame[MODEL_VERSION].astype(str) == version]
    reach = horizons.get(horizon or "", max(horizons.values()))
    calibration = calibrate_series(
        served[served[STEP] <= reach], settings.levels, issued=GENERATED_AT
    )
    metrics = {"degraded": float(degraded), "judged_series": float(len(judged))}
    if judged:
        metrics |= {"live_mase_mean": live_mean, "backtest_mase_mean": base_mean}
    metrics |= _coverage_metrics(calibration)
    run_id = log_evaluation(
        tracking,
        scores=scores,
        params={
            "model_version": version,
            "retrain_mase_ratio": ratio,
            "horizon": horizon or "all",
            "forecasts": int(frame[GENERATED_AT].nunique()),
        },
        metrics=metrics,
        tags={"foresight.model_version": version, "foresight.degraded": str(degraded).lower()},
    )
    details: dict[str, Any] = {
        RETRAIN: retrain,
        "degraded": degraded,
        MODEL_VERSION_KEY: version,
        "champion_version": current,
        "run_id": run_id,
        LIVE_MASE: live,
        "backtest_mase": {u: baseline[u] for u in judged},
        "degraded_series": worse,
        "coverage": _coverage(scores, version, horizon),
        CALIBRATION: _calibration_details(calibration),
        "rows_scored": len(frame),
    }
    if not judged:
        summary = f"scored {len(frame)} forecast rows; no backtest MASE to compare with"
    else:
        summary = (
            f"live MASE {live_mean:.3f} vs backtest {base_mean:.3f} over {len(judged)} series "
            f"(version {version}, limit x{ratio:g}): "
            + ("DEGRADED" + (", retraining" if retrain else "") if degraded else "healthy")
        )
    return finish(JOB, started, "ok", summary, details=details)


def _mean_by_series(scores: pd.DataFrame, version: str, horizon: str | None) -> dict[str, float]:
    rows = scores[scores[MODEL] == version]
    if horizon is not None:
        rows = rows[rows[HORIZON] == horizon]
    means = rows.groupby(UID)["mase"].mean()
    return {str(uid): float(v) for uid, v in means.items() if np.isfinite(v)}


def _coverage(scores: pd.DataFrame, version: str, horizon: str | None) -> dict[str, float]:
    rows = scores[scores[MODEL] == version]
    if horizon is not None:
        rows = rows[rows[HORIZON] == horizon]
    columns = [c for c in rows.columns if str(c).startswith("coverage_")]
    return {str(c): float(rows[c].mean()) for c in columns if np.isfinite(rows[c].mean())}


def _calibration_details(
    calibration: dict[str, dict[float, LiveCalibration]],
) -> dict[str, dict[str, dict[str, float]]]:
    return {
        uid: {
            quantile_column(level): {
                "offset": result.offset,
                "live_coverage": result.live_coverage,
                "calibrated_coverage": result.calibrated_coverage,
                "forecasts": float(result.forecasts),
            }
            for level, result in levels.items()
        }
        for uid, levels in calibration.items()
    }


def _coverage_metrics(calibration: dict[str, dict[float, LiveCalibration]]) -> dict[str, float]:
    """Mean over series of the raw and calibrated live coverage per level (MLflow keys)."""
    by_level: dict[float, list[LiveCalibration]] = {}
    for levels in calibration.values():
        for level, result in levels.items():
            by_level.setdefault(level, []).append(result)
    out: dict[str, float] = {}
    for level, results in sorted(by_level.items()):
        column = quantile_column(level)
        for key in ("live_coverage", "calibrated_coverage"):
            values = [getattr(r, key) for r in results if np.isfinite(getattr(r, key))]
            if values:
                out[f"calibration/{key}/{column}"] = float(np.mean(values))
    return out
