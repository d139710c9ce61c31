"""Per-service latency statistics of a set of spans: percentiles, self time, call edges.

Latency is measured per *call*: a local-root span of a service, i.e. one whose parent
is missing or belongs to another service. Spans a service nests inside its own call
(an internal step, the client span around an outgoing request) are part of that call,
not calls of their own, so the percentiles are the latency callers see.

Self time of a call is its duration minus the time it spent waiting on other services:
the *union* of the intervals of the downstream calls it made (reached through its own
nested spans), each clipped to the call. The union, not the sum, so two parallel
100 ms calls inside a 110 ms call leave 10 ms of self time rather than a negative
number; the clip, so a fire-and-forget call that outlives its caller counts only while
the caller runs. The result is floored at 0. Work in a callee that is not instrumented
counts as the caller's own time: there is no one else to blame it on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from api.callchain.types import ServiceStats, Span

_Key = tuple[str, str]


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0-100) with linear interpolation, NaN when empty."""
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Return the total length covered by half-open intervals ``[start, end)``."""
    total = 0
    covered_to: int | None = None
    for start, end in sorted(intervals):
        if covered_to is None or start > covered_to:
            total += end - start
            covered_to = end
        elif end > covered_to:
            total += end - covered_to
            covered_to = end
    return total


def self_time_ns(call: Span, children: dict[_Key, list[Span]]) -> int:
    """Return the self time of one call (see the module documentation).

    Args:
        call: a local-root span of its service.
        children: spans by ``(trace_id, parent_span_id)``.
    """
    waits: list[tuple[int, int]] = []
    # Iterative walk: a deep trace must not hit the recursion limit.
    stack = [call]
    while stack:
        span = stack.pop()
        for child in children.get((span.trace_id, span.span_id), ()):
            if child.service == call.service:
                stack.append(child)
                continue
            start, end = max(child.start_ns, call.start_ns), min(child.end_ns, call.end_ns)
            if end > start:
                waits.append((start, end))
    return max(0, call.duration_ns - union_ns(waits))


def service_stats(spans: Iterable[Span]) -> dict[str, ServiceStats]:
    """Return the statistics of every service that has spans, keyed by service name.

    Spans are identified by ``(trace_id, span_id)``; a later duplicate replaces an
    earlier one. A span whose parent is not among ``spans`` counts as a call with an
    unknown caller.
    """
    by_id: dict[_Key, Span] = {(s.trace_id, s.span_id): s for s in spans}
    children: dict[_Key, list[Span]] = defaultdict(list)
    for span in by_id.values():
        if span.parent_span_id is not None:
            children[(span.trace_id, span.parent_span_id)].append(span)

    span_count: dict[str, int] = defaultdict(int)
    error_count: dict[str, int] = defaultdict(int)
    durations: dict[str, list[float]] = defaultdict(list)
    self_times: dict[str, list[float]] = defaultdict(list)
    callers: dict[str, set[str]] = defaultdict(set)
    callees: dict[str, set[str]] = defaultdict(set)
    for span in by_id.values():
        span_count[span.service] += 1
        if span.status == "error":
            error_count[span.service] += 1
        parent = (
            by_id.get((span.trace_id, span.parent_span_id))
            if span.parent_span_id is not None
            else None
        )
        if parent is not None and parent.service == span.service:
            continue
        if parent is not None:
            callers[span.service].add(parent.service)
            callees[parent.service].add(span.service)
        durations[span.service].append(span.duration_ns / 1e6)
        self_times[span.service].append(self_time_ns(span, children) / 1e6)

    return {
        service: ServiceStats(
            service=service,
            span_count=span_count[service],
            call_count=len(durations[service]),
            p50_ms=percentile(durations[service], 50),
            p95_ms=percentile(durations[service], 95),
            self_p50_ms=percentile(self_times[service], 50),
            self_p95_ms=percentile(self_times[service], 95),
            callers=tuple(sorted(callers[service])),
            callees=tuple(sorted(callees[service])),
            error_count=error_count[service],
        )
        for service in sorted(span_count)
    }
