"""The ``forecast`` job: the one place serving's forecasts are made, into the store.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/forecast.py`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import pandas as pd

from forecaster.exceptions import ForesightError
from forecaster.fanout import fan_out
from forecaster.peak.online import anchor
from forecaster.peak.reference import SEASON
from forecaster.peak.serving import StateKey, Stepped, serve_states
from forecaster.peak.types import SCALE
from forecaster.registry import LoadedModel, load_champion
from forecaster.series_tasks import predict_peak
from forecaster.training import recent_history
from forecaster.types import DS, UID, Progress
from forecaster.unavailable import Unavailable
from pipelines.config.settings import Settings
from pipelines.config.tracking import tracking_config
from pipelines.executors import make_executor
from pipelines.jobs.history import newest_sample, read_history, training_plan
from pipelines.jobs.phases import Phases
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import borrowed_store, finish, no_progress, outcome_of, utc_now
from pipelines.jobs.series_forecasts import SeriesForecasts, forecast_fleet
from pipelines.store.peak_forecasts import LEAD, ORIGIN, RAW
from pipelines.store.store import Store

R = TypeVar("R")

logger = logging.getLogger(__name__)

JOB = "forecast"
SAMPLE_AT_NOW = timedelta(microseconds=1)
"""How far past ``now`` the history is read, so the sample stamped ``now`` is in it."""
SERVE_TASKS = 16
"""Tasks the online calibration of the peaks is split into, by series."""
REFITS_LISTED = 20
"""Most refitted series a report names (with why); ``refitted`` counts them all."""
PEAK_PROBLEM = "peak"
"""Key of ``problems`` when the peak forecast failed (the per-horizon rows are stored)."""


def run_forecast(
    settings: Settings,
    *,
    store: Store | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
    champion: LoadedModel | None = None,
    skip_unchanged: bool = False,
) -> JobReport:
    """Forecast every stored series with the champion and save it, stamped ``now``.

    Args:
        settings: horizon, levels, registry and store.
        store: where history is read and forecasts saved; default the settings' store.
        now: the forecast's ``generated_at``; history after it is ignored, a sample at
            it is used (default the wall clock). A retry with the same ``now``
            overwrites, not duplicates.
        progress: told ``("forecast", series done, series total)``.
        champion: the model to use instead of loading ``@champion`` (tests).
        skip_unchanged: do nothing (``skipped``, saying why) when the newest complete
            run of the champion's version was made from the same newest observation:
            the forecast would be the same. The scheduler sets it under the replay
            clock, where "now" moves only with new data.

    Returns:
        ``ok``/``partial`` with the model version and rows saved; ``skipped`` when
        ``skip_unchanged`` found no new data; ``failed`` when there is no champion, no
        history or the store is down.
    """
    started = utc_now()
    phases = Phases()
    try:
        generated_at = utc_now(now)
        with phases("load"):
            loaded = champion or load_champion(
                settings.registered_model_name,
                models_dir=settings.models_dir,
                tracking=tracking_config(settings),
            )
        with borrowed_store(settings, store) as opened:
            # A sample stamped ``now`` is known at ``now`` (under the replay clock "now"
            # is the newest sample): the history ends just after it.
            end = generated_at + SAMPLE_AT_NOW
            # Checked before the history is read: a skipped run costs one small query.
            observed = newest_sample(opened, end=end)
            if skip_unchanged and (unchanged := _unchanged(opened, loaded.version, observed)):
                return finish(JOB, started, "skipped", unchanged)
            run = _forecast_and_store(
                settings,
                opened,
                loaded,
                end,
                progress or no_progress,
                generated_at,
                observed,
                phases,
            )
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))
    return _finished(started, loaded, run, generated_at, phases)


@dataclass(frozen=True)
class _Run:
    """What one run stored, and what it could not make."""

    rows: int
    peak_rows: int
    series: int
    horizon: int
    problems: dict[str, str]
    updated: int
    refits: dict[str, str]


def _forecast_and_store(
    settings: Settings,
    store: Store,
    loaded: LoadedModel,
    end: datetime,
    report: Progress,
    generated_at: datetime,
    observed: datetime | None,
    phases: Phases,
) -> _Run:
    """Read the history, forecast every series and the peaks, commit them as one run."""
    with phases("read"):
        history = read_history(store, settings, end=end, days=settings.max_train_days)
        plan = training_plan(settings, history.step)
        recent = recent_history(history.frame, plan.max_train)
    problems = dict(history.problems)
    groups = [(str(uid), series) for uid, series in recent.groupby(UID, sort=True)]
    # The pools' own quantiles too: the service reads what is stored, fits nothing.
    levels = tuple(sorted({*plan.levels, *plan.peak_levels}))
    work = (settings, store, loaded, groups, recent, history.step, plan.horizon, levels)
    try:
        made, peaks, served = _fanned_out(*work, report, phases)
    except BrokenExecutor as exc:
        # A worker died (killed for memory, say) and took the kept pool with it: the
        # cycle is made again on a fresh pool rather than lost.
        logger.warning("a forecast worker died (%s); running the cycle again on a new pool", exc)
        made, peaks, served = _fanned_out(*work, report, phases)
    if isinstance(peaks, Unavailable):
        problems[PEAK_PROBLEM] = str(peaks)
    for uid, one in made.frames.items():
        if isinstance(one, Unavailable):
            problems[uid] = f"not forecast: {one}"
    kept = [one for one in made.frames.values() if not isinstance(one, Unavailable)]
    frame = pd.concat(kept, ignore_index=True) if kept else None
    # One transaction: the service never reads this run's rows without its peaks.
    with phases("store"):
        stored = store.forecast_runs.commit(
            frame,
            served,
            model_version=loaded.version,
            generated_at=generated_at,
            step=history.step.to_pytimedelta(),
            observed_until=observed,
        )
    series = 0 if frame is None else int(frame[UID].nunique())
    return _Run(
        stored.rows, stored.peak_rows, series, plan.horizon, problems, made.updated, made.refits
    )


def _fanned_out(
    settings: Settings,
    store: Store,
    loaded: LoadedModel,
    groups: list[tuple[str, pd.DataFrame]],
    recent: pd.DataFrame,
    step: pd.Timedelta,
    horizon: int,
    levels: tuple[float, ...],
    report: Progress,
    phases: Phases,
) -> tuple[SeriesForecasts, pd.DataFrame | Unavailable | None, pd.DataFrame | None]:
    """The per-series forecasts, the raw peaks and the served ones, on the job's kept pool."""
    address = settings.scheduler.dask_address
    with make_executor(settings.scheduler.workers, address, keep=JOB) as executor:
        # The peak model's one task goes first: a worker runs it while the others work
        # through the per-series tasks, rather than all but one idling after them.
        peak_task = _peak_forecasts(loaded, recent, executor)
        with phases("refit_predict"):
            made = forecast_fleet(loaded, groups, horizon, levels, executor, report)
        with phases("peak"):
            peaks = peak_task()
        served = None
        if peaks is not None and not isinstance(peaks, Unavailable):
            with phases("peak_online"):
                served = _served(store, peaks, recent, step, executor)
    return made, peaks, served


