"""Each pool's live forecast error, as the evaluate job last measured it.

The evaluate job (:mod:`pipelines.jobs.evaluate`) scores stored forecasts against the
actuals and, run by the scheduler, stores its details with the job run: the mean
live MASE per series at the selection horizon. :class:`StoredLiveError` reads the
newest successful run from the store (at most every ``every``, so a decision costs
a dict lookup) and answers the policy's :data:`~api.service.ErrorSource` question for
a pool: the live MASE of its ``demand_gpus`` and when it was measured. The policy's
health gate then falls back to reactive above the bound, and ``/metrics`` exposes the
value as ``foresight_live_forecast_error`` (which ``ForesightModelDegraded`` alerts on).

A score of another model version than the one served is ignored: a newly promoted
champion is not judged by its predecessor's errors.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forecaster.config.pools import PoolConfig
from forecaster.exceptions import StoreError
from forecaster.loaders import DEMAND
from pipelines.jobs.evaluate import JOB as EVALUATE_JOB
from pipelines.jobs.evaluate import LIVE_MASE, MODEL_VERSION_KEY
from pipelines.store import Store

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveErrors:
    """Live MASE per series from one evaluation, and when it finished."""

    by_series: Mapping[str, float] = field(default_factory=dict)
    measured_at: datetime | None = None


def errors_of(details: Mapping[str, Any], version: str | None) -> dict[str, float]:
    """The finite live MASE per series in an evaluate run's details, for ``version``."""
    if version is not None and str(details.get(MODEL_VERSION_KEY)) != version:
        return {}
    raw = details.get(LIVE_MASE)
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(uid): float(value)
        for uid, value in raw.items()
        if isinstance(value, int | float) and math.isfinite(value)
    }


class StoredLiveError:
    """The live forecast error per pool from the newest successful evaluate run.

    Args:
        store: where the scheduler records job runs.
        version: returns the version served now (None: accept any version's scores);
            asked at each read, so a newly promoted champion's scores are the ones used.
        every: seconds between reads of the store.
    """

    def __init__(
        self, store: Store, version: Callable[[], str | None], every: float = 30.0
    ) -> None:
        self._store = store
        self._version = version
        self._every = every
        self._errors = LiveErrors()
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def poll(self) -> LiveErrors:
        """Read the newest evaluate run now; keep the last known errors if the store fails."""
        try:
            runs = self._store.job_runs.history(EVALUATE_JOB, limit=20)
        except StoreError as exc:
            logger.warning("live forecast error: cannot read the evaluate runs: %s", exc)
            return self._errors
        for run in runs:
            if run.outcome == "ok":
                self._errors = LiveErrors(
                    errors_of(run.details, self._version()), run.finished_at or run.started_at
                )
                break
        return self._errors

    def __call__(self, pool: PoolConfig, now: datetime) -> tuple[float | None, datetime | None]:
        """Return the pool's live MASE and when it was measured (None, None if unmeasured)."""
        with self._lock:
            tick = time.monotonic()
            if self._read_at is None or tick - self._read_at >= self._every:
                self._read_at = tick
                self.poll()
            errors = self._errors
        value = errors.by_series.get(pool.series_id(DEMAND))
        return (None, None) if value is None else (value, errors.measured_at)
