"""The latest reading of every live signal per pool, kept in memory and polled cheaply.

Details: docs/api.md, "Notes from the code", `api/live.py`."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

import pandas as pd

from forecaster.loaders import DEMAND
from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.signals import ALLOCATED_GPUS, GPU_UTIL, NODES, QUEUE_GPUS
from pipelines.store.store import Store
from policy.types import LiveSignals, Sample

LIVE_SIGNALS: Final = (DEMAND, ALLOCATED_GPUS, QUEUE_GPUS, NODES, GPU_UTIL)
"""The signals a decision reads; demand is derived from allocated + queued when missing."""

LOOKBACK: Final = timedelta(hours=1)
"""How far before a pool's newest sample a poll looks for new or rewritten rows."""


@dataclass(frozen=True)
class PoolReadings:
    """The newest sample of each live signal of one pool."""

    latest: Mapping[str, Sample] = field(default_factory=dict)

    @property
    def newest(self) -> datetime | None:
        """The time of the newest reading of any signal, None without readings."""
        return max((s.at for s in self.latest.values()), default=None)

    def demand(self) -> Sample | None:
        """Return demand now: the derived series, or allocated + queued if it lags."""
        stored = self.latest.get(DEMAND)
        allocated, queued = self.latest.get(ALLOCATED_GPUS), self.latest.get(QUEUE_GPUS)
        if allocated is None or queued is None:
            return stored
        # The older of the two parts dates the sum: its age is the honest one.
        summed = Sample(allocated.value + queued.value, min(allocated.at, queued.at))
        return stored if stored is not None and stored.at >= summed.at else summed

    def live_signals(self) -> LiveSignals | None:
        """Return the policy's live inputs, None when demand or ready nodes are unknown."""
        demand, nodes = self.demand(), self.latest.get(NODES)
        if demand is None or nodes is None:
            return None
        return LiveSignals(demand, nodes, self.latest.get(GPU_UTIL))

    def missing(self) -> list[str]:
        """Return the decisive signals without any reading (for error messages)."""
        gaps = [] if self.demand() is not None else [f"{DEMAND} (or allocated + queue)"]
        return gaps if NODES in self.latest else [*gaps, NODES]


def _latest_rows(frame: pd.DataFrame) -> dict[str, Sample]:
    if frame.empty:
        return {}
    last = frame.groupby(UID, sort=False).tail(1)
    return {
        str(uid): Sample(float(y), pd.Timestamp(ds).to_pydatetime())
        for uid, ds, y in zip(last[UID], last[DS], last[Y], strict=True)
    }


class LiveIndex:
    """The newest readings of every pool's live signals."""

    def __init__(self, store: Store, pools: Sequence[PoolConfig]) -> None:
        self._store = store
        self._pools = {pool.name: pool for pool in pools}
        self._readings: dict[str, PoolReadings] = {}
        self._lock = threading.Lock()

    def readings(self, pool: str) -> PoolReadings:
        """Return the pool's newest readings as of the last poll (empty before one)."""
        return self._readings.get(pool, PoolReadings())

    def newest(self) -> datetime | None:
        """Return the newest reading of any pool, None when there is none."""
        return max(
            (r.newest for r in self._readings.values() if r.newest is not None), default=None
        )

    def moved_by(self, samples: Iterable[tuple[str, datetime]]) -> list[str]:
        """Return the pools whose readings a write of ``samples`` may have changed.

        A sample older than the reading of its series (or, for an allocated or queued
        sample, than the pool's demand reading) cannot change what :meth:`poll` would
        read back: the store never loses a newer sample. Those pools need no poll, and
        their decisions no recomputing, after a backfill; the others do.

        Args:
            samples: ``(series_id, time)`` of the samples written, ``<pool>/<signal>``
                ids (other pools and signals are ignored).

        Returns:
            The pools, in the order of their first sample.
        """
        moved: dict[str, None] = {}
        for series_id, at in samples:
            pool, signal = SeriesId.of(series_id)
            if pool in moved or pool not in self._pools or signal not in LIVE_SIGNALS:
                continue
            latest = self.readings(pool).latest
            signals = (signal, DEMAND) if signal in (ALLOCATED_GPUS, QUEUE_GPUS) else (signal,)
            if any((seen := latest.get(s)) is None or at >= seen.at for s in signals):
                moved[pool] = None
        return list(moved)

    def poll(self, pools: Iterable[str] | None = None) -> set[str]:
        """Read new samples from the store and return the pools whose readings changed.

        Pools within :data:`LOOKBACK` of the newest reading are read together in one
        range query; the others (never seen, or lagging) one by one.

        Args:
            pools: the pools to poll; None polls every pool.

        Raises:
            StoreError: the store failed.
        """
        names = list(self._pools) if pools is None else list(pools)
        changed: set[str] = set()
        with self._lock:
            newest = self.newest()
            start = None if newest is None else newest - LOOKBACK
            together = [n for n in names if _at_or_after(self.readings(n).newest, start)]
            scanned: dict[str, PoolReadings] = {}
            if together and start is not None:
                ids = [self._pools[n].series_id(s) for n in together for s in LIVE_SIGNALS]
                rows = _latest_rows(self._store.samples.latest(ids, start=start))
                by_pool = _by_pool(rows)
                for name in together:
                    mine = by_pool.get(name, {})
                    scanned[name] = PoolReadings({**self.readings(name).latest, **mine})
            for name in names:
                if name not in scanned:
                    scanned[name] = self._scan(self._pools[name], self._readings.get(name))
            for name, after in scanned.items():
                before = self._readings.get(name)
                if before is None or after.latest != before.latest:
                    self._readings[name] = after
                    changed.add(name)
        return changed

    def _scan(self, pool: PoolConfig, before: PoolReadings | None) -> PoolReadings:
        ids = [pool.series_id(signal) for signal in LIVE_SIGNALS]
        samples = self._store.samples
        newest = None if before is None else before.newest
        if before is None or newest is None:
            rows: dict[str, Sample] = {}
            for sid in ids:
                last = samples.last_timestamp(sid)
                if last is not None:
                    rows.update(_latest_rows(samples.latest([sid], start=last.to_pydatetime())))
            return PoolReadings(_by_signal(pool, rows))
        rows = _latest_rows(samples.latest(ids, start=newest - LOOKBACK))
        return PoolReadings({**before.latest, **_by_signal(pool, rows)})


def _by_signal(pool: PoolConfig, rows: Mapping[str, Sample]) -> dict[str, Sample]:
    prefix = f"{pool.name}/"
    return {
        sid.removeprefix(prefix): sample for sid, sample in rows.items() if sid.startswith(prefix)
    }


def _by_pool(rows: Mapping[str, Sample]) -> dict[str, dict[str, Sample]]:
    """Rows of ``<pool>/<signal>`` ids grouped by pool, then signal."""
    grouped: dict[str, dict[str, Sample]] = {}
    for series_id, sample in rows.items():
        pool, signal = SeriesId.of(series_id)
        grouped.setdefault(pool, {})[signal] = sample
    return grouped


def _at_or_after(value: datetime | None, start: datetime | None) -> bool:
    return value is not None and start is not None and value >= start
