"""Demand forecasts per pool: the champion's family refitted on recent history, cached.

The registered champion carries each series' selected family and hyperparameters; its
fitted state is as old as the training. Serving refits that family on the pool's
recent ``demand_gpus`` history (as ``foresight forecast`` does) and predicts far
enough to cover ``now + lead_time + step``. The prediction is re-made from the fit
once a step has passed, so the window keeps moving without refitting per request.

A refit costs seconds for a real champion, so it never happens on a request or a
push: new demand samples only mark the pool's fit stale
(:meth:`ForecastCache.invalidate`), decisions keep using the previous fit meanwhile,
and :meth:`ForecastCache.refit_stale` (run by the app's background refresh) refits
outside every lock. Only a pool without any fit yet is fitted on first use.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, cast

import pandas as pd

from api.policy import DemandForecast
from forecaster.backtest import Estimator, clone
from forecaster.champion import ChampionForecaster
from forecaster.config.pools import PoolConfig
from forecaster.contract import validate_series
from forecaster.exceptions import ForesightError
from forecaster.loaders import DEMAND
from forecaster.models.base import infer_step
from forecaster.pyfunc import SupportsPredict
from forecaster.registry import LoadedModel
from forecaster.training import recent_history
from forecaster.types import DS, UID
from pipelines.store import Store

logger = logging.getLogger(__name__)

DEFAULT_STEP: Final = timedelta(minutes=5)
"""The step assumed for a pool before its history shows one."""


@dataclass(frozen=True)
class ForecastSettings:
    """How forecasts are made.

    Attributes:
        levels: quantile levels every forecast carries (the pool's own is added).
        horizon: the fewest steps predicted (the window may need more).
        max_train: how much recent history a refit sees.
        max_gap_steps: the longest gap interpolated when cleaning the history.
    """

    levels: tuple[float, ...]
    horizon: int
    max_train: timedelta
    max_gap_steps: int


@dataclass(frozen=True)
class PoolForecast:
    """The demand forecast of one pool, or why there is none.

    Attributes:
        pool: the pool name.
        frame: the forecast frame ``unique_id, ds, step, model, mean, q<level>...``.
        forecast: the same at the pool's quantile, as the policy takes it.
        model_version: the champion version that made it.
        generated_at: when it was predicted.
        step: the series step.
        last_observed: the newest history point it was fitted on.
        reason: why there is no forecast; empty when there is one.
    """

    pool: str
    frame: pd.DataFrame | None
    forecast: DemandForecast | None
    model_version: str | None
    generated_at: datetime
    step: timedelta
    last_observed: datetime | None
    reason: str = ""


@dataclass(frozen=True)
class _Fit:
    model: SupportsPredict | None
    step: timedelta
    last_observed: datetime | None
    reason: str
    made_at: float = field(default_factory=time.monotonic)


def refit(model: SupportsPredict, history: pd.DataFrame) -> SupportsPredict:
    """Return ``model``'s families and hyperparameters fitted on ``history``.

    A champion keeps its per-series choice (series it never saw get its default);
    another estimator is rebuilt from its parameters; anything else predicts as loaded.
    """
    if isinstance(model, ChampionForecaster):
        return model.unfitted().fit(history)
    if callable(getattr(model, "get_params", None)) and callable(getattr(model, "fit", None)):
        return clone(cast(Estimator, model)).fit(history)
    return model


class ForecastCache:
    """Per-pool forecasts from the loaded champion, refitted only when data changes.

    Args:
        store: where the demand history is.
        model: the loaded champion, None when there is none.
        settings: levels, horizon and history length.
        missing_model_reason: why ``model`` is None, for the explanation.
    """

    def __init__(
        self,
        store: Store,
        model: LoadedModel | None,
        settings: ForecastSettings,
        *,
        missing_model_reason: str = "no champion model is loaded",
    ) -> None:
        self._store = store
        self._model = model
        self._settings = settings
        self._missing = missing_model_reason
        self._fits: dict[str, _Fit] = {}
        self._forecasts: dict[str, PoolForecast] = {}
        # Bumped by every invalidation: a refit that read the history before a newer
        # invalidation leaves the pool stale.
        self._generation: dict[str, int] = {}
        self._stale: set[str] = set()
        self._lock = threading.Lock()

    def invalidate(self, pool: str) -> None:
        """Mark the pool's fit stale: its demand history changed (refit in the background)."""
        with self._lock:
            self._generation[pool] = self._generation.get(pool, 0) + 1
            if pool in self._fits:
                self._stale.add(pool)

    @property
    def stale(self) -> set[str]:
        """The pools whose fit is older than their demand history."""
        with self._lock:
            return set(self._stale)

    def refit_stale(
        self,
        pools: Iterable[PoolConfig],
        now: datetime,
        newest: Mapping[str, datetime | None] | None = None,
    ) -> set[str]:
        """Refit the stale fits among ``pools`` (slow: no lock is held while fitting).

        A stale pool is refitted when its newest demand sample (``newest``) is later
        than what the fit saw, or when the fit is a series step old (wall time):
        rewrites of old samples arriving every second then cost one refit per pool
        and step, not one per push.

        Returns:
            The pools refitted; their next :meth:`get` predicts from the new fit.

        Raises:
            StoreError: a history could not be read.
        """
        done: set[str] = set()
        for pool in pools:
            with self._lock:
                if pool.name not in self._stale:
                    continue
                old = self._fits.get(pool.name)
                if old is not None and not self._due(old, (newest or {}).get(pool.name)):
                    continue
                generation = self._generation.get(pool.name, 0)
            fit = self._fit(pool, now)
            with self._lock:
                self._fits[pool.name] = fit
                self._forecasts.pop(pool.name, None)
                if self._generation.get(pool.name, 0) == generation:
                    self._stale.discard(pool.name)
            done.add(pool.name)
        return done

    @staticmethod
    def _due(fit: _Fit, newest: datetime | None) -> bool:
        """Whether a stale fit is worth refitting now (see :meth:`refit_stale`)."""
        if fit.last_observed is None or (newest is not None and newest > fit.last_observed):
            return True
        return time.monotonic() - fit.made_at >= fit.step.total_seconds()

    def step(self, pool: str) -> timedelta:
        """Return the pool's series step (the default before a fit)."""
        fit = self._fits.get(pool)
        return DEFAULT_STEP if fit is None else fit.step

    def cached(self, pool: str) -> PoolForecast | None:
        """Return the last forecast made for the pool, None when there is none."""
        return self._forecasts.get(pool)

    def get(self, pool: PoolConfig, now: datetime) -> PoolForecast:
        """Return the pool's forecast at ``now``, refitting or re-predicting as needed.

        Raises:
            StoreError: the history could not be read.
        """
        with self._lock:
            cached = self._forecasts.get(pool.name)
            if (
                cached is not None
                and cached.generated_at <= now < cached.generated_at + cached.step
            ):
                return cached
            fit = self._fits.get(pool.name)
            if fit is None:
                fit = self._fit(pool, now)
                self._fits[pool.name] = fit
                self._stale.discard(pool.name)
            made = self._predict(pool, fit, now)
            self._forecasts[pool.name] = made
            return made

    def _fit(self, pool: PoolConfig, now: datetime) -> _Fit:
        if self._model is None:
            return _Fit(None, DEFAULT_STEP, None, self._missing)
        sid = pool.series_id(DEMAND)
        raw = self._store.samples.read([sid], start=now - self._settings.max_train)
        if len(raw) < 2:
            return _Fit(
                None,
                DEFAULT_STEP,
                None,
                f"{sid} has {len(raw)} samples in the {self._settings.max_train} before now; "
                "at least 2 are needed to forecast",
            )
        try:
            history, _ = validate_series(raw, max_gap_steps=self._settings.max_gap_steps)
            step = infer_step(pd.DatetimeIndex(history[DS]), sid).to_pytimedelta()
            cap = max(2, math.ceil(self._settings.max_train / step))
            model = refit(self._model.model, recent_history(history, cap))
        # A family can fail on odd data in its own ways; each means reactive for this pool.
        except (ForesightError, ValueError) as exc:
            logger.warning("pool %s: cannot fit the demand forecast: %s", pool.name, exc)
            return _Fit(None, DEFAULT_STEP, None, f"the demand forecast could not be fitted: {exc}")
        last = pd.Timestamp(history[DS].iloc[-1]).to_pydatetime()
        return _Fit(model, step, last, "")

    def _predict(self, pool: PoolConfig, fit: _Fit, now: datetime) -> PoolForecast:
        version = None if self._model is None else self._model.version
        if fit.model is None or fit.last_observed is None:
            return PoolForecast(pool.name, None, None, version, now, fit.step, None, fit.reason)
        if now - fit.last_observed > self._settings.max_train:
            # Predicting across the gap would take (now - last) / step steps: millions
            # when a clock is far ahead. The data is stale; the policy goes reactive.
            reason = (
                f"the demand history ends at {fit.last_observed.isoformat()}, more than "
                f"{self._settings.max_train} before now ({now.isoformat()}); push recent samples"
            )
            return PoolForecast(pool.name, None, None, version, now, fit.step, None, reason)
        reach = max(now, fit.last_observed) + pool.lead_time + fit.step - fit.last_observed
        h = max(self._settings.horizon, math.ceil(reach / fit.step))
        levels = tuple(sorted({*self._settings.levels, pool.quantile}))
        try:
            frame = fit.model.predict(h, levels)
            frame = frame[frame[UID] == pool.series_id(DEMAND)].reset_index(drop=True)
            forecast = DemandForecast.from_frame(
                frame,
                level=pool.quantile,
                model_version=str(version),
                generated_at=now,
                step=fit.step,
            )
        except (ForesightError, ValueError) as exc:
            logger.warning("pool %s: cannot predict demand: %s", pool.name, exc)
            reason = f"the demand forecast could not be predicted: {exc}"
            return PoolForecast(pool.name, None, None, version, now, fit.step, None, reason)
        return PoolForecast(pool.name, frame, forecast, version, now, fit.step, fit.last_observed)
