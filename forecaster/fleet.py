"""Joint families (global_gbm) learnt on every series, fitted apart (docs/forecasting.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtest import BacktestResult, backtest
from forecaster.cutoffs import Refits, WindowRoles, nested_cutoffs
from forecaster.estimator import Estimator
from forecaster.exceptions import InsufficientHistoryError
from forecaster.models.global_gbm import FleetModel
from forecaster.plan import recent_history
from forecaster.types import CUTOFF, DS, MODEL, STEP, UID, Levels, SeriesFrame

FLEET_THREADS = 4
"""Cutoff times :func:`fleet_backtest` runs at once when given an executor."""


def is_joint(model: object) -> bool:
    """True for a jointly fitted family that has no pooled part yet."""
    return bool(getattr(model, "joint", False)) and getattr(model, "fleet", None) is None


def has_joint(model: object) -> bool:
    """True when ``model`` is, or holds (members, candidates), a joint family to learn."""
    if is_joint(model):
        return True
    return any(has_joint(m) for m in _nested(model))


def with_fleet(model: Any, df: SeriesFrame, memo: dict[int, Any] | None = None) -> Any:
    """Return ``model`` with the pooled part of each joint family in it learnt on ``df``.

    Families, medians and champions are rebuilt from ``get_params`` with their nested
    estimators replaced; a prototype with no joint family is returned as is. One
    prototype object met several times (a family that is also a median's member) is
    learnt once: ``memo`` maps ``id(prototype)`` to its replacement.
    """
    memo = {} if memo is None else memo
    if not has_joint(model):
        return model
    if id(model) in memo:
        return memo[id(model)]
    if is_joint(model):
        try:
            out = model.with_fleet(model.learn_fleet(df))
        except InsufficientHistoryError:
            out = model  # no series is long enough: each fit fails alone, as per series

    else:
        params = model.get_params()
        out = type(model)(**{k: _replace(v, df, memo) for k, v in params.items()})
    memo[id(model)] = out
    return out


def share_fleets(models: Iterable[object]) -> None:
    """Make the copies of each fleet model inside ``models`` one object again, in place.

    A fitted model sent back from a worker brings its own copy of the fleet model its
    prototype carried (about 0.8 MB), so a champion fitted on a pool would hold and
    pickle one per task. Copies of one learning share a :attr:`FleetModel.key`; every
    attribute of our models (families, combinations' members, per-series fits) that
    holds a copy is pointed at the first one met.
    """
    canonical: dict[str, FleetModel] = {}
    seen: set[int] = set()
    stack: list[object] = list(models)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, list | tuple):
            stack.extend(obj)
        elif isinstance(obj, Mapping):
            stack.extend(obj.values())
        elif type(obj).__module__.startswith("forecaster.") and hasattr(obj, "__dict__"):
            for name, value in vars(obj).items():
                if isinstance(value, FleetModel):
                    # object.__setattr__: per-series fits are frozen dataclasses
                    object.__setattr__(obj, name, canonical.setdefault(value.key, value))
                else:
                    stack.append(value)


def fleet_backtest(
    models: Sequence[Estimator],
    df: SeriesFrame,
    *,
    horizon: int,
    cutoffs: Mapping[str, Sequence[pd.Timestamp]],
    levels: Levels,
    max_train: int | None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    refits: Refits = "each",
) -> BacktestResult:
    """Backtest ``models`` at per-series ``cutoffs``, joint families learnt per cutoff time.

    Without a joint family this is :func:`forecaster.backtest.backtest` with those
    cutoffs. With one, the series are grouped by cutoff time; for each time the pooled
    part is learnt from every series of ``df`` up to it (the last ``max_train``
    observations of each), added to each model's fit seconds, and the series cut there
    are backtested with it. With ``refits="first"`` a series is grouped by its first
    cutoff time only and backtested at all its cutoffs with the pooled part learnt then.
    """
    if not any(has_joint(m) for m in models):
        return backtest(
            models,
            df,
            horizon=horizon,
            n_windows=1,
            levels=levels,
            max_train=max_train,
            cutoffs=cutoffs,
            executor=executor,
            progress=progress,
            refits=refits,
        )
    wanted = {str(uid): sorted(pd.Timestamp(t) for t in times) for uid, times in cutoffs.items()}
    by_time: dict[pd.Timestamp, list[str]] = {}
    for uid, times in wanted.items():
        for t in times[:1] if refits == "first" else times:
            by_time.setdefault(t, []).append(uid)

    def at(time_: pd.Timestamp, uids: list[str]) -> tuple[BacktestResult, dict[str, float]]:
        seen = recent_history(df[df[DS] <= time_], max_train)
        prototypes = []
        seconds: dict[str, float] = {}
        memo: dict[int, Any] = {}
        for model in models:
            began = time.perf_counter()
            prototypes.append(with_fleet(model, seen, memo))
            seconds[model.model_name] = time.perf_counter() - began
        result = backtest(
            prototypes,
            df[df[UID].isin(uids)],
            horizon=horizon,
            n_windows=1,
            levels=levels,
            max_train=max_train,
            cutoffs={uid: wanted[uid] if refits == "first" else [time_] for uid in uids},
            executor=executor,
            refits=refits,
        )
        return result, seconds

    schedule = sorted(by_time.items(), key=lambda kv: kv[0])
    outcomes: list[tuple[BacktestResult, dict[str, float]]] = []
    if executor is None:
        for i, (time_, uids) in enumerate(schedule, start=1):
            outcomes.append(at(time_, uids))
            if progress is not None:
                progress(i, len(schedule))
    else:
        # One thread per cutoff time keeps the executor busy: each time's backtest has
        # only the series cut then, and the threads only wait on its tasks (and learn
        # the fleet models, which scikit-learn does mostly without the GIL).
        with ThreadPoolExecutor(max_workers=FLEET_THREADS) as threads:
            futures = [threads.submit(at, time_, uids) for time_, uids in schedule]
            for i, _ in enumerate(as_completed(futures), start=1):
                if progress is not None:
                    progress(i, len(schedule))
            outcomes = [f.result() for f in futures]
    return _concat(outcomes)


def nested_fleet_backtest(
    models: Sequence[Estimator],
    df: SeriesFrame,
    *,
    horizon: int,
    n_windows: int,
    heldout_windows: int,
    roles: WindowRoles,
    levels: Levels,
    max_train: int | None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    refits: Refits = "each",
) -> BacktestResult:
    """Training's nested backtest (selection and held-out windows), joint families pooled.

    Without a joint family this is :func:`forecaster.backtest.backtest` with the same
    arguments. With one, every series' windows of ``roles`` (the positions
    :func:`forecaster.cutoffs.nested_cutoffs` gives it) are run through
    :func:`fleet_backtest` at their timestamps and ``heldout_from`` is set as the plain
    backtest sets it, so :func:`forecaster.backtest.split_heldout` splits the result.

    Raises:
        InsufficientHistoryError: when a series is too short for the windows.
    """
    if not any(has_joint(m) for m in models):
        return backtest(
            models,
            df,
            horizon=horizon,
            n_windows=n_windows,
            heldout_windows=heldout_windows,
            roles=roles,
            levels=levels,
            max_train=max_train,
            executor=executor,
            progress=progress,
            refits=refits,
        )
    min_train = max(2, min((m.min_history() for m in models), default=2))
    cutoffs: dict[str, list[pd.Timestamp]] = {}
    heldout_from: dict[str, pd.Timestamp] = {}
    for uid, group in df.groupby(UID, sort=True, observed=True):
        ds = group[DS].reset_index(drop=True)
        try:
            selection, heldout = nested_cutoffs(
                len(ds),
                horizon=horizon,
                n_selection=n_windows,
                n_heldout=heldout_windows,
                min_train=min_train,
            )
        except InsufficientHistoryError as exc:
            raise InsufficientHistoryError(f"series {uid!r}: {exc}") from exc
        chosen = {"all": selection + heldout, "selection": selection, "heldout": heldout}[roles]
        cutoffs[str(uid)] = [pd.Timestamp(ds.iloc[p]) for p in chosen]
        heldout_from[str(uid)] = pd.Timestamp(ds.iloc[heldout[0]])
    result = fleet_backtest(
        models,
        df,
        horizon=horizon,
        cutoffs=cutoffs,
        levels=levels,
        max_train=max_train,
        executor=executor,
        progress=progress,
        refits=refits,
    )
    return replace(result, heldout_from=heldout_from)


def _nested(model: object) -> list[object]:
    get_params = getattr(model, "get_params", None)
    if not callable(get_params) or isinstance(model, type):
        return []
    out: list[object] = []
    for value in get_params().values():
        if isinstance(value, list | tuple):
            out += list(value)
        elif isinstance(value, Mapping):
            out += list(value.values())
        elif callable(getattr(value, "get_params", None)):
            out.append(value)
    return out


def _replace(value: Any, df: SeriesFrame, memo: dict[int, Any]) -> Any:
    if isinstance(value, list | tuple):
        return type(value)(with_fleet(v, df, memo) for v in value)
    if isinstance(value, Mapping):
        return {k: with_fleet(v, df, memo) for k, v in value.items()}
    return with_fleet(value, df, memo)


def _concat(outcomes: list[tuple[BacktestResult, dict[str, float]]]) -> BacktestResult:
    """One result of every cutoff time's, fit seconds plus each time's fleet learning."""
    results = [r for r, _ in outcomes]
    seconds: dict[str, float] = {}
    for result, learnt in outcomes:
        for name, s in [*learnt.items(), *result.fit_seconds.items()]:
            seconds[name] = seconds.get(name, 0.0) + float(s)
    frames = [r.frame for r in results if not r.frame.empty]
    frame = (
        pd.concat(frames, ignore_index=True).sort_values(
            [UID, CUTOFF, MODEL, STEP], kind="stable", ignore_index=True
        )
        if frames
        else results[0].frame
    )
    scales = pd.concat([r.scales for r in results], ignore_index=True).sort_values(
        [UID, CUTOFF], ignore_index=True
    )
    failures = [r.failures for r in results if not r.failures.empty]
    return BacktestResult(
        frame=frame,
        scales=scales.astype({c: np.float64 for c in scales.columns if c == "scale"}),
        fit_seconds=seconds,
        failures=pd.concat(failures, ignore_index=True) if failures else results[0].failures,
        heldout_from={},
    )
