"""The serving wiring: the app's :class:`~api.services.Services`, completed once at start.

Details: docs/api.md, "Notes from the code", `api/wiring.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from api.clock import ClockMode, decision_clock
from api.latency import LatencyTracker, bottleneck_settings
from api.live import LiveIndex
from api.live_error import StoredLiveError
from api.service import RecommendationService
from api.services import Services, no_latency, uncalibrated, unmeasured_error


@dataclass(frozen=True)
class Serving:
    """What a started app serves from.

    Attributes:
        services: the completed services (the decisions' inputs).
        latency: the call-chain analysis of the span window (the latency source
            unless the caller gave one).
    """

    services: Services
    service: RecommendationService
    latency: LatencyTracker


def serving(given: Services, clock: ClockMode | None) -> Serving:
    """Complete ``given`` for serving and build the recommendation service over it.

    Args:
        given: the services to serve from; left as they are.
        clock: the decision clock's mode; None keeps ``given.clock`` (tests).
    """
    live = LiveIndex(given.store, given.pools.pools)
    decision = given.clock
    if clock is not None:
        ahead = timedelta(seconds=given.settings.service.max_sample_future_seconds)
        decision = decision_clock(clock, live.newest, ahead)

    def served() -> str | None:
        # Read at each poll: the champion follower swaps the model in ``completed``.
        return None if completed.model is None else completed.model.version

    def stamp() -> datetime:
        # Spans age on the wall clock; the analysis is served on the decision clock,
        # read at each analysis (a replay may swap the clock).
        return completed.clock()

    tracker = LatencyTracker(
        given.spans,
        given.pools.pools,
        clock=given.span_clock,
        services=given.pools.services,
        settings=bottleneck_settings(given.settings),
        stamp=stamp,
    )
    # A caller's own source (tests, a replay) wins over the stored and analysed ones.
    stored = StoredLiveError(given.store, served)
    own_error = given.live_error is not unmeasured_error
    completed = replace(
        given,
        clock=decision,
        live_error=given.live_error if own_error else stored,
        calibration=(
            given.calibration
            if own_error or given.calibration is not uncalibrated
            else stored.calibration
        ),
        latency=given.latency if given.latency is not no_latency else tracker.adjustment,
    )
    return Serving(completed, RecommendationService(completed, live=live), tracker)
