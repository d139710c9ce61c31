"""A Prometheus collector that reads the app's store at each scrape (docs/api.md)."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import ClassVar, Generic, TypeVar

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.service import RecommendationService
from forecaster.exceptions import ForesightError

Read = TypeVar("Read")


class StoreCollector(Collector, ABC, Generic[Read]):
    """Reads from the app's store at each scrape and yields the gauges of what it read.

    Args:
        service: returns the app's service, None while it is not started.
    """

    what: ClassVar[str]
    """What is read, for the warning when the store is down."""

    def __init__(self, service: Callable[[], RecommendationService | None]) -> None:
        self._service = service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the gauges; nothing while the service is not started or the store is down."""
        service = self._service()
        if service is None:
            return
        try:
            read = self._read(service)
        except ForesightError as exc:
            # A scrape must still answer when the store is down; the gauges are absent then.
            # The warning is logged under the collector's own module, as it always was.
            log = logging.getLogger(type(self).__module__)
            log.warning("metrics: %s unavailable: %s", self.what, exc)
            return
        yield from self._gauges(read)

    @abstractmethod
    def _read(self, service: RecommendationService) -> Read:
        """Read what the gauges show (ForesightError: the store failed)."""

    @abstractmethod
    def _gauges(self, read: Read) -> Iterator[GaugeMetricFamily]:
        """Yield the gauges of what was read."""