def _finished(
    started: datetime, loaded: LoadedModel, run: _Run, generated_at: datetime, phases: Phases
) -> JobReport:
    """The run's report: what was saved, with which version, and what was not."""
    peak_note = (
        f" and {run.peak_rows:,} peak rows"
        if run.peak_rows
        else " (no peak model in this version)"
        if loaded.peak is None
        else " (no peak rows)"
    )
    summary = (
        f"saved {run.rows:,} forecast rows for {run.series} series{peak_note} with champion "
        f"version {loaded.version} ({loaded.source})"
    )
    details = {
        "version": loaded.version,
        "source": loaded.source,
        "fallback_reason": loaded.reason,
        "rows": run.rows,
        "peak_rows": run.peak_rows,
        "series": run.series,
        "generated_at": generated_at.isoformat(),
        "horizon": run.horizon,
        "updated": run.updated,
        "refitted": len(run.refits),
        "refits": dict(list(run.refits.items())[:REFITS_LISTED]),
        "phase_seconds": phases.rounded(),
    }
    outcome = outcome_of(run.problems, run.series)
    return finish(JOB, started, outcome, summary, problems=run.problems, details=details)


def _unchanged(store: Store, version: str, observed: datetime | None) -> str:
    """Why a new run would repeat the last one of ``version``; empty when it would not."""
    last = store.forecast_runs.latest(version)
    if observed is None or last is None or last.observed_until != observed:
        return ""
    return (
        f"no new data: the newest sample ({observed.isoformat()}) is the one the run of "
        f"{last.generated_at.isoformat()} by version {version} was made from; nothing to "
        "forecast until new samples arrive"
    )


