"""The median of the families: a point forecast one bad family cannot drag away.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/combination.py`."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Final, Self

import pandas as pd

from forecaster.estimator import Estimator, clone, updated
from forecaster.exceptions import (
    InsufficientHistoryError,
    ModelError,
    NotFittedError,
    UpdateError,
)
from forecaster.models.base import Hyperparameters
from forecaster.types import (
    CUTOFF,
    DEFAULT_LEVELS,
    MEAN,
    MODEL,
    STEP,
    UID,
    Levels,
    SeriesFrame,
    quantile_column,
    quantile_levels,
)

MEDIAN: Final = "median"
"""The combination's model name."""

LEFT_OUT: Final = frozenset({"seasonal_naive"})
"""Candidate families the median leaves out while at least 3 others remain.

Seasonal naive repeats the value a day back, with no anchor to the current level: with
ETS and MSTL it can drag the median far off together (measured in
``docs/forecasting.md``, "The median of the families"). Without it, the full set's
median has five members of which three are anchored to the last value (persistence,
and the two gradient boostings, which predict a change shrunk toward 0 on held-out
tails): the median of five values lies between the least and the greatest of any three
of them, so the median can never leave the range of the anchored members."""


def median_members(names: Sequence[str]) -> list[str]:
    """Return the candidate names the median combines: all but :data:`LEFT_OUT`.

    All of them when leaving those out would keep fewer than 3 (the fast set:
    persistence, seasonal naive, ETS).
    """
    kept = [n for n in names if n not in LEFT_OUT]
    return kept if len(kept) >= 3 else list(names)


def with_median(candidates: Sequence[Estimator]) -> dict[str, Estimator]:
    """Return ``{name: prototype}`` of the candidates plus their median, ``median``.

    The median combines :func:`median_members` of the candidates.
    """
    prototypes = {c.model_name: c for c in candidates}
    members = set(median_members([c.model_name for c in candidates]))
    prototypes[MEDIAN] = MedianCombination([c for c in candidates if c.model_name in members])
    return prototypes


def value_columns(frame: pd.DataFrame) -> list[str]:
    """Return the forecast columns a combination takes the median of: mean and quantiles."""
    quantiles = {quantile_column(q) for q in quantile_levels(frame.columns)}
    return [c for c in frame.columns if c == MEAN or c in quantiles]


def median_of(frames: Sequence[pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
    """Return the median, row by row, of several members' forecasts of the same rows.

    Args:
        frames: one forecast frame per member (``keys``, ``mean``, ``q<level>...``);
            rows are matched on ``keys``, a row only some members forecast takes the
            median of those.
        keys: the columns that identify a forecast row (e.g. ``unique_id, ds, step``).

    Returns:
        One row per distinct ``keys``, the other non-value columns from the first
        member that forecast the row, ``model`` set to ``median``.
    """
    if not frames:
        raise ValueError("median_of needs at least one member forecast")
    stacked = pd.concat(frames, ignore_index=True)
    values = value_columns(stacked)
    medians = stacked.groupby(list(keys), sort=True, observed=True)[values].median()
    rest = [c for c in stacked.columns if c not in values and c not in keys and c != MODEL]
    first = stacked.drop_duplicates(list(keys)).set_index(list(keys))[rest]
    out = first.join(medians).reset_index()
    out[MODEL] = MEDIAN
    return out[[c for c in stacked.columns if c in out.columns]]


def with_median_rows(frame: pd.DataFrame, members: Sequence[str]) -> pd.DataFrame:
    """Return a backtest frame with the median of ``members`` added as model ``median``.

    ``members`` are the candidate names; the median takes :func:`median_members` of
    them, as :func:`with_median` does. The added rows are what
    :class:`MedianCombination` over the same members forecasts in each window (the
    members are refitted the same way per window), so scoring them scores the
    combination. A frame that already holds ``median`` rows, or none of the members,
    is returned unchanged.
    """
    if frame.empty or frame[MODEL].eq(MEDIAN).any():
        return frame
    rows = frame[frame[MODEL].isin(median_members(list(members)))]
    if rows.empty:
        return frame
    median = median_of([rows], [UID, CUTOFF, STEP])
    return pd.concat([frame, median], ignore_index=True).sort_values(
        [UID, CUTOFF, MODEL, STEP], ignore_index=True
    )


class MedianCombination(Hyperparameters):
    """Forecasts the median of its members' forecasts, step by step and level by level.

    Each series is fitted with a fresh copy of every member; a member that cannot fit a
    series (too short, or its library fails) is left out of that series' median, and
    the series fails only when no member fits it.

    Args:
        members: unfitted family prototypes (distinct names), e.g. the candidates.
        alias: the name written to the ``model`` column; default ``median``.
    """

    name = MEDIAN

    def __init__(self, members: Sequence[Estimator], alias: str | None = None) -> None:
        self.members = members
        self.alias = alias

    def min_history(self) -> int:
        """Return the fewest observations the least demanding member needs."""
        return min((m.min_history() for m in self.members), default=2)

    def fit(self, df: SeriesFrame) -> Self:
        """Fit every member on every series of ``df`` it can fit.

        Raises:
            InsufficientHistoryError: when no member can fit a series for lack of data.
            ModelError: when no member can fit a series for another reason.
        """
        fitted: dict[str, list[Estimator]] = {}
        for uid, group in df.groupby(UID, sort=True, observed=True):
            fitted[str(uid)] = self._fit_members(str(uid), group)
        self.fitted_ = fitted
        return self

    def _fit_members(self, uid: str, group: pd.DataFrame) -> list[Estimator]:
        models: list[Estimator] = []
        errors: list[str] = []
        short = True
        for member in self.members:
            try:
                models.append(clone(member).fit(group))
            # Any family may raise its library's own errors; the others still count.
            except Exception as exc:
                short = short and isinstance(exc, InsufficientHistoryError)
                errors.append(f"{member.model_name}: {type(exc).__name__}: {exc}")
        if models:
            return models
        problem = "; ".join(errors) or "no members"
        if short:
            raise InsufficientHistoryError(f"series {uid!r}: no member can fit it ({problem})")
        raise ModelError(f"series {uid!r}: no member of the median can fit it ({problem})")

    def update(self, df: SeriesFrame) -> Self:
        """Return a fitted copy whose members are advanced over the series of ``df``.

        Each fitted member is updated (:func:`forecaster.estimator.updated`); the
        copy holds only the series of ``df``, with the same members as the fit.

        Raises:
            UpdateError: when a series was not fitted or a member cannot be updated.
        """
        fitted: dict[str, list[Estimator]] | None = getattr(self, "fitted_", None)
        if fitted is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit(df) first.")
        out = copy.copy(self)
        out.fitted_ = {}
        for uid, group in df.groupby(UID, sort=True, observed=True):
            members = fitted.get(str(uid))
            if members is None:
                raise UpdateError(f"series {uid!r} was not fitted by this {self.model_name}")
            out.fitted_[str(uid)] = [updated(member, group) for member in members]
        return out

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast ``h`` steps: the median of the fitted members' forecasts.

        Returns:
            ``unique_id, ds, step, model, mean, q<level>...`` with ``model`` the
            combination's name.
        """
        fitted: dict[str, list[Estimator]] | None = getattr(self, "fitted_", None)
        if fitted is None:
            raise NotFittedError("MedianCombination is not fitted yet: call fit(df) first.")
        frames = []
        for models in fitted.values():
            combined = median_of([m.predict(h, levels) for m in models], [UID, STEP])
            frames.append(combined)
        out = pd.concat(frames, ignore_index=True)
        out[MODEL] = self.model_name
        return out
