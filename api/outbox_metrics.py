"""``foresight_webhook_outbox_items{status}``: the webhook outbox by status, at scrape time.

``status="dead"`` counts the dead letters: deliveries a receiver rejected for good,
kept until an operator retries them (``foresight webhooks retry``). Alert on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.service import RecommendationService
from forecaster.exceptions import ForesightError

logger = logging.getLogger(__name__)


class OutboxCollector(Collector):
    """Reads the outbox's counts by status from the app's store at each scrape.

    Args:
        service: returns the app's service, None while it is not started.
    """

    def __init__(self, service: Callable[[], RecommendationService | None]) -> None:
        self._service = service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield one gauge per status; nothing while the service is not started."""
        service = self._service()
        if service is None:
            return
        try:
            counts = service.services.store.outbox.counts()
        except ForesightError as exc:
            # A scrape must still answer when the store is down; the gauge is absent then.
            logger.warning("metrics: webhook outbox unavailable: %s", exc)
            return
        gauge = GaugeMetricFamily(
            "foresight_webhook_outbox_items",
            "Webhook deliveries by status: pending, delivered, dead (rejected for good).",
            labels=["status"],
        )
        for status, count in counts.items():
            gauge.add_metric([status], count)
        yield gauge
