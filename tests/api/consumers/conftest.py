"""Recommendations for the consumer tests: real decisions, then the numbers set by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.config.pools import PoolConfig
from policy.decide import decide
from policy.recommendation import Recommendation, action_for
from policy.state import StabilisationState
from policy.types import NO_LATENCY, ForecastHealth, LiveSignals, Mode, Sample

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)

MakeRecommendation = Callable[..., Recommendation]


def make_recommendation(
    pool: PoolConfig,
    current: int = 2,
    desired: int = 2,
    *,
    headroom_pods: int = 0,
    now: datetime = NOW,
    mode: Mode = "reactive",
) -> Recommendation:
    """Return a real recommendation for ``pool`` with the node counts set by hand.

    The decision has no forecast, so it is ``reactive``; ``mode`` relabels it (the
    consumers read the mode, not how it was reached).
    """
    live = LiveSignals(Sample(1.0, now - 30 * timedelta(seconds=1)), Sample(current, now))
    health = ForecastHealth(None, 1.5, 5 * MIN, 30 * MIN)
    rec = decide(pool, None, live, health, NO_LATENCY, StabilisationState(), now)
    return replace(
        rec,
        current_nodes=current,
        desired_nodes=desired,
        delta=desired - current,
        action=action_for(current, desired),
        headroom_nodes=headroom_pods,
        headroom_pods=headroom_pods,
        mode=mode,
    )


@pytest.fixture
def recommend() -> MakeRecommendation:
    """The factory :func:`make_recommendation`."""
    return make_recommendation
