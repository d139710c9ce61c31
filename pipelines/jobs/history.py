"""History for training and forecasting, read from the store and validated once (docs/jobs.md)."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from forecaster.contract import CleaningReport, validate_series
from forecaster.contract.parse import format_step
from forecaster.contract.report import CleaningWarning
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.metrics import horizon_steps
from forecaster.models.base import Forecaster
from forecaster.models.catalog import default_models, steps_in
from forecaster.peak.fleet import pool_leads
from forecaster.training import TrainingPlan
from forecaster.types import UID, Levels
from pipelines.config.pools_file import load_pools
from pipelines.config.settings import Settings
from pipelines.store.store import Store


@dataclass(frozen=True)
class History:
    """Validated series of one step and the series left out, with why.

    Attributes:
        frame: the contract's long frame, sorted by series and time.
        step: the step every series in ``frame`` has.
        report: what validation changed.
        problems: per series left out (dropped by validation, or of another step).
    """

    frame: pd.DataFrame
    step: pd.Timedelta
    report: CleaningReport
    problems: dict[str, str] = field(default_factory=dict)


def read_history(
    store: Store,
    settings: Settings,
    *,
    end: datetime | None = None,
    days: float | None = None,
    series: Sequence[str] | None = None,
) -> History:
    """Read and validate the last ``days`` of every stored series before ``end``.

    Args:
        store: where the samples are.
        settings: gap filling (``max_gap_steps``) and the default span.
        end: first instant excluded; default everything stored.
        days: how much history; default twice ``max_train_days`` (a training's
            fits plus its backtest windows).
        series: only these series; default every stored one.

    Raises:
        DataValidationError: the store has no samples (ingest first) or no series
            passes validation; the message names each and why.
    """
    span = timedelta(days=days if days is not None else 2 * settings.max_train_days)
    newest = newest_sample(store, series, end)
    if newest is None:
        raise DataValidationError(
            f"the store at {store.url} has no samples"
            + (f" of {list(series)}" if series else "")
            + "; run `foresight ingest` (or the ingest job) first"
        )
    raw = store.samples.read(series, start=newest - span, end=end)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CleaningWarning)
        frame, report = validate_series(raw, max_gap_steps=settings.max_gap_steps, on_error="drop")
    problems = {uid: f"left out: {why}" for uid, why in report.dropped.items()}
    step = Counter(report.steps.values()).most_common(1)[0][0]
    other = sorted(uid for uid, s in report.steps.items() if s != step)
    for uid in other:
        problems[uid] = (
            f"left out: its step {format_step(report.steps[uid])} differs from the "
            f"{format_step(step)} of the other series; store series of one step"
        )
    # validate_series returns the series in id order, each in time order.
    frame = frame[~frame[UID].isin(other)].reset_index(drop=True) if other else frame
    return History(frame=frame, step=step, report=report, problems=problems)


def training_plan(settings: Settings, step: pd.Timedelta) -> TrainingPlan:
    """The training plan of the settings for series of ``step``.

    Raises:
        ConfigError: a horizon is not a whole number of steps.
    """
    try:
        horizons = horizon_steps(list(settings.horizons), step)
    except ValueError as exc:
        raise ConfigError(
            f'{exc}: set horizons (FORESIGHT_HORIZONS, e.g. \'["1h", "3h"]\') to multiples '
            f"of the data's step {format_step(step)}"
        ) from exc
    leads, peak_levels, served = peak_targets(settings, step)
    return TrainingPlan(
        horizon=max(settings.horizon, *horizons.values()),
        horizons=horizons,
        selection_horizon=settings.selection_horizon,
        n_windows=settings.backtest_windows - settings.heldout_windows,
        heldout_windows=settings.heldout_windows,
        levels=settings.levels,
        max_train=steps_in(pd.Timedelta(days=settings.max_train_days), step),
        champion=settings.champion_rule,
        peak_leads=leads,
        peak_levels=peak_levels,
        served_levels=served,
    )


def peak_targets(settings: Settings, step: pd.Timedelta) -> tuple[tuple[int, ...], Levels, Levels]:
    """The lead steps and levels the training's peak model is fitted at, and the served ones.

    The leads are the configured pools' lead times in steps of the data (rounded up);
    the levels are the pools' provisioning quantiles and the settings' levels; the
    served levels are the pools' quantiles alone (where the promotion gate scores the
    peak model). Without a pools file there is nothing to provision, so no leads (and
    no peak model).

    Raises:
        ConfigError: the pools file exists but is invalid.
    """
    if not settings.pools_file.is_file():
        return (), (), ()
    pools = load_pools(settings.pools_file).pools
    leads = pool_leads((pool.lead_time for pool in pools), step.to_pytimedelta())
    served = tuple(sorted({pool.quantile for pool in pools}))
    return leads, tuple(sorted({*settings.levels, *served})), served


def candidate_models(
    settings: Settings, step: pd.Timedelta, horizon: int, *, fast: bool = False
) -> list[Forecaster]:
    """The catalog's candidates for series of ``step``: the settings' ``model_set``.

    ``fast`` asks for the quick set whatever the settings say (``--fast``).
    """
    return default_models(step, horizon, fast=fast or settings.model_set == "fast")


def newest_sample(
    store: Store, series: Sequence[str] | None = None, end: datetime | None = None
) -> datetime | None:
    """The newest stored sample time (of ``series``, all by default), at most ``end``.

    One query on each series' newest time, no history read.
    """
    last = store.samples.last_timestamps(series)
    if not last:
        return None
    newest = max(last.values()).to_pydatetime()
    return min(newest, end) if end is not None else newest
