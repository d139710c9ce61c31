"""Time buckets of per-service streaming sketches, and their merge into statistics (docs/api.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from ddsketch import DDSketch

from api.callchain.types import ServiceStats
from api.pacing import Pacer

RELATIVE_ACCURACY: Final = 0.001
"""Quantiles are within 0.1 % of a value of the data (400 ms reads as 399.6-400.4)."""


@dataclass
class _Service:
    """What one bucket knows of one service."""

    spans: int = 0
    errors: int = 0
    durations: DDSketch = field(default_factory=lambda: DDSketch(RELATIVE_ACCURACY))
    self_times: DDSketch = field(default_factory=lambda: DDSketch(RELATIVE_ACCURACY))
    callers: set[str] = field(default_factory=set)
    callees: set[str] = field(default_factory=set)


@dataclass
class Bucket:
    """The sketches of every service whose spans arrived from ``start`` on."""

    start: datetime
    services: dict[str, _Service] = field(default_factory=dict)

    def service(self, name: str) -> _Service:
        """Return the service's part of the bucket, made empty on first use."""
        found = self.services.get(name)
        if found is None:
            found = self.services[name] = _Service()
        return found


def merge(buckets: list[Bucket]) -> dict[str, ServiceStats]:
    """Merge the buckets' sketches into one :class:`ServiceStats` per service."""
    merged: dict[str, _Service] = {}
    pacer = Pacer()
    for bucket in buckets:
        pacer.tick()
        for name, part in bucket.services.items():
            into = merged.setdefault(name, _Service())
            into.spans += part.spans
            into.errors += part.errors
            into.durations.merge(part.durations)
            into.self_times.merge(part.self_times)
            into.callers |= part.callers
            into.callees |= part.callees
    return {name: _stats(name, merged[name]) for name in sorted(merged)}


def _quantile(sketch: DDSketch, q: float) -> float:
    value = sketch.get_quantile_value(q) if sketch.count else None
    return float("nan") if value is None else float(value)


def _stats(name: str, acc: _Service) -> ServiceStats:
    return ServiceStats(
        service=name,
        span_count=acc.spans,
        call_count=int(acc.durations.count),
        p50_ms=_quantile(acc.durations, 0.5),
        p95_ms=_quantile(acc.durations, 0.95),
        self_p50_ms=_quantile(acc.self_times, 0.5),
        self_p95_ms=_quantile(acc.self_times, 0.95),
        callers=tuple(sorted(acc.callers)),
        callees=tuple(sorted(acc.callees)),
        error_count=acc.errors,
    )
