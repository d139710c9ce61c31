"""Rolling-origin backtest: fit models at several cutoffs, keep the errors (docs/forecasting.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pandas as pd

from forecaster.cutoffs import Refits, WindowRoles, nested_cutoffs, rolling_origin_cutoffs
from forecaster.estimator import Estimator, clone, updated
from forecaster.exceptions import InsufficientHistoryError, UpdateError
from forecaster.fanout import fan_out
from forecaster.metrics import SCALE, naive_scale
from forecaster.types import (
    CUTOFF,
    DEFAULT_LEVELS,
    DS,
    MODEL,
    STEP,
    UID,
    Levels,
    SeriesFrame,
    Y,
)

ERROR: Final = "error"
"""Column of the failures frame: exception type and message."""
FAILURE_COLUMNS: Final = (UID, CUTOFF, MODEL, ERROR)


@dataclass(frozen=True, eq=False)  # frames have no useful ``==``; identity is enough
class BacktestResult:
    """Forecasts beside actuals at every cutoff, plus what scoring needs.

    Attributes:
        frame: ``unique_id, ds, cutoff, step, model, mean, q<level>..., y`` sorted by
            ``unique_id, cutoff, model, step``; ``cutoff`` is the timestamp of the
            last training observation.
        scales: ``unique_id, cutoff, scale``: the naive in-sample MAE of each window's
            training data (NaN for a constant window), the MASE denominator.
        fit_seconds: total wall seconds each model spent in ``fit`` over all windows.
        failures: ``unique_id, cutoff, model, error``: windows where a model raised;
            those windows are missing from ``frame``.
        heldout_from: ``{unique_id: first held-out cutoff}`` when the backtest was run
            with held-out windows (see :func:`nested_cutoffs`); empty otherwise. Windows
            whose cutoff is at or after it are held out, the earlier ones are for
            selection (:func:`split_heldout`).
    """

    frame: pd.DataFrame
    scales: pd.DataFrame
    fit_seconds: Mapping[str, float]
    failures: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(FAILURE_COLUMNS))
    )
    heldout_from: Mapping[str, pd.Timestamp] = field(default_factory=dict)


def split_heldout(result: BacktestResult) -> tuple[BacktestResult, BacktestResult]:
    """Split a backtest run with held-out windows into (selection, held-out) parts.

    Raises:
        ValueError: the backtest had no held-out windows.
    """
    if not result.heldout_from:
        raise ValueError("this backtest has no held-out windows; run it with heldout_windows >= 1")

    def later(frame: pd.DataFrame) -> pd.Series:
        first = frame[UID].astype(str).map(result.heldout_from)
        return frame[CUTOFF].ge(first).fillna(False).astype(bool)

    parts = []
    for keep_heldout in (False, True):

        def pick(frame: pd.DataFrame, want: bool = keep_heldout) -> pd.DataFrame:
            if frame.empty:
                return frame.copy()
            mask = later(frame)
            return frame[mask if want else ~mask].reset_index(drop=True)

        parts.append(
            BacktestResult(
                frame=pick(result.frame),
                scales=pick(result.scales),
                fit_seconds=result.fit_seconds,
                failures=pick(result.failures),
                heldout_from=result.heldout_from,
            )
        )
    return parts[0], parts[1]


@dataclass(frozen=True)
class _Plan:
    horizon: int
    n_windows: int
    levels: tuple[float, ...]
    max_train: int | None
    start_frac: float
    min_train: int
    heldout: int = 0
    roles: WindowRoles = "all"
    cutoffs: tuple[pd.Timestamp, ...] | dict[str, tuple[pd.Timestamp, ...]] | None = None
    refits: Refits = "each"


@dataclass(frozen=True)
class _SeriesOutcome:
    frames: list[pd.DataFrame]
    scales: list[tuple[str, pd.Timestamp, float]]
    fit_seconds: dict[str, float]
    failures: list[tuple[str, pd.Timestamp, str, str]]
    heldout_from: dict[str, pd.Timestamp] = field(default_factory=dict)


def backtest(
    models: Sequence[Estimator],
    df: SeriesFrame,
    *,
    horizon: int,
    n_windows: int,
    levels: Levels = DEFAULT_LEVELS,
    max_train: int | None = None,
    start_frac: float = 0.75,
    progress: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
    heldout_windows: int = 0,
    roles: WindowRoles = "all",
    cutoffs: Sequence[pd.Timestamp] | Mapping[str, Sequence[pd.Timestamp]] | None = None,
    refits: Refits = "each",
) -> BacktestResult:
    """Backtest ``models`` on every series of ``df`` over rolling origins.

    Args:
        models: unfitted models with distinct ``model_name`` values (never mutated).
        df: validated long frame ``unique_id, ds, y`` (sorted, regular).
        n_windows: cutoffs per series (see ``rolling_origin_cutoffs``).
        max_train: fit on at most this many latest observations (``None``: all).
        start_frac: cutoffs lie in the last ``1 - start_frac`` of each series.
        progress: called with ``(series done, series total)`` after each series.
        executor: when given, the series are fanned out to it (a few series per
            task, :func:`forecaster.fanout.fan_out`); the result is the same as without it.
        heldout_windows: later windows added after the ``n_windows`` selection
            windows, placed by :func:`nested_cutoffs` so that no selection window sees
            their data; ``result.heldout_from`` marks where they start.
        roles: with held-out windows, which to fit: ``all``, ``selection`` (what
            selection alone needs) or ``heldout`` (what scoring and the gate need); the
            positions are those of the whole nested plan either way.
        cutoffs: explicit cutoff timestamps instead of rolling origins (``n_windows``
            and ``heldout_windows`` are then ignored), for every series or per series
            id (a series absent from the mapping gets none); each series is cut at its
            last observation at or before each one that leaves training data and at
            least one observation to score.
        refits: ``first`` fits at a series' first cutoff and updates to the later ones.

    Raises:
        ValueError: when model names repeat.
        InsufficientHistoryError: when a series is too short for the windows.
    """
    names = [m.model_name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(
            f"model names must be unique, got {names}; give repeated families an alias=."
        )
    if max_train is not None and max_train < 2:
        raise ValueError(f"max_train must be >= 2 (the naive scale needs 2), got {max_train}")
    min_train = max(2, min((m.min_history() for m in models), default=2))
    groups = [(str(uid), g) for uid, g in df.groupby(UID, sort=True, observed=True)]
    if heldout_windows < 0:
        raise ValueError(f"heldout_windows must be >= 0, got {heldout_windows}")
    plan = _Plan(
        horizon,
        n_windows,
        tuple(levels),
        max_train,
        start_frac,
        min_train,
        heldout=heldout_windows if cutoffs is None else 0,
        roles=roles,
        cutoffs=_cutoff_plan(cutoffs),
        refits=refits,
    )
    todo = list(models)
    outcomes: list[_SeriesOutcome] = []
    total = len(groups)
    if executor is None:
        for i, (uid, group) in enumerate(groups, start=1):
            outcomes.append(_backtest_series(uid, group, todo, plan))
            if progress is not None:
                progress(i, total)
    else:
        outcomes = fan_out(executor, _backtest_series, groups, (todo, plan), progress)
    return _combine(outcomes, names)


def _backtest_series(
    uid: str, group: pd.DataFrame, models: list[Estimator], plan: _Plan
) -> _SeriesOutcome:
    """Backtest every model on one series (module level so executors can pickle it)."""
    group = group.reset_index(drop=True)
    heldout_from: pd.Timestamp | None = None
    try:
        if plan.cutoffs is not None:
            wanted = plan.cutoffs.get(uid, ()) if isinstance(plan.cutoffs, dict) else plan.cutoffs
            cutoffs = _explicit_positions(group, wanted)
        elif plan.heldout:
            selection, heldout = nested_cutoffs(
                len(group),
                horizon=plan.horizon,
                n_selection=plan.n_windows,
                n_heldout=plan.heldout,
                start_frac=plan.start_frac,
                min_train=plan.min_train,
            )
            heldout_from = pd.Timestamp(group[DS].iloc[heldout[0]])
            cutoffs = {"all": selection + heldout, "selection": selection, "heldout": heldout}[
                plan.roles
            ]
        else:
            cutoffs = rolling_origin_cutoffs(
                len(group),
                horizon=plan.horizon,
                n_windows=plan.n_windows,
                start_frac=plan.start_frac,
                min_train=plan.min_train,
            )
    except InsufficientHistoryError as exc:
        raise InsufficientHistoryError(f"series {uid!r}: {exc}") from exc
    y = group[Y].to_numpy(dtype=np.float64)
    frames: list[pd.DataFrame] = []
    scales: list[tuple[str, pd.Timestamp, float]] = []
    seconds = dict.fromkeys((m.model_name for m in models), 0.0)
    failures: list[tuple[str, pd.Timestamp, str, str]] = []
    previous: dict[str, Estimator] = {}  # refits="first": each model's latest fit
    for c in cutoffs:
        start = 0 if plan.max_train is None else max(0, c + 1 - plan.max_train)
        train = group.iloc[start : c + 1]
        cutoff = pd.Timestamp(group[DS].iloc[c])
        scales.append((uid, cutoff, naive_scale(y[start : c + 1])))
        actual = group[[DS, Y]].iloc[c + 1 : c + 1 + plan.horizon]
        actual_y = pd.Series(actual[Y].to_numpy(), index=pd.DatetimeIndex(actual[DS]))
        for model in models:
            name = model.model_name
            began = time.perf_counter()
            try:
                fitted = _fitted(model, previous.get(name), train)
                seconds[name] += time.perf_counter() - began
                if plan.refits == "first":
                    previous[name] = fitted
                pred = fitted.predict(plan.horizon, plan.levels)
            # A window's failure must not abort the others: any family may raise its
            # library's own errors (LinAlgError, ValueError...), so all are recorded.
            except Exception as exc:
                failures.append((uid, cutoff, name, f"{type(exc).__name__}: {exc}"))
                continue
            frames.append(_beside_actuals(pred, actual_y, cutoff))
    marks = {} if heldout_from is None else {uid: heldout_from}
    return _SeriesOutcome(frames, scales, seconds, failures, marks)


def _fitted(model: Estimator, previous: Estimator | None, train: pd.DataFrame) -> Estimator:
    """``previous`` updated over ``train`` when there is one and it updates, else a new fit."""
    if previous is not None:
        try:
            return updated(previous, train)
        except UpdateError:
            pass  # a family without update (or a state it cannot advance) is refitted
    return clone(model).fit(train)


def _beside_actuals(pred: pd.DataFrame, actual: pd.Series, cutoff: pd.Timestamp) -> pd.DataFrame:
    """A window's forecast with its ``cutoff`` (third column) and actual ``y`` (last).

    The rows and columns of ``pred.merge(actual, on=ds, how="left")``: the actuals
    are unique in ``ds``, so looking them up by timestamp is the left join, without
    its cost (a merge was a fifth of a persistence window's time).
    """
    stale = [c for c in (Y, CUTOFF) if c in pred.columns]
    pred = pred.drop(columns=stale) if stale else pred.copy(deep=False)
    pred[Y] = actual.reindex(pd.DatetimeIndex(pred[DS])).to_numpy()
    pred.insert(2, CUTOFF, cutoff)
    return pred.reset_index(drop=True)


def _cutoff_plan(
    cutoffs: Sequence[pd.Timestamp] | Mapping[str, Sequence[pd.Timestamp]] | None,
) -> tuple[pd.Timestamp, ...] | dict[str, tuple[pd.Timestamp, ...]] | None:
    if cutoffs is None:
        return None
    if isinstance(cutoffs, Mapping):
        return {str(k): tuple(pd.Timestamp(c) for c in v) for k, v in cutoffs.items()}
    return tuple(pd.Timestamp(c) for c in cutoffs)


def _explicit_positions(group: pd.DataFrame, cutoffs: tuple[pd.Timestamp, ...]) -> list[int]:
    """Positions of the last observation at or before each cutoff (deduplicated)."""
    if not cutoffs:
        return []
    ds = pd.DatetimeIndex(group[DS])
    found = ds.searchsorted(pd.DatetimeIndex(list(cutoffs)), side="right") - 1
    return sorted({int(p) for p in found if 1 <= p < len(ds) - 1})


def _combine(outcomes: list[_SeriesOutcome], names: list[str]) -> BacktestResult:
    frames = [f for o in outcomes for f in o.frames]
    if frames:
        frame = pd.concat(frames, ignore_index=True)
        frame = frame.sort_values([UID, CUTOFF, MODEL, STEP], kind="stable", ignore_index=True)
    else:
        frame = pd.DataFrame(columns=[UID, DS, CUTOFF, STEP, MODEL, Y])
    scales = pd.DataFrame(
        [s for o in outcomes for s in o.scales], columns=[UID, CUTOFF, SCALE]
    ).astype({SCALE: np.float64})
    seconds = {n: float(sum(o.fit_seconds.get(n, 0.0) for o in outcomes)) for n in names}
    failures = pd.DataFrame(
        [f for o in outcomes for f in o.failures], columns=list(FAILURE_COLUMNS)
    )
    return BacktestResult(
        frame=frame,
        scales=scales,
        fit_seconds=seconds,
        failures=failures,
        heldout_from={uid: ts for o in outcomes for uid, ts in o.heldout_from.items()},
    )
