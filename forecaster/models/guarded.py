"""The guarded choice: persistence, unless a family's own out-of-sample errors beat it.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/guarded.py`."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Final, Self

import numpy as np
import pandas as pd

from forecaster.estimator import Estimator, clone, updated
from forecaster.exceptions import NotFittedError
from forecaster.models.base import FloatArray, Hyperparameters
from forecaster.models.combination import MedianCombination, with_median
from forecaster.models.residuals import calibration_mae
from forecaster.types import (
    CUTOFF,
    DEFAULT_LEVELS,
    MEAN,
    MODEL,
    PERSISTENCE,
    STEP,
    UID,
    Levels,
    SeriesFrame,
)

GUARDED: Final = "guarded"
"""The guarded choice's model name."""

MARGIN: Final = 0.10
"""How much lower than persistence's a family's error must be for it to forecast.

Chosen on the tune windows of ``benchmarks/forecast_accuracy.py`` (cutoffs over 50-75 %
of each series; ``docs/forecasting.md``): 0.10 and 0.15 scored alike, 0 and 0.05 let
noise pick (worse cells), 0.2-0.3 gave most of the gains back."""

MEMBERS: Final = (PERSISTENCE, "gbm", "global_gbm")
"""The families the guarded choice chooses among (those of them that are candidates).

ETS and MSTL are left out: the recent origins that give their calibration residuals
also chose their specification, so those errors are optimistic (``docs/forecasting.md``,
"Intervals"). On the tune windows the choice among these three scored 0.966x
persistence's mean MASE, among the median's five 0.974x."""

ERROR: Final = "calibration_mae"
"""Column of a calibrated forecast: the family's out-of-sample MAE at that step."""

_CUMULATIVE: Final = "_cumulative"


def guarded_members(names: Sequence[str]) -> list[str]:
    """Return the candidate names the guarded choice chooses among (:data:`MEMBERS`)."""
    return [n for n in names if n in MEMBERS]


def step_errors(model: object, uid: str, h: int) -> FloatArray | None:
    """Return a fitted family's out-of-sample MAE at steps ``1..h`` of ``uid``.

    The mean absolute calibration residual per step ahead (steps past the calibrated
    horizon reuse the last one); ``None`` for a model without per-series residuals.
    """
    fits = getattr(model, "fits_", None)
    fit = fits.get(uid) if isinstance(fits, Mapping) else None
    calibration = getattr(fit, "calibration", None)
    if calibration is None:
        return None
    mae = calibration_mae(calibration)
    if mae is None:
        return None
    return np.asarray(mae[np.minimum(np.arange(h), len(mae) - 1)], dtype=np.float64)


def with_calibration_error(frame: pd.DataFrame, model: object) -> pd.DataFrame:
    """Return ``frame`` (``model``'s forecast) with the :data:`ERROR` column added."""
    out = frame.copy()
    out[ERROR] = np.nan
    ids = out[UID].unique()
    if len(ids) == 1:  # one series (a fleet forecast series by series): no grouping
        steps = out[STEP].to_numpy(dtype=np.int64)
        errors = step_errors(model, str(ids[0]), int(steps.max()))
        if errors is not None:
            out[ERROR] = errors[steps - 1]
        return out
    for uid, rows in out.groupby(UID, sort=False, observed=True):
        steps = rows[STEP].to_numpy(dtype=np.int64)
        errors = step_errors(model, str(uid), int(steps.max()))
        if errors is not None:
            out.loc[rows.index, ERROR] = errors[steps - 1]
    return out


