"""The train-time procedure as an estimator, and its walk-forward backtest (docs/forecasting.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Self

import pandas as pd

from forecaster.backtest import BacktestResult, backtest
from forecaster.champion import FAMILY, ChampionForecaster
from forecaster.estimator import Estimator
from forecaster.exceptions import InsufficientHistoryError, NotFittedError
from forecaster.fleet import fleet_backtest
from forecaster.metrics import score_backtest
from forecaster.models.base import Hyperparameters
from forecaster.models.combination import with_median_rows
from forecaster.models.guarded import (
    calibrated,
    guarded_members,
    with_combinations,
    with_guarded_rows,
)
from forecaster.plan import COMBINATION_RULES, TrainingPlan, recent_history
from forecaster.selection import choose_families, default_family
from forecaster.types import CUTOFF, DEFAULT_LEVELS, PERSISTENCE, UID, Levels, SeriesFrame


class TrainedChampion(Hyperparameters):
    """The champion ``foresight train`` would build from a frame, as one estimator.

    Args:
        candidates: unfitted candidate prototypes (distinct names), as training gets.
        plan: the training plan (windows, horizons, selection horizon, max_train).
        alias: the name written to the ``model`` column (default ``champion``).
    """

    name = "champion"

    def __init__(
        self,
        candidates: Sequence[Estimator],
        plan: TrainingPlan,
        alias: str | None = None,
    ) -> None:
        self.candidates = candidates
        self.plan = plan
        self.alias = alias

    def min_history(self) -> int:
        """Return the fewest observations the cheapest candidate needs."""
        return max(2, min((c.min_history() for c in self.candidates), default=2))

    def fit(self, df: SeriesFrame) -> Self:
        """Choose a family per series as training does, then fit it.

        Under ``select`` a series too short for the selection windows is served by
        persistence, as a series unknown to such a champion is in training.
        """
        plan = self.plan
        selection: dict[str, str] = {}
        failures: list[pd.DataFrame] = []
        for uid, group in df.groupby(UID, sort=True, observed=True):
            selection[str(uid)] = self._select(group, failures)
        champion = ChampionForecaster(
            selection,
            with_combinations(self.candidates),
            default=default_family(plan.champion),
            alias=self.model_name,
        )
        self.champion_ = champion.fit(recent_history(df, plan.max_train))
        self.selection_ = selection
        self.failures_ = pd.concat(failures, ignore_index=True) if failures else pd.DataFrame()
        return self

    def _select(self, group: pd.DataFrame, failures: list[pd.DataFrame]) -> str:
        plan = self.plan
        if plan.champion in COMBINATION_RULES:
            return default_family(plan.champion)  # nothing to select, so nothing to backtest
        uid = str(group[UID].iloc[0])
        try:
            result = backtest(
                calibrated(self.candidates),  # rows carry the errors the guarded choice reads
                group,
                horizon=plan.horizon,
                n_windows=plan.n_windows,
                heldout_windows=plan.heldout_windows,
                roles="selection",
                levels=plan.levels,
                max_train=plan.max_train,
            )
        except InsufficientHistoryError:
            # Too short for the selection windows: persistence needs none.
            return PERSISTENCE
        if not result.failures.empty:
            failures.append(result.failures)
        names = [c.model_name for c in self.candidates]
        frame = with_guarded_rows(with_median_rows(result.frame, names), guarded_members(names))
        result = replace(result, frame=frame)
        scores = score_backtest(result.frame, result.scales, plan.levels, plan.horizons)
        chosen = choose_families("select", scores, [uid], plan.selection_horizon)
        return chosen.get(uid, PERSISTENCE)

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast ``h`` steps with the fitted champion (``family`` names the family)."""
        champion: ChampionForecaster | None = getattr(self, "champion_", None)
        if champion is None:
            raise NotFittedError("TrainedChampion is not fitted yet: call fit(df) first.")
        return champion.predict(h, levels)


@dataclass(frozen=True, eq=False)
class ChampionBacktest:
    """The walk-forward backtest of the train-time procedure.

    Attributes:
        result: the backtest (frame ``unique_id, ds, cutoff, step, model, mean,
            q<level>..., family, y``; scales; seconds; failures).
        selections: ``unique_id, cutoff, family``: what each cutoff's training chose.
    """

    result: BacktestResult
    selections: pd.DataFrame


def champion_backtest(
    df: SeriesFrame,
    candidates: Sequence[Estimator],
    plan: TrainingPlan,
    *,
    cutoffs: Sequence[pd.Timestamp] | Mapping[str, Sequence[pd.Timestamp]],
    horizon: int | None = None,
    levels: Levels | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ChampionBacktest:
    """Run the whole train-time procedure walk-forward on ``df`` at ``cutoffs``.

    At each cutoff, per series, a fresh :class:`TrainedChampion` is given every
    observation up to the cutoff and nothing later: it backtests the candidates on its
    own selection windows, selects, fits, and forecasts ``horizon`` steps, which are
    set beside the actuals. Nothing is logged or registered.

    Args:
        df: validated long frame ``unique_id, ds, y``.
        candidates: the candidate prototypes training would get (same model set).
        plan: the training plan (as ``foresight train`` builds it from the settings).
        cutoffs: timestamps of the last observation each training may see; one list for
            every series, or one per series (``benchmarks/forecast_accuracy.py`` places them).
        horizon: steps forecast at each cutoff; default the plan's.
        levels: quantile levels; default the plan's.
        executor: fans the series out (a process pool or Dask).
        progress: called with ``(series done, series total)``.

    Returns:
        The backtest of the champion (model ``champion``) and each cutoff's selection.
    """
    # A joint family among the candidates learns its fleet model at each cutoff time
    # from every series up to that time (forecaster.fleet); otherwise a plain backtest.
    result = fleet_backtest(
        [TrainedChampion(candidates, plan)],
        df,
        horizon=horizon or plan.horizon,
        levels=plan.levels if levels is None else levels,
        max_train=None,
        cutoffs=_per_series(df, cutoffs),
        executor=executor,
        progress=progress,
    )
    frame = result.frame
    if FAMILY in frame.columns and not frame.empty:
        selections = (
            frame[[UID, CUTOFF, FAMILY]].drop_duplicates([UID, CUTOFF]).reset_index(drop=True)
        )
    else:
        selections = pd.DataFrame(columns=[UID, CUTOFF, FAMILY])
    return ChampionBacktest(result=result, selections=selections)


def _per_series(
    df: SeriesFrame, cutoffs: Sequence[pd.Timestamp] | Mapping[str, Sequence[pd.Timestamp]]
) -> Mapping[str, Sequence[pd.Timestamp]]:
    """The cutoffs per series id (one list given for all series is given to each)."""
    if isinstance(cutoffs, Mapping):
        return cutoffs
    return {str(uid): list(cutoffs) for uid in df[UID].unique()}
