"""``foresight_scorecard_*{pool,window}``: the shadow scorecard as Prometheus gauges.

Details: docs/scorecard.md, "Notes from the code", `api/scorecard_metrics.py`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily

from api.scorecard import scorecards
from api.service import RecommendationService
from api.store_metrics import StoreCollector
from pipelines.scorecard.types import PoolScorecard, Window

SIDES = ("actual", "plan")


class ScorecardCollector(StoreCollector[list[PoolScorecard]]):
    """Scores every pool at a scrape, at most once per ``max_age_seconds``.

    Args:
        service: returns the app's service, None while it is not started.
        max_age_seconds: how long one scoring answers scrapes (0: every scrape scores).
        monotonic: the timer of that age (a parameter so tests need not sleep).
    """

    what = "scorecard"

    def __init__(
        self,
        service: Callable[[], RecommendationService | None],
        *,
        max_age_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(service)
        self._max_age = max_age_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cached: tuple[float, list[PoolScorecard]] | None = None

    def _gauges(self, cards: list[PoolScorecard]) -> Iterator[GaugeMetricFamily]:
        """Yield the scorecard gauges."""
        yield from scorecard_gauges(cards)

    def _read(self, service: RecommendationService) -> list[PoolScorecard]:
        with self._lock:
            now = self._monotonic()
            if self._cached is not None and now - self._cached[0] < self._max_age:
                return self._cached[1]
            cards = scorecards(service, service.select(None), tuple(Window))
            self._cached = (now, cards)
            return cards


def scorecard_gauges(cards: Sequence[PoolScorecard]) -> Iterator[GaugeMetricFamily]:
    """The gauges of the given scorecards."""
    labels = ["pool", "window", "side"]
    waiting = GaugeMetricFamily(
        "foresight_scorecard_waiting_gpu_hours",
        "GPU-hours of demand left waiting over the window: actual, or under Foresight's plan.",
        labels=labels,
    )
    nodes = GaugeMetricFamily(
        "foresight_scorecard_node_hours",
        "Node-hours held over the window: actual, or under Foresight's plan.",
        labels=labels,
    )
    coverage = GaugeMetricFamily(
        "foresight_scorecard_coverage_ratio",
        "Hours of the window with demand, nodes and a recommendation in force, over its hours.",
        labels=["pool", "window"],
    )
    samples = GaugeMetricFamily(
        "foresight_scorecard_samples",
        "Demand samples of the window the scorecard covers.",
        labels=["pool", "window"],
    )
    for card in cards:
        for window, score in card.windows.items():
            for side, value in zip(SIDES, score.waiting_gpu_hours, strict=True):
                waiting.add_metric([card.pool, window.value, side], value)
            for side, value in zip(SIDES, score.node_hours, strict=True):
                nodes.add_metric([card.pool, window.value, side], value)
            coverage.add_metric([card.pool, window.value], score.coverage)
            samples.add_metric([card.pool, window.value], score.samples)
    yield from (waiting, nodes, coverage, samples)
