"""The ``forecast`` job: the champion, refitted on the latest stored history, into the store.

As ``foresight forecast`` does: the registered champion fixes each series' family
and hyperparameters; its state is as old as the training, so each series is refitted
on its recent history before predicting. Each series is fitted alone, so one that
fails is reported while the others are stored.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from forecaster.champion import ChampionForecaster
from forecaster.config.settings import Settings
from forecaster.exceptions import ForesightError
from forecaster.registry import LoadedModel, load_champion
from forecaster.tracking import tracking_config
from forecaster.training import recent_history
from forecaster.types import UID, Levels
from pipelines.jobs.history import read_history, training_plan
from pipelines.jobs.report import JobReport, Outcome
from pipelines.jobs.runtime import Progress, borrowed_store, finish, no_progress, utc_now
from pipelines.store import Store

JOB = "forecast"


def run_forecast(
    settings: Settings,
    *,
    store: Store | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
    champion: LoadedModel | None = None,
) -> JobReport:
    """Forecast every stored series with the champion and save it, stamped ``now``.

    Args:
        settings: horizon, levels, registry and store.
        store: where history is read and forecasts saved; default the settings' store.
        now: the forecast's ``generated_at``; history after it is ignored (default
            the wall clock). A retry with the same ``now`` overwrites, not duplicates.
        progress: told ``("forecast", series done, series total)``.
        champion: the model to use instead of loading ``@champion`` (tests).

    Returns:
        ``ok``/``partial`` with the model version and rows saved; ``failed`` when there
        is no champion, no history or the store is down.
    """
    started = utc_now()
    report = progress or no_progress
    try:
        generated_at = utc_now(now)
        loaded = champion or load_champion(
            settings.registered_model_name,
            models_dir=settings.models_dir,
            tracking=tracking_config(settings),
        )
        with borrowed_store(settings, store) as opened:
            history = read_history(opened, settings, end=generated_at, days=settings.max_train_days)
            plan = training_plan(settings, history.step)
            recent = recent_history(history.frame, plan.max_train)
            problems = dict(history.problems)
            frames = []
            groups = list(recent.groupby(UID, sort=True))
            for done, (uid, series) in enumerate(groups, start=1):
                try:
                    frames.append(_predict(loaded, series, plan.horizon, plan.levels))
                except ForesightError as exc:
                    problems[str(uid)] = f"not forecast: {exc}"
                report("forecast", done, len(groups))
            frame = pd.concat(frames, ignore_index=True) if frames else None
            rows = (
                opened.forecasts.save(
                    frame, model_version=loaded.version, generated_at=generated_at
                )
                if frame is not None
                else 0
            )
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))
    done_series = 0 if frame is None else int(frame[UID].nunique())
    summary = (
        f"saved {rows:,} forecast rows for {done_series} series with champion version "
        f"{loaded.version} ({loaded.source})"
    )
    details = {
        "version": loaded.version,
        "source": loaded.source,
        "fallback_reason": loaded.reason,
        "rows": rows,
        "series": done_series,
        "generated_at": generated_at.isoformat(),
        "horizon": plan.horizon,
    }
    outcome: Outcome = "ok" if not problems else ("partial" if done_series else "failed")
    return finish(JOB, started, outcome, summary, problems=problems, details=details)


def _predict(
    loaded: LoadedModel, series: pd.DataFrame, horizon: int, levels: Levels
) -> pd.DataFrame:
    model = loaded.model
    if isinstance(model, ChampionForecaster):
        model = model.unfitted().fit(series)
        return model.predict(horizon, levels)
    # Not refittable (a foreign pyfunc): it forecasts what it was trained on.
    frame = model.predict(horizon, levels)
    return frame[frame[UID].isin(series[UID].unique())]
