"""The estimator contract every Foresight forecaster follows (docs/forecasting.md)."""

from __future__ import annotations

import copy
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.exceptions import (
    InsufficientHistoryError,
    ModelError,
    NotFittedError,
    UpdateError,
)
from forecaster.models.residuals import Calibration, calibration_offsets, residual_matrix
from forecaster.types import (
    DEFAULT_LEVELS,
    DS,
    MEAN,
    MODEL,
    STEP,
    UID,
    Levels,
    SeriesFrame,
    Y,
    quantile_column,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SeriesFit:
    """Learned state of one series: the model's own state plus calibration data."""

    state: Any
    calibration: Calibration
    """The out-of-sample residuals, or the compact form they are rebuilt from."""
    last_ds: pd.Timestamp
    step: pd.Timedelta
    nonnegative: bool
    """True when the training values were all >= 0, so forecasts are clipped at 0."""

    @property
    def residuals(self) -> FloatArray:
        """Out-of-sample residuals, shape ``(n_windows, horizon)``; may hold NaN."""
        return residual_matrix(self.calibration)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A fit pickled before the compact forms (#41) holds its matrix as ``residuals``.
        if "residuals" in state:
            state = {**state, "calibration": state["residuals"]}
            del state["residuals"]
        self.__dict__.update(state)


class Hyperparameters:
    """scikit-learn's parameter contract, shared by every estimator.

    ``__init__`` stores each argument under its own name; :meth:`get_params` reads them
    back by the signature, so a clone (``type(m)(**m.get_params())``) and the tracking
    see exactly the arguments, never learned state, and a model pickled by an older
    version that still carries a retired argument clones without it. ``model_name`` is
    the ``alias`` when one is given, else the class's ``name``.
    """

    name: str = "estimator"
    alias: str | None = None

    @property
    def model_name(self) -> str:
        """The name written to the ``model`` column."""
        return self.alias or self.name

    def get_params(self) -> dict[str, Any]:
        """Return the arguments given to ``__init__`` (for cloning and tracking)."""
        signature = inspect.signature(type(self).__init__)
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return {
            p.name: getattr(self, p.name)
            for p in list(signature.parameters.values())[1:]
            if p.kind in named
        }


class Forecaster(Hyperparameters, ABC):
    """Base class of every model: per-series fit, point forecast, conformal quantiles.

    Args:
        horizon: the longest step ahead the intervals are calibrated for; longer
            predictions widen the last step's residuals by ``sqrt(h / horizon)``.
        alias: the name of the model in forecast frames; defaults to ``name``.
    """

    name: str = "forecaster"
    update_refits: ClassVar[bool] = False
    """True for a family whose refit is its update (as cheap, and exact): the baselines."""

    def __init__(self, horizon: int = 36, alias: str | None = None) -> None:
        self.horizon = horizon
        self.alias = alias

    # -- subclass hooks -------------------------------------------------------

    def min_history(self) -> int:
        """Return the fewest observations a series needs for ``fit``."""
        return 2

    @abstractmethod
    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        """Fit one series and return its learned state."""

    @abstractmethod
    def _predict_series(self, state: Any, h: int) -> FloatArray:
        """Return the point forecast of steps ``1..h`` after the series' end."""

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        """Return ``state`` advanced to the end of ``y``, the trained estimates kept.

        ``y`` and ``ds`` are the series' recent history, ending at or after the fit's
        last observation ``last_ds``. Families that keep what they learnt (smoothing parameters,
        trees) override it; the default cannot, so the series is refitted.

        Raises:
            UpdateError: when the state cannot be advanced (a family without an
                update, or a state saved by a version that did not keep its estimates).
        """
        raise UpdateError(f"{self.model_name} keeps no state it can advance; refit it")

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> Calibration:
        """Return out-of-sample residuals of shape ``(n_windows, horizon)`` (or their compact form).

        The default refits on prefixes ending at up to ``n`` recent cutoffs; families
        with an exact cheap form (naive methods) override it.
        """
        return refit_residuals(self, y, ds, self.horizon, n_windows=8)

    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, Calibration]:
        """Return the learned state and the calibration residuals of one series.

        The default calls ``_fit_series`` then ``_calibration_residuals``; families whose
        calibration shares work with the fit (a held-out fold, parameters estimated once
        on a prefix) override this one hook so the expensive part runs once.
        """
        return self._fit_series(y, ds), self._calibration_residuals(y, ds)

    # -- public contract ------------------------------------------------------

    def fit(self, df: SeriesFrame) -> Self:
        """Fit every series of a validated long frame and return ``self``."""
        fits: dict[str, SeriesFit] = {}
        for uid, group in df.groupby(UID, sort=True, observed=True):
            fits[str(uid)] = self.fit_one(str(uid), group)
        self.fits_ = fits
        return self

    def fit_one(self, uid: str, group: pd.DataFrame) -> SeriesFit:
        """Fit a single series' rows (sorted, regular) and return its state."""
        y = group[Y].to_numpy(dtype=np.float64)
        if len(y) < self.min_history():
            raise InsufficientHistoryError(
                f"series {uid!r} has {len(y)} observations; {self.model_name} needs at "
                f"least {self.min_history()}. Provide more history or drop the series."
            )
        ds = pd.DatetimeIndex(group[DS])
        step = infer_step(ds, uid)
        try:
            state, calibration = self._fit_and_calibrate(y, ds)
        except ModelError as exc:
            # The hooks see arrays only; the series id is added here, where it is known.
            raise ModelError(f"series {uid!r}: {exc}") from exc
        return SeriesFit(
            state=state,
            calibration=calibration,
            last_ds=ds[-1],
            step=step,
            nonnegative=bool(np.nanmin(y) >= 0.0),
        )

    def update(self, df: SeriesFrame) -> Self:
        """Return a fitted copy whose series of ``df`` are advanced to their newest values.

        What was learnt at ``fit`` (parameters, trees, calibration residuals) is kept;
        only the state the forecast starts from is moved to the end of each series'
        history (:meth:`update_one`). ``self`` is left as it was; the copy holds only
        the series of ``df``.

        Raises:
            UpdateError: when a series of ``df`` was not fitted, or cannot be advanced.
        """
        fits = self._check_fitted()
        updated: dict[str, SeriesFit] = {}
        for uid, group in df.groupby(UID, sort=True, observed=True):
            fit = fits.get(str(uid))
            if fit is None:
                raise UpdateError(f"series {uid!r} was not fitted by this {self.model_name}")
            updated[str(uid)] = self.update_one(str(uid), fit, group)
        out = copy.copy(self)
        out.fits_ = updated
        return out

    def update_one(self, uid: str, fit: SeriesFit, group: pd.DataFrame) -> SeriesFit:
        """Advance one series' fit over its recent rows (sorted, regular).

        The calibration residuals are the fit's; the forecast starts after the newest
        row. A family whose refit is its update (:attr:`update_refits`) is refitted.

        Raises:
            UpdateError: when the rows do not continue the fit's series (another step,
                ending before it) or the family cannot advance its state.
        """
        if self.update_refits:
            return self.fit_one(uid, group)
        y = group[Y].to_numpy(dtype=np.float64)
        ds = pd.DatetimeIndex(group[DS])
        if len(y) < self.min_history():
            raise UpdateError(f"series {uid!r} has {len(y)} observations to update with")
        if infer_step(ds, uid) != fit.step or ds[-1] < fit.last_ds:
            raise UpdateError(
                f"series {uid!r}: its history (step {infer_step(ds, uid)}, to {ds[-1]}) does "
                f"not continue the fit's (step {fit.step}, to {fit.last_ds})"
            )
        try:
            state = self._update_state(fit.state, y, ds, fit.last_ds)
        except (ValueError, TypeError, IndexError, AttributeError) as exc:
            raise UpdateError(f"series {uid!r}: {self.model_name} update failed: {exc}") from exc
        return SeriesFit(
            state=state,
            calibration=fit.calibration,
            last_ds=ds[-1],
            step=fit.step,
            nonnegative=fit.nonnegative and bool(np.nanmin(y) >= 0.0),
        )

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast ``h`` steps of every fitted series.

        Returns:
            A frame ``unique_id, ds, step, model, mean, q<level>...``.
        """
        fits = self._check_fitted()
        if h < 1:
            raise ValueError(f"h must be a positive number of steps, got {h}")
        frames = [self._predict_one(uid, fit, h, levels) for uid, fit in fits.items()]
        return pd.concat(frames, ignore_index=True)

    # -- internals ------------------------------------------------------------

    def _check_fitted(self) -> dict[str, SeriesFit]:
        fits: dict[str, SeriesFit] | None = getattr(self, "fits_", None)
        if fits is None:
            raise NotFittedError(
                f"{type(self).__name__} is not fitted yet: call fit(df) before predict()."
            )
        return fits

    def _predict_one(self, uid: str, fit: SeriesFit, h: int, levels: Levels) -> pd.DataFrame:
        mean = np.asarray(self._predict_series(fit.state, h), dtype=np.float64)
        steps = np.arange(1, h + 1)
        out: dict[str, Any] = {
            UID: uid,
            DS: fit.last_ds + fit.step * steps,
            STEP: steps,
            MODEL: self.model_name,
            MEAN: mean,
        }
        offsets = calibration_offsets(fit.calibration, h, levels)
        for i, level in enumerate(levels):
            out[quantile_column(level)] = mean + offsets[i]
        if fit.nonnegative:
            # Clipped as arrays: the frame's clip cost more than the forecast itself.
            for column in [MEAN, *(quantile_column(level) for level in levels)]:
                out[column] = np.clip(out[column], 0.0, None)
        return pd.DataFrame(out)


class OnePassForecaster(Forecaster):
    """A family whose fit and calibration are one pass: ``_fit_and_calibrate`` is its hook.

    The held-out fold (or the prefix the parameters are estimated on) that calibrates
    the intervals is also what the fit learns from, so the state and the residuals come
    from one call; ``_fit_series`` (the default calibration's refits) and
    ``_calibration_residuals`` each take their half of it.
    """

    @abstractmethod
    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, Calibration]:
        """Return the learned state and the calibration residuals of one series."""

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return self._fit_and_calibrate(y, ds)[0]

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> Calibration:
        return self._fit_and_calibrate(y, ds)[1]


def infer_step(ds: pd.DatetimeIndex, uid: str) -> pd.Timedelta:
    """Return the regular step of a validated series' timestamps."""
    if len(ds) < 2:
        raise InsufficientHistoryError(
            f"series {uid!r} has fewer than 2 timestamps, so its step is unknown."
        )
    ns = ds.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return pd.Timedelta(int(np.median(np.diff(ns))), unit="ns")


def refit_residuals(
    model: Forecaster,
    y: FloatArray,
    ds: pd.DatetimeIndex,
    horizon: int,
    n_windows: int,
) -> FloatArray:
    """Residuals by refitting ``model`` on prefixes that end at recent cutoffs.

    Cutoffs are spaced ``max(1, horizon // 2)`` steps apart so that windows overlap
    little but still cover recent behaviour; each window scores ``horizon`` steps.
    """
    residuals = np.full((n_windows, horizon), np.nan)
    spacing = max(1, horizon // 2)
    for w in range(n_windows):
        end = len(y) - horizon - w * spacing
        if end < model.min_history():
            break
        state = model._fit_series(y[:end], ds[:end])
        pred = np.asarray(model._predict_series(state, horizon), dtype=np.float64)
        residuals[w] = y[end : end + horizon] - pred
    return residuals
