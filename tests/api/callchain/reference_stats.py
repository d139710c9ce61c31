"""The batch statistics of a set of spans, the reference the incremental window is checked against.

Every span of the set at once, with the definitions of :mod:`api.callchain.stats`;
:class:`~api.callchain.incremental.ChainWindow` must agree with it (within its
sketches' accuracy).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from api.callchain.stats import union_ns
from api.callchain.types import ServiceStats, Span

_Key = tuple[str, str]


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0-100) with linear interpolation, NaN when empty."""
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


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