class Calibrated(Hyperparameters):
    """A family whose forecasts carry its calibration error (:data:`ERROR`).

    Same name, fit and forecasts as the family; for backtests whose rows the guarded
    choice is built from (:func:`with_guarded_rows`).

    Args:
        model: the unfitted family prototype.
    """

    def __init__(self, model: Estimator) -> None:
        self.model = model

    @property
    def model_name(self) -> str:
        """The family's name."""
        return self.model.model_name

    def min_history(self) -> int:
        """Return the family's."""
        return self.model.min_history()

    def fit(self, df: SeriesFrame) -> Self:
        """Fit a fresh copy of the family."""
        self.fitted_ = clone(self.model).fit(df)
        return self

    def update(self, df: SeriesFrame) -> Self:
        """Return a copy whose fitted family is advanced over ``df``, not refitted.

        Raises:
            UpdateError: when the family cannot update (:func:`~forecaster.estimator.updated`).
        """
        out = copy.copy(self)
        out.fitted_ = updated(self._fitted(), df)
        return out

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast as the family, plus its calibration error per row."""
        fitted = self._fitted()
        return with_calibration_error(fitted.predict(h, levels), fitted)

    def _fitted(self) -> Estimator:
        fitted: Estimator | None = getattr(self, "fitted_", None)
        if fitted is None:
            raise NotFittedError("Calibrated is not fitted yet: call fit(df) first.")
        return fitted


def calibrated(candidates: Sequence[Estimator]) -> list[Estimator]:
    """Return the candidates wrapped so their backtest rows carry their errors."""
    return [Calibrated(c) for c in candidates]


def with_combinations(candidates: Sequence[Estimator]) -> dict[str, Estimator]:
    """Return ``{name: prototype}`` of the candidates, their median and their guarded choice."""
    prototypes = with_median(candidates)
    members = set(guarded_members([c.model_name for c in candidates]))
    prototypes[GUARDED] = GuardedChoice([c for c in candidates if c.model_name in members])
    return prototypes


def guarded_of(
    frames: Sequence[pd.DataFrame],
    keys: Sequence[str],
    *,
    reference: str = PERSISTENCE,
    margin: float = MARGIN,
) -> pd.DataFrame:
    """Return the guarded choice, step by step, among several members' forecasts.

    Args:
        frames: the members' forecast frames (``keys``, ``step``, ``model``, ``mean``,
            :data:`ERROR`...).
        keys: the columns of one forecast path besides ``step`` (``unique_id``, and
            ``cutoff`` for backtest rows).
        reference: the member that forecasts unless another beats it; a path it did not
            forecast is given to the member with the lowest error.
        margin: the relative margin by which another member's error must be lower.

    Returns:
        One row per ``keys`` and ``step``: the chosen member's row with ``model`` set to
        ``guarded``, in the columns of the stacked frames.
    """
    if not frames:
        raise ValueError("guarded_of needs at least one member forecast")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    stacked = pd.concat(frames, ignore_index=True)
    path = [*keys, MODEL]
    stacked = stacked.sort_values([*path, STEP], ignore_index=True)
    if ERROR not in stacked.columns:
        raise ValueError(
            f"the guarded choice needs the members' {ERROR!r} column: forecast with "
            "Calibrated families (or with_calibration_error)"
        )
    error = stacked[ERROR].astype(np.float64)
    known = error.notna() & stacked[MEAN].notna()
    # Mean error over steps 1..k: the MASE at horizon h averages the first h steps.
    total = error.where(known, 0.0).groupby([stacked[c] for c in path], sort=False).cumsum()
    count = known.astype(float).groupby([stacked[c] for c in path], sort=False).cumsum()
    stacked[_CUMULATIVE] = (total / count.where(count > 0)).where(known)
    wide = stacked.pivot_table(
        index=[*keys, STEP], columns=MODEL, values=_CUMULATIVE, aggfunc="first", observed=True
    )
    chosen = _choose(wide, reference, margin)
    picked = stacked.merge(chosen.rename(MODEL).reset_index(), on=[*keys, STEP, MODEL])
    out = picked.drop(columns=[_CUMULATIVE])
    out[MODEL] = GUARDED
    return out.sort_values([*keys, STEP], ignore_index=True)[list(frames[0].columns)]


def guarded_path(
    frames: Sequence[pd.DataFrame], reference: str = PERSISTENCE, margin: float = MARGIN
) -> pd.DataFrame | None:
    """:func:`guarded_of` of the members' forecasts of one series, in arrays.

    The same rule and the same rows as ``guarded_of(frames, [UID], reference,
    margin)``, without the frame-wide sort, pivot and merge (most of a forecast's time
    when a fleet is forecast series by series). None when the frames are not each one
    member's forecast of the same series over the same increasing steps (then
    :func:`guarded_of` applies).
    """
    if not frames or not 0.0 <= margin < 1.0:
        return None
    first = frames[0]
    columns = list(first.columns)
    if ERROR not in columns or first.empty:
        return None
    steps = first[STEP].to_numpy()
    uid = first[UID].iloc[0]
    names: list[str] = []
    for frame in frames:
        if (
            list(frame.columns) != columns
            or len(frame) != len(first)
            or not np.array_equal(frame[STEP].to_numpy(), steps)
            or not frame[UID].eq(uid).all()
            or frame[MODEL].nunique() != 1
        ):
            return None
        names.append(str(frame[MODEL].iloc[0]))
    if len(set(names)) != len(names) or np.any(np.diff(steps) <= 0):
        return None
    error = np.column_stack([f[ERROR].to_numpy(dtype=np.float64) for f in frames])
    mean = np.column_stack([f[MEAN].to_numpy(dtype=np.float64) for f in frames])
    known = ~np.isnan(error) & ~np.isnan(mean)
    total = np.cumsum(np.where(known, error, 0.0), axis=0)
    count = np.cumsum(known, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cumulative = np.where(known, total / np.where(count > 0, count, np.nan), np.nan)
    # The pivot's columns are the members' names in order; its rows all-NaN dropped.
    order = sorted(range(len(names)), key=lambda i: names[i])
    wide = pd.DataFrame(
        cumulative[:, order], index=pd.Index(steps, name=STEP), columns=[names[i] for i in order]
    )
    wide = wide[wide.notna().any(axis=1)]
    chosen = _choose(wide, reference, margin)
    member = np.array([names.index(str(name)) for name in chosen.to_numpy()], dtype=np.intp)
    row = np.searchsorted(steps, chosen.index.to_numpy())
    stacked = pd.concat(frames, ignore_index=True)
    out = stacked.take(member * len(first) + row).reset_index(drop=True)
    out[MODEL] = GUARDED
    return out[columns]


def _choose(wide: pd.DataFrame, reference: str, margin: float) -> pd.Series:
    """Per row of ``wide`` (members' cumulative errors), the member that forecasts it."""
    names = np.array([str(c) for c in wide.columns], dtype=object)
    errors = wide.to_numpy(dtype=np.float64)
    others = np.flatnonzero(names != reference)
    rows = np.arange(len(wide))
    finite = np.where(np.isfinite(errors[:, others]), errors[:, others], np.inf)
    fallback = others[np.argmin(finite, axis=1)] if others.size else np.zeros(len(wide), int)
    has_other = np.isfinite(finite).any(axis=1)
    if reference not in set(names):
        choice = np.where(has_other, fallback, -1)
    else:
        ref = int(np.flatnonzero(names == reference)[0])
        bar = errors[:, ref] * (1.0 - margin)
        beating = np.where(finite < bar[:, None], finite, np.inf)
        best = others[np.argmin(beating, axis=1)] if others.size else fallback
        beats = np.isfinite(beating).any(axis=1)
        # The reference forecasts unless beaten; a path it did not forecast gets the best other.
        missing = np.isnan(errors[:, ref])
        choice = np.where(beats, best, np.where(missing & has_other, fallback, ref))
        choice = np.where(missing & ~has_other, -1, choice)
    keep = choice >= 0
    return pd.Series(names[choice[keep]], index=wide.index[rows[keep]], dtype=object)


def with_guarded_rows(frame: pd.DataFrame, members: Sequence[str]) -> pd.DataFrame:
    """Return a backtest frame with the guarded choice among ``members`` added as ``guarded``.

    ``members`` are the names the choice is among (:func:`guarded_members` of the
    candidates, as :func:`with_combinations` gives the estimator). The added rows are
    what :class:`GuardedChoice` forecasts in each window (the members are refitted the
    same way per window) when the backtest was of :func:`calibrated` families. A frame
    that already holds ``guarded`` rows, none of the members, or no :data:`ERROR`
    column, is returned as is.
    """
    if frame.empty or frame[MODEL].eq(GUARDED).any() or ERROR not in frame.columns:
        return frame
    rows = frame[frame[MODEL].isin(list(members))]
    if rows.empty:
        return frame
    guarded = guarded_of([rows], [UID, CUTOFF])
    return pd.concat([frame, guarded], ignore_index=True).sort_values(
        [UID, CUTOFF, MODEL, STEP], ignore_index=True
    )


class GuardedChoice(MedianCombination):
    """Forecasts persistence, or per step the family whose own errors beat it by a margin.

    Fitting is the median's (every member on every series it can fit; a member that
    cannot fit a series is left out of that series' choice); only the rule differs.

    Args:
        members: unfitted family prototypes (distinct names), persistence among them.
        margin: see :data:`MARGIN`.
        alias: the name written to the ``model`` column; default ``guarded``.
    """

    name = GUARDED

    def __init__(
        self, members: Sequence[Estimator], margin: float = MARGIN, alias: str | None = None
    ) -> None:
        super().__init__(members, alias=alias)
        self.margin = margin

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast ``h`` steps: per step, the chosen member's forecast.

        Returns:
            ``unique_id, ds, step, model, mean, q<level>...`` with ``model`` the
            choice's name (the members' errors are not served).
        """
        fitted: dict[str, list[Estimator]] | None = getattr(self, "fitted_", None)
        if fitted is None:
            raise NotFittedError("GuardedChoice is not fitted yet: call fit(df) first.")
        frames = []
        for models in fitted.values():
            forecasts = [with_calibration_error(m.predict(h, levels), m) for m in models]
            one = guarded_path(forecasts, margin=self.margin)
            frames.append(
                one if one is not None else guarded_of(forecasts, [UID], margin=self.margin)
            )
        out = pd.concat(frames, ignore_index=True).drop(columns=[ERROR])
        out[MODEL] = self.model_name
        return out
