"""Every series forecast with the champion: its trained fit updated, else refitted.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/series_forecasts.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from forecaster.champion import ChampionForecaster
from forecaster.exceptions import ForesightError
from forecaster.fanout import fan_out
from forecaster.fleet import with_fleet
from forecaster.pyfunc import SupportsPredict
from forecaster.registry import LoadedModel
from forecaster.series_tasks import refit_predict, update_predict
from forecaster.types import UID, Levels, Progress
from forecaster.unavailable import Unavailable
from pipelines.jobs.runtime import no_progress

R = TypeVar("R")


@dataclass(frozen=True)
class SeriesForecasts:
    """Each series' forecast frame or why not, and the series refitted rather than updated.

    Attributes:
        frames: keyed in the order of the series given.
        refits: why each series refitted was not updated (a series the champion
            never saw, or a model whose state cannot be advanced); updated series
            are absent.
        updated: how many series were updated from the champion's trained state.
    """

    frames: dict[str, pd.DataFrame | Unavailable]
    refits: dict[str, str]
    updated: int


def forecast_series(
    loaded: LoadedModel,
    groups: list[tuple[str, pd.DataFrame]],
    horizon: int,
    levels: Levels,
    executor: Executor | None,
    report: Progress = no_progress,
) -> dict[str, pd.DataFrame | Unavailable]:
    """Forecast each series: its frame, or why it could not be forecast.

    The frames of :func:`forecast_fleet`, keyed in the order of ``groups``.
    """
    return forecast_fleet(loaded, groups, horizon, levels, executor, report).frames


def forecast_fleet(
    loaded: LoadedModel,
    groups: list[tuple[str, pd.DataFrame]],
    horizon: int,
    levels: Levels,
    executor: Executor | None,
    report: Progress = no_progress,
) -> SeriesForecasts:
    """Forecast each series from its recent history (``groups``: ``(series id, frame)``).

    The one place forecasts are made: this job stores them for the service, and
    ``foresight forecast`` prints them. The champion's model of each series, fitted at
    the training, is *updated* with the series' recent history: what it learnt
    (parameters, trees, the fleet's pooled regressors, calibration residuals) is
    kept and the forecast starts from the newest observation
    (:meth:`forecaster.champion.ChampionForecaster.update`); a model that cannot be
    updated is refitted on that history. Series the champion was not fitted on (a
    version saved without its fits, or a series newer than the training) are refitted
    from the champion's choices, a joint family's pooled part learnt once from every
    series first. The work runs through ``executor`` (the training's: a process pool
    or Dask, a few dozen tasks of several series each; None runs here). A model that
    cannot be refitted (a foreign pyfunc) forecasts in this process what it was
    trained on, once for the whole fleet. ``report`` is told ``("forecast", series
    done, series total)``.
    """
    model = loaded.model
    if not isinstance(model, ChampionForecaster):
        frames = _trained_forecasts(model, groups, horizon, levels, report)
        return SeriesForecasts(frames, {}, 0)
    if not groups:
        return SeriesForecasts({}, {}, 0)
    fitted = model.fitted_series()
    known = [(uid, series) for uid, series in groups if uid in fitted]
    unknown = [(uid, series) for uid, series in groups if uid not in fitted]
    total = len(groups)

    def told(done: int, _: int) -> None:
        report("forecast", done, total)

    items = [(uid, model.restricted_to([uid]), series) for uid, series in known]
    made = _run(executor, update_predict, items, (horizon, levels), told)
    out: dict[str, pd.DataFrame | Unavailable] = {}
    refits: dict[str, str] = {}
    for (uid, _), (frame, refit) in zip(known, made, strict=True):
        out[uid] = frame
        if refit:
            refits[uid] = refit
    updated = sum(not isinstance(out[uid], Unavailable) for uid, _ in known) - len(refits)
    if unknown:
        # A joint family (global_gbm) learns its fleet once, from every series, before
        # the per-series refits: fitted alone, each series would be a fleet of one.
        prototype = with_fleet(model.unfitted(), pd.concat([series for _, series in groups]))
        tasks = [(prototype, series) for _, series in unknown]

        def told_rest(done: int, _: int) -> None:
            report("forecast", len(known) + done, total)

        refitted = _run(executor, refit_predict, tasks, (horizon, levels), told_rest)
        for (uid, _), one in zip(unknown, refitted, strict=True):
            out[uid] = one
            if not isinstance(one, Unavailable):  # a failure is reported as a problem
                refits[uid] = "not fitted by the champion's training"
    return SeriesForecasts({uid: out[uid] for uid, _ in groups}, refits, updated)


def _run(
    executor: Executor | None,
    fn: Callable[..., R],
    items: list[tuple[Any, ...]],
    shared: tuple[Any, ...],
    progress: Callable[[int, int], None],
) -> list[R]:
    """``fn`` over ``items`` on ``executor`` in a few dozen tasks, or here without one."""
    if executor is not None:
        return fan_out(executor, fn, items, shared, progress)
    out = []
    for done, item in enumerate(items, start=1):
        out.append(fn(*item, *shared))
        progress(done, len(items))
    return out


def _trained_forecasts(
    model: SupportsPredict,
    groups: list[tuple[str, pd.DataFrame]],
    horizon: int,
    levels: Levels,
    report: Progress,
) -> dict[str, pd.DataFrame | Unavailable]:
    """A model that cannot be refitted (a foreign pyfunc): what it was trained on."""
    try:
        frame: pd.DataFrame | Unavailable = model.predict(horizon, levels)
    except ForesightError as exc:
        frame = Unavailable.of(exc)
    parts = {} if isinstance(frame, Unavailable) else dict(_by_series(frame))
    out: dict[str, pd.DataFrame | Unavailable] = {}
    for done, (uid, _) in enumerate(groups, start=1):
        if isinstance(frame, Unavailable):
            out[uid] = frame
        else:
            out[uid] = parts.get(uid, frame.iloc[:0])
        report("forecast", done, len(groups))
    return out


def _by_series(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    for uid, rows in frame.groupby(UID, sort=False):
        yield str(uid), rows
