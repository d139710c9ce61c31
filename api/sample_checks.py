"""What a pushed sample may be: a declared signal of a known pool, a real value, a sane time.

Details: docs/api.md, "Notes from the code", `api/sample_checks.py`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from api.clock import ReplayWindow
from forecaster.exceptions import DataValidationError
from forecaster.loaders import DEMAND
from forecaster.types import SeriesId
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.config.signals import ALLOCATED_GPUS, GPU_UTIL, NODES, QUEUE_GPUS
from pipelines.store.samples import SampleRow

COUNT_SIGNALS: Final = frozenset({ALLOCATED_GPUS, QUEUE_GPUS, NODES, DEMAND})
"""Signals that count GPUs or nodes, so cannot be negative."""

MAX_COUNT: Final = 1_000_000.0
"""The largest GPU or node count believed: no node pool holds a million GPUs."""

PERCENT_SIGNALS: Final = frozenset({GPU_UTIL})
"""Signals that are percentages (DCGM utilisation), so lie in 0-100."""

EARLIEST_SAMPLE: Final = datetime(2000, 1, 1, tzinfo=UTC)
"""No sample is older than this (a 1970 time is a zero or a unit mistake)."""

MAX_SHOWN: Final = 10
"""Offenders listed in one message."""


@dataclass(frozen=True)
class TimeWindow:
    """The times a pushed sample may carry: ``[earliest, latest]``, and the replay's bound.

    Attributes:
        earliest: no sample is older.
        latest: the wall clock plus its tolerance (every clock).
        replay: under the replay clock, its window (a sample past its end is refused
            too); None on the wall clock, or before the replay has a sample.
    """

    earliest: datetime
    latest: datetime
    replay: ReplayWindow | None = None

    @classmethod
    def around(
        cls,
        wall_now: datetime,
        future_tolerance: timedelta,
        replay: ReplayWindow | None = None,
    ) -> TimeWindow:
        """The window from :data:`EARLIEST_SAMPLE` to ``wall_now + future_tolerance``."""
        return cls(EARLIEST_SAMPLE, wall_now + future_tolerance, replay)


def declared_signals(pool: PoolConfig) -> frozenset[str]:
    """The signals a pool accepts: those its config declares, and derived demand."""
    return frozenset(pool.signals) | {DEMAND}


def value_problem(series_id: str, signal: str, value: float) -> str | None:
    """Why ``value`` cannot be a reading of ``signal``, None when it can."""
    if not math.isfinite(value):
        return f"{series_id}: value {value} is not finite"
    if signal in COUNT_SIGNALS and value < 0:
        return f"{series_id}: {signal} counts GPUs or nodes, got negative {value}"
    if signal in COUNT_SIGNALS and value > MAX_COUNT:
        return f"{series_id}: {signal} of {value} is above the largest count {MAX_COUNT:.0f}"
    if signal in PERCENT_SIGNALS and not 0.0 <= value <= 100.0:
        return f"{series_id}: {signal} is a percentage in 0-100, got {value}"
    return None


def time_problems(rows: Sequence[SampleRow], window: TimeWindow) -> list[str]:
    """The samples of ``rows`` outside ``window``, described with the limit they break."""
    early = window.earliest
    late = window.latest
    replay = window.replay
    replay_end = None if replay is None else replay.latest
    problems: list[str] = []
    for row in rows:
        sid, ts = row["series_id"], row["ts"]
        if ts < early:
            problems.append(
                f"{sid}: time {ts.isoformat()} is before the earliest accepted "
                f"{early.isoformat()}; send the observation time in UTC (not 0 or seconds)"
            )
        elif ts > late:
            problems.append(
                f"{sid}: time {ts.isoformat()} is later than now + the tolerance "
                f"({late.isoformat()}, service.max_sample_future_seconds); "
                "send observations when they happen, and check the sender's clock"
            )
        elif replay is not None and replay_end is not None and ts > replay_end:
            problems.append(
                f"{sid}: time {ts.isoformat()} is outside the replay's window: "
                f"{replay.describe()}; a later sample would move 'now' there. Push the "
                "replayed data in time order, or serve live data with --clock system"
            )
    return problems


def check_samples(rows: Sequence[SampleRow], pools: PoolsConfig, window: TimeWindow) -> list[str]:
    """Check pushed samples and return the pools they belong to, sorted.

    Raises:
        DataValidationError: a series names an unknown pool or an undeclared signal, a
            value cannot be real, or a time is outside ``window``; the message lists
            the offenders (at most ten) and the fix.
    """
    by_name = {pool.name: pool for pool in pools.pools}
    problems: list[str] = []
    touched: set[str] = set()
    unknown: set[str] = set()
    undeclared: dict[str, set[str]] = {}
    for row in rows:
        sid, value = row["series_id"], row["value"]
        name, signal = SeriesId.parse(sid)
        pool = by_name.get(name)
        if pool is None:
            unknown.add(name)
            continue
        if signal not in declared_signals(pool):
            undeclared.setdefault(name, set()).add(signal)
            continue
        touched.add(name)
        problem = value_problem(str(sid), signal, value)
        if problem is not None:
            problems.append(problem)
    problems.extend(time_problems(rows, window))
    heads = [_undeclared_message(by_name[name], sorted(sigs)) for name, sigs in undeclared.items()]
    if unknown:
        heads.insert(0, f"unknown pools {sorted(unknown)}; known pools: {', '.join(pools.names)}")
    if heads or problems:
        raise DataValidationError("rejected samples: " + "; ".join(_shown([*heads, *problems])))
    return sorted(touched)


def _undeclared_message(pool: PoolConfig, signals: Iterable[str]) -> str:
    return (
        f"pool {pool.name!r} declares no signals {list(signals)}; it accepts "
        f"{', '.join(sorted(declared_signals(pool)))} (add a signal to the pool's "
        "`signals` in the pools file to accept it)"
    )


def _shown(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_SHOWN:
        return problems
    return [*problems[:MAX_SHOWN], f"... and {len(problems) - MAX_SHOWN} more"]
