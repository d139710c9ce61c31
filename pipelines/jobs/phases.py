"""Wall seconds per phase of one job run, so an operator sees where a cycle's time goes.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/phases.py`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Phases:
    """Seconds spent in each named phase, summed over its entries, in first-entered order.

    Args:
        clock: a monotonic clock in seconds (default :func:`time.perf_counter`).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (added to earlier entries of the same name)."""
        start = self._clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + (self._clock() - start)

    def rounded(self, digits: int = 3) -> dict[str, float]:
        """The seconds per phase, rounded for a report."""
        return {name: round(value, digits) for name, value in self.seconds.items()}
