"""Each pool's live forecast error, as the evaluate job last measured it (docs/api.md)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from forecaster.exceptions import DataValidationError
from forecaster.loaders import DEMAND
from forecaster.types import quantile_column
from pipelines.config.pools import PoolConfig
from pipelines.errors import StoreError
from pipelines.jobs.evaluate import CALIBRATION, EVALUATED_AT, LIVE_MASE, MODEL_VERSION_KEY
from pipelines.jobs.evaluate import JOB as EVALUATE_JOB
from pipelines.store.store import Store
from policy.types import Calibration

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveErrors:
    """Live MASE per series from one evaluation, and when it finished."""

    by_series: Mapping[str, float] = field(default_factory=dict)
    measured_at: datetime | None = None
    calibration: Mapping[str, Mapping[str, Calibration]] = field(default_factory=dict)
    """Per series and quantile column (``q0.9``), the live calibration."""


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


def calibrations_of(
    details: Mapping[str, Any], version: str | None
) -> dict[str, dict[str, Calibration]]:
    """The valid calibrations per series and quantile column in an evaluate run's details."""
    if version is not None and str(details.get(MODEL_VERSION_KEY)) != version:
        return {}
    raw = details.get(CALIBRATION)
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, dict[str, Calibration]] = {}
    for uid, levels in raw.items():
        if not isinstance(levels, Mapping):
            continue
        for column, values in levels.items():
            made = _calibration(values)
            if made is not None:
                out.setdefault(str(uid), {})[str(column)] = made
    return out


def measured_at(details: Mapping[str, Any], finished: datetime | None) -> datetime | None:
    """When an evaluate run measured its error: its ``now``, else (older runs) its end.

    The run's ``now`` is on the clock the evaluation ran by, the one decisions use
    (``foresight serve --clock replay``: the newest sample's time); the run record's
    end is always the wall clock's.
    """
    stamped = details.get(EVALUATED_AT)
    if isinstance(stamped, str):
        try:
            parsed = datetime.fromisoformat(stamped)
        except ValueError:
            return finished
        if parsed.tzinfo is not None:
            return parsed
    return finished


def _calibration(values: object) -> Calibration | None:
    if not isinstance(values, Mapping):
        return None
    try:
        made = Calibration(
            offset=float(values["offset"]),
            live_coverage=float(values["live_coverage"]),
            forecasts=int(values["forecasts"]),
        )
    except (KeyError, TypeError, ValueError, DataValidationError):
        return None
    return made if math.isfinite(made.live_coverage) else None


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
                version = self._version()
                self._errors = LiveErrors(
                    errors_of(run.details, version),
                    measured_at(run.details, run.finished_at or run.started_at),
                    calibrations_of(run.details, version),
                )
                break
        return self._errors

    def __call__(self, pool: PoolConfig, now: datetime) -> tuple[float | None, datetime | None]:
        """Return the pool's live MASE and when it was measured (None, None if unmeasured)."""
        errors = self._current()
        value = errors.by_series.get(pool.series_id(DEMAND))
        return (None, None) if value is None else (value, errors.measured_at)

    def calibration(self, pool: PoolConfig, level: float) -> Calibration | None:
        """Return the live calibration of the pool's demand at ``level``, None if unmeasured."""
        series = self._current().calibration.get(pool.series_id(DEMAND), {})
        return series.get(quantile_column(level))

    def _current(self) -> LiveErrors:
        with self._lock:
            tick = time.monotonic()
            if self._read_at is None or tick - self._read_at >= self._every:
                self._read_at = tick
                self.poll()
            return self._errors
