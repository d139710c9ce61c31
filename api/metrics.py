"""Prometheus metrics of one app: per-pool gauges read at scrape time, request latency.

Details: docs/api.md, "Notes from the code", `api/metrics.py`."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.latency import LatencyTracker
from api.outbox_metrics import OutboxCollector
from api.pool_entry import PoolEntry
from api.publish_metrics import PublishCollector
from api.scorecard_metrics import ScorecardCollector
from api.service import RecommendationService
from forecaster.exceptions import ForesightError
from pipelines.config.pools import PoolConfig

logger = logging.getLogger(__name__)

LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)
"""Request duration buckets in seconds; fine below 10 ms, the service's target."""

UNMATCHED_ROUTE: Final = "unmatched"
"""The route label of requests no route matched (404s of arbitrary paths)."""


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ("pool",)) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"foresight_{name}", doc, labels=list(labels))


class ServiceCollector(Collector):
    """Reads the per-pool gauges from the running service at each scrape.

    Args:
        service: returns the app's service, None while it is not started.
    """

    def __init__(
        self,
        service: Callable[[], RecommendationService | None],
        tracker: Callable[[], LatencyTracker | None] = lambda: None,
    ) -> None:
        self._service = service
        self._tracker = tracker

    def collect(self) -> Iterator[Metric]:
        """Yield the gauges; nothing while the service is not started."""
        service = self._service()
        if service is None:
            return
        desired = _gauge("desired_nodes", "Nodes the pool should have.")
        current = _gauge("current_nodes", "Nodes ready in the pool now.")
        headroom = _gauge("headroom_pods", "Placeholder pods of the recommended headroom.")
        latency = _gauge("latency_extra_nodes", "Nodes call-chain latency asks for.")
        model_age = _gauge(
            "model_age_seconds", "Age of the demand forecast the recommendation used."
        )
        error = _gauge("live_forecast_error", "Recent live forecast error (MASE).")
        data_age = _gauge("data_age_seconds", "Age of the pool's newest live sample.")
        available = _gauge(
            "recommendation_available", "1 when the pool has a recommendation, else 0."
        )
        bounds = (
            _gauge("min_nodes", "The pool's configured lower bound."),
            _gauge("max_nodes", "The pool's configured upper bound."),
        )
        now = service.now()
        pools = service.select(None)
        try:
            entries, _ = service.recommendations(pools)
        except ForesightError as exc:
            # A scrape must still answer (with what is known) when the store is down.
            logger.warning("metrics: recommendations unavailable: %s", exc)
            entries = []
        by_pool: dict[str, PoolEntry] = {entry.recommendation.pool: entry for entry in entries}
        for pool in pools:
            entry = by_pool.get(pool.name)
            available.add_metric([pool.name], 0.0 if entry is None else 1.0)
            bounds[0].add_metric([pool.name], pool.min_nodes)
            bounds[1].add_metric([pool.name], pool.max_nodes)
            newest = service.live.readings(pool.name).newest
            if newest is not None:
                data_age.add_metric([pool.name], (now - newest).total_seconds())
            measured, _ = service.services.live_error(pool, now)
            if measured is not None:
                error.add_metric([pool.name], measured)
            if entry is None:
                continue
            rec = entry.recommendation
            desired.add_metric([pool.name], rec.desired_nodes)
            current.add_metric([pool.name], rec.current_nodes)
            headroom.add_metric([pool.name], rec.headroom_pods)
            latency.add_metric([pool.name], rec.explanation.latency_applied)
            forecast = rec.explanation.inputs.get("forecast_peak_gpus")
            if forecast is not None and forecast.age_seconds is not None:
                model_age.add_metric([pool.name], forecast.age_seconds)
        yield from (desired, current, headroom, latency, model_age, error, data_age, available)
        yield from _calibration_gauges(service, pools)
        yield from bounds
        yield from _model_gauges(service)
        yield from self._chain_gauges(service)

    def _chain_gauges(self, service: RecommendationService) -> Iterator[Metric]:
        spans = GaugeMetricFamily(
            "foresight_spans_in_window", "Spans held for call-chain analysis."
        )
        spans.add_metric([], len(service.services.spans))
        yield spans
        overflow = CounterMetricFamily(
            "foresight_span_services_overflow",
            "Spans counted as service 'other': the window already held "
            "callchain.max_services distinct service names.",
        )
        overflow.add_metric([], service.services.spans.overflow_spans)
        yield overflow
        tracker = self._tracker()
        if tracker is not None:
            yield from _service_gauges(tracker)


