"""What the call-chain statistics mean: a call, its self time, and the union of waits.

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

from collections.abc import Iterable


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
