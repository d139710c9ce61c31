"""``foresight_webhook_outbox_items{status}``: the webhook outbox by status, at scrape time.

Details: docs/api.md, "Notes from the code", `api/outbox_metrics.py`."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from api.service import RecommendationService
from api.store_metrics import StoreCollector
from pipelines.store.outbox import Status


class OutboxCollector(StoreCollector[dict[Status, int]]):
    """Reads the outbox's counts by status from the app's store at each scrape.

    Args:
        service: returns the app's service, None while it is not started.
    """

    what = "webhook outbox"

    def _read(self, service: RecommendationService) -> dict[Status, int]:
        return service.services.store.outbox.counts()

    def _gauges(self, counts: dict[Status, int]) -> Iterator[GaugeMetricFamily]:
        """Yield one gauge per status."""
        gauge = GaugeMetricFamily(
            "foresight_webhook_outbox_items",
            "Webhook deliveries by status: pending, delivered, dead (rejected for good).",
            labels=["status"],
        )
        for status, count in counts.items():
            gauge.add_metric([status], count)
        yield gauge
