"""What the app serves from: :class:`Services`, and the default sources it starts with.

Details: docs/api.md, "Notes from the code", `api/services.py`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from api.callchain.incremental import ChainWindow
from api.clock import Clock, system_clock
from api.settings import AppSettings
from forecaster.registry import LoadedModel
from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.store.store import Store
from policy.types import NO_LATENCY, Calibration, LatencyAdjustment

if TYPE_CHECKING:
    from api.champion import ChampionSource, RegistryView

LatencySource = Callable[[PoolConfig, datetime], LatencyAdjustment]
"""Returns the call-chain adjustment of a pool at a time."""

ErrorSource = Callable[[PoolConfig, datetime], tuple[float | None, datetime | None]]
"""Returns a pool's recent live forecast error and when it was measured."""

CalibrationSource = Callable[[PoolConfig, float], Calibration | None]
"""Returns the live calibration of a pool's demand at a quantile level (None: none)."""


def no_latency(pool: PoolConfig, now: datetime) -> LatencyAdjustment:
    """The latency source without call-chain data: never adds nodes."""
    return NO_LATENCY


def unmeasured_error(pool: PoolConfig, now: datetime) -> tuple[float | None, datetime | None]:
    """The error source before live error is measured: unknown, which counts as healthy."""
    return None, None


def uncalibrated(pool: PoolConfig, level: float) -> Calibration | None:
    """The calibration source before any is measured: the model's own quantiles."""
    return None


@dataclass
class Services:
    """Everything the app serves from, built in the lifespan or injected by tests.

    Mutable on purpose in two places only: the champion follower swaps ``model`` and
    records ``registry``, and a replay may swap ``clock``.

    Attributes:
        store: the store (samples, state, audit trail).
        model: the loaded champion, None when none could be loaded (decisions are
            then reactive, and ``/readyz`` says why).
        clock: the decision clock (see :mod:`api.clock`).
        latency: the call-chain adjustment per pool.
        live_error: the recent live forecast error per pool.
        calibration: the live calibration of a pool's quantile (added to the forecast
            when ``settings.service.live_calibration``).
        owns_store: close the store when the app stops.
        spans: the call-chain statistics that ``POST /v1/traces`` and
            ``POST /signals/spans`` feed, kept incrementally (analysed by
            :mod:`api.latency`).
        span_clock: the clock spans arrive by (wall time: spans age in real time even
            when decisions replay old samples).
        champion: where new champions come from; the app follows it (see
            :mod:`api.champion`). None: serve ``model`` for good.
        registry: what the last check of ``champion`` saw; None before the first.
        wall_clock: the wall clock that bounds pushed sample times (a sample later
            than it, plus the tolerance, is refused whatever the decision clock).
    """

    settings: AppSettings
    pools: PoolsConfig
    store: Store
    model: LoadedModel | None
    model_problem: str = ""
    clock: Clock = system_clock
    latency: LatencySource = no_latency
    live_error: ErrorSource = unmeasured_error
    calibration: CalibrationSource = uncalibrated
    owns_store: bool = False
    spans: ChainWindow = field(default_factory=ChainWindow)
    span_clock: Clock = system_clock
    champion: ChampionSource | None = None
    registry: RegistryView | None = None
    wall_clock: Clock = system_clock
