"""What the call-chain statistics mean: a call, its self time, and the union of waits.

Details: docs/api.md, "Notes from the code", `api/callchain/stats.py`."""

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
