"""Demand forecasts per pool, as the forecast job stored them: the service fits nothing.

Details: docs/api.md, "Notes from the code", `api/forecasts.py`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.loaders import DEMAND
from forecaster.registry import LoadedModel
from forecaster.types import DS, STEP
from pipelines.config.pools import PoolConfig
from pipelines.store.forecasts import GENERATED_AT
from pipelines.store.peak_forecasts import LEAD, ORIGIN
from pipelines.store.store import Store
from pipelines.store.stored_peak import stored_peak
from policy.types import DemandForecast

logger = logging.getLogger(__name__)

DEFAULT_STEP: Final = timedelta(minutes=5)
"""The step assumed for a pool before a stored forecast shows one."""


@dataclass(frozen=True)
class PoolForecast:
    """The stored demand forecast of one pool, or why there is none.

    Attributes:
        frame: the stored per-horizon rows ``unique_id, ds, step, model, mean, q<level>...``.
        forecast: the same at the pool's quantile, with the peak forecast, as the policy
            takes it.
        model_version: the model version that made it (the served one).
        generated_at: when the forecast job made it; None without a forecast.
        last_observed: the forecast's origin, the newest observation it was made from.
        reason: why there is no forecast; empty when there is one.
    """

    pool: str
    frame: pd.DataFrame | None
    forecast: DemandForecast | None
    model_version: str | None
    generated_at: datetime | None
    step: timedelta
    last_observed: datetime | None
    reason: str = ""


class ForecastCache:
    """Per-pool forecasts read from the store, re-read when a newer one is stored.

    Args:
        store: where the forecast job stored its forecasts.
        model: the served champion (its version selects the stored forecasts); None
            when none is loaded.
        missing_model_reason: why ``model`` is None, for the explanation.
        until: the latest generation time a run may have to be read (the decision
            clock's now plus the skew it allows); runs another clock dated after it
            (a wall-clock run in a store this process replays) are passed over for
            the newest one before. None reads the newest whatever its time.
    """

    def __init__(
        self,
        store: Store,
        model: LoadedModel | None,
        *,
        missing_model_reason: str = "no champion model is loaded",
        until: Callable[[], datetime] | None = None,
    ) -> None:
        self._store = store
        self._model = model
        self._missing = missing_model_reason
        self._until = until
        self._forecasts: dict[str, PoolForecast] = {}
        self._run: datetime | None = None
        self._lock = threading.Lock()

    def step(self, pool: str) -> timedelta:
        """Return the pool's series step (the default before a forecast is read)."""
        made = self._forecasts.get(pool)
        return DEFAULT_STEP if made is None else made.step

    def get(self, pool: PoolConfig) -> PoolForecast:
        """Return the pool's newest stored forecast (read on first use, then cached).

        Raises:
            StoreError: the store could not be read.
        """
        made = self._forecasts.get(pool.name)
        if made is None:
            made = self._read(pool)
            with self._lock:
                self._forecasts.setdefault(pool.name, made)
        return made

    def reload(
        self,
        pools: Iterable[PoolConfig],
        publish: Callable[[set[str], Callable[[], None]], None] | None = None,
    ) -> set[str]:
        """Re-read the pools whose newest stored forecast is not the one held.

        Only complete forecast runs are seen (a run's per-horizon and peak rows are
        committed together): nothing is read while the newest run of the served
        version is the one last seen; otherwise one query finds the newest run of every
        pool's demand forecast, and only the pools where it moved are read again.

        Args:
            publish: called with the re-read pools and the swap of their forecasts
                into the cache, once they are all read; the caller runs the swap inside
                its own lock, after marking those pools' answers stale, so no reader
                sees a new forecast beside an answer decided from the one before (the
                twin read such an answer). None swaps them in at once.

        Raises:
            StoreError: the store could not be read.
        """
        if self._model is None:
            return set()
        until = None if self._until is None else self._until()
        run = self._store.forecast_runs.newest(self._model.version, until=until)
        if run is not None and run == self._run:
            return set()
        wanted = list(pools)
        newest = self._store.forecasts.newest(
            [pool.series_id(DEMAND) for pool in wanted], self._model.version, until=until
        )
        read: dict[str, PoolForecast] = {}
        for pool in wanted:
            held = self._forecasts.get(pool.name)
            stored = newest.get(pool.series_id(DEMAND))
            if held is None or held.generated_at != stored:
                read[pool.name] = self._read(pool)

        def swap() -> None:
            with self._lock:
                self._forecasts.update(read)

        if publish is None:
            swap()
        elif read:
            publish(set(read), swap)
        self._run = run
        return set(read)

    def _read(self, pool: PoolConfig) -> PoolForecast:
        if self._model is None:
            return PoolForecast(
                pool.name, None, None, None, None, DEFAULT_STEP, None, self._missing
            )
        version = self._model.version
        sid = pool.series_id(DEMAND)
        until = None if self._until is None else self._until()
        rows = self._store.forecasts.latest(sid, version, until=until)
        if rows.empty:
            reason = (
                f"the store holds no forecast of {sid} by model version {version}; the "
                "forecast job makes them (it runs on its schedule and after every training: "
                "see `foresight jobs`)"
            )
            return PoolForecast(pool.name, None, None, version, None, DEFAULT_STEP, None, reason)
        generated = pd.Timestamp(rows[GENERATED_AT].iloc[0]).to_pydatetime()
        # The peak of the same run, whatever run was committed since the rows were read.
        peaks = self._store.peak_forecasts.at(sid, version, generated)
        step = _step_of(rows, peaks)
        origin = pd.Timestamp(rows[DS].iloc[0]).to_pydatetime() - int(rows[STEP].iloc[0]) * step
        peak, missing = stored_peak(peaks, pool.lead_time, step, pool.quantile)
        try:
            forecast = DemandForecast.from_frame(
                rows,
                level=pool.quantile,
                model_version=version,
                generated_at=generated,
                step=step,
            )
            forecast = DemandForecast(
                forecast.timestamps,
                forecast.quantiles,
                forecast.level,
                forecast.model_version,
                forecast.generated_at,
                forecast.step,
                peak=peak,
                peak_missing=missing,
            )
        except DataValidationError as exc:
            reason = f"the stored forecast of {sid} cannot be used: {exc}"
            logger.warning("pool %s: %s", pool.name, reason)
            return PoolForecast(pool.name, None, None, version, generated, step, origin, reason)
        return PoolForecast(pool.name, rows, forecast, version, generated, step, origin)


def _step_of(rows: pd.DataFrame, peaks: pd.DataFrame) -> timedelta:
    """The series step: from the peak rows' window, else the per-horizon spacing."""
    if not peaks.empty:
        first = peaks.iloc[0]
        return (pd.Timestamp(first[DS]) - pd.Timestamp(first[ORIGIN])).to_pytimedelta() / int(
            first[LEAD]
        )
    ds = pd.DatetimeIndex(rows[DS])
    if len(ds) >= 2:
        steps = rows[STEP].to_numpy()
        return (ds[1] - ds[0]).to_pytimedelta() / int(steps[1] - steps[0])
    return DEFAULT_STEP