def _service_gauges(tracker: LatencyTracker) -> Iterator[GaugeMetricFamily]:
    """Per call-chain service gauges of the tracker's latest analysis."""
    labels = ("service", "pool")
    p95 = _gauge("service_p95_ms", "p95 call duration of the service (ms).", labels)
    own = _gauge("service_own_p95_ms", "p95 exclusive (self) time of the service (ms).", labels)
    slo = _gauge("service_slo_ms", "The p95 the service is judged against (ms).", labels)
    calls = _gauge("service_calls", "Calls of the service in the span window.", labels)
    blamed = _gauge(
        "service_bottleneck",
        "1 when the service is blamed for call-chain latency, by verdict.",
        (*labels, "verdict"),
    )
    analysis = tracker.analysis
    for name, report in (analysis.services if analysis is not None else {}).items():
        key = [name, report.pool or ""]
        calls.add_metric(key, report.call_count)
        if math.isfinite(report.p95_ms):
            p95.add_metric(key, report.p95_ms)
        if report.own_p95_ms is not None:
            own.add_metric(key, report.own_p95_ms)
        if report.threshold_ms is not None:
            slo.add_metric(key, report.threshold_ms)
        blamed.add_metric([*key, report.verdict], 1.0 if report.culprit else 0.0)
    yield from (p95, own, slo, calls, blamed)


def _model_gauges(service: RecommendationService) -> Iterator[GaugeMetricFamily]:
    """The served model, the registry's champion, whether they differ and answered."""
    services = service.services
    model = services.model
    if model is not None:
        info = _gauge("model_info", "The loaded champion (value 1).", ("version", "source"))
        info.add_metric([model.version, model.source], 1.0)
        yield info
    served = None if model is None else model.version
    if _number(served) is not None:
        gauge = _gauge("model_served_version", "The model version this replica serves.", ())
        gauge.add_metric([], _number(served) or 0.0)
        yield gauge
    view = services.registry
    if view is None:
        return
    reachable = _gauge(
        "model_registry_reachable", "1 when the last registry check answered, else 0.", ()
    )
    reachable.add_metric([], 1.0 if view.reachable else 0.0)
    differs = _gauge(
        "model_version_differs",
        "1 when the registry's champion (as last seen) is not the served version.",
        (),
    )
    differs.add_metric([], 1.0 if view.differs_from(served) else 0.0)
    yield from (reachable, differs)
    champion = _number(view.champion_version)
    if champion is not None:
        gauge = _gauge(
            "model_champion_version", "The version @champion named at the last check.", ()
        )
        gauge.add_metric([], champion)
        yield gauge


def _number(version: str | None) -> float | None:
    # Registered model versions are integers; anything else has no gauge value.
    try:
        return None if version is None else float(int(version))
    except ValueError:
        return None


class AppMetrics:
    """The registry of one app and the instruments in it.

    Args:
        service: returns the app's service, None while it is not started.
        tracker: returns the app's call-chain tracker, None while it is not started.
    """

    def __init__(
        self,
        service: Callable[[], RecommendationService | None],
        tracker: Callable[[], LatencyTracker | None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_seconds = Histogram(
            "foresight_http_request_duration_seconds",
            "HTTP request duration by route template, method and status.",
            ("method", "route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(ServiceCollector(service, tracker))
        self.registry.register(OutboxCollector(service))
        self.registry.register(ScorecardCollector(service))
        self.registry.register(PublishCollector(service))

    def exposition(self) -> tuple[bytes, str]:
        """Return the text exposition of every metric and its content type.

        The 0.0.4 text format's type, which every Prometheus 2.x parses (what
        ``prometheus_client`` itself serves to a scraper that states no preference).
        """
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4


class RequestTimer:
    """ASGI middleware observing each HTTP request's duration in a histogram.

    Args:
        histogram: labelled by method, route template and status.
    """

    def __init__(self, app: ASGIApp, histogram: Histogram) -> None:
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500

        async def send_status(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router stores the matched route in the scope it was given.
            route = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
            self.histogram.labels(scope["method"], route, str(code)).observe(
                time.perf_counter() - started
            )


def _calibration_gauges(
    service: RecommendationService, pools: Sequence[PoolConfig]
) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    """The live coverage of each pool's quantile and the offset calibration adds to it."""
    coverage = _gauge(
        "live_coverage", "How often the pool's raw quantile forecast covered demand lately."
    )
    offset = _gauge("calibration_offset_gpus", "GPUs live calibration adds to the pool's quantile.")
    for pool in pools:
        calibration = service.services.calibration(pool, pool.quantile)
        if calibration is not None:
            coverage.add_metric([pool.name], calibration.live_coverage)
            offset.add_metric([pool.name], calibration.offset)
    return coverage, offset