PeakTask = Callable[[], pd.DataFrame | Unavailable | None]
"""Waits for (or, without an executor, makes) the peak forecasts."""


def _peak_forecasts(
    loaded: LoadedModel, history: pd.DataFrame, executor: Executor | None
) -> PeakTask:
    """The peak quantiles of every demand series at its newest observation, started.

    Submitted to ``executor`` now; what it returns waits for them. They are None when
    the version has no peak model, why not when they fail.
    """
    peak = loaded.peak
    if peak is None:
        return lambda: None
    if executor is None:
        return lambda: predict_peak(peak, history)
    return executor.submit(predict_peak, peak, history).result


def _served(
    store: Store,
    fresh: pd.DataFrame,
    history: pd.DataFrame,
    step: pd.Timedelta,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """The fresh raw peak forecasts calibrated and combined online, as they are served."""
    if fresh.empty:
        return fresh
    since = anchor(pd.Timestamp(fresh[DS].min())) - int(fresh[LEAD].max()) * step
    uids = sorted(fresh[UID].astype(str).unique())
    stored = store.peak_forecasts.read(uids, since=since)
    raw = [str(c) for c in stored.columns if str(c).startswith(RAW)]
    earlier = stored[[UID, ORIGIN, LEAD, SCALE, *raw]].rename(
        columns={ORIGIN: DS, **{c: c.removeprefix(RAW) for c in raw}}
    )
    # The online loop reads the actuals from a season before its anchor on.
    actuals = history[(history[DS] >= since - SEASON) & history[UID].isin(uids)]
    states = _online.take()
    if executor is None or len(uids) < 2:
        served, after = serve_states(fresh, actuals, earlier, step, states)
        _online.keep(after)
        return served
    tasks = min(len(uids), SERVE_TASKS)
    task_of = {uid: k * tasks // len(uids) for k, uid in enumerate(uids)}
    split = [_split(frame, task_of, tasks) for frame in (fresh, actuals, earlier)]
    shares: list[dict[StateKey, Stepped]] = [{} for _ in range(tasks)]
    for key, state in states.items():
        if key[0] in task_of:
            shares[task_of[key[0]]][key] = state
    parts = [(*frames, step, share) for *frames, share in zip(*split, shares, strict=True)]
    results = fan_out(executor, serve_states, parts)
    _online.keep({key: state for _, part in results for key, state in part.items()})
    out = pd.concat([frame for frame, _ in results], ignore_index=False)
    return out.loc[fresh.index]


def _split(frame: pd.DataFrame, task_of: dict[str, int], tasks: int) -> list[pd.DataFrame]:
    """``frame``'s rows by the task of their series (one pass over the frame)."""
    task = frame[UID].astype(str).map(task_of)
    groups = dict(iter(frame.groupby(task, sort=False)))
    return [groups.get(k, frame.iloc[:0]) for k in range(tasks)]


class _OnlineStates:
    """The peak states the last run of this process left; taking them gives them up."""

    def __init__(self) -> None:
        self._states: dict[StateKey, Stepped] = {}
        self._lock = threading.Lock()

    def take(self) -> dict[StateKey, Stepped]:
        with self._lock:
            states, self._states = self._states, {}
        return states

    def keep(self, states: dict[StateKey, Stepped]) -> None:
        with self._lock:
            self._states = states


_online = _OnlineStates()
