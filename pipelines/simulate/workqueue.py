"""The FIFO queue of work and the wait of every unit of it (docs/simulate.md)."""

from __future__ import annotations

from collections import deque
from typing import Final

import numpy as np

from pipelines.simulate.types import FloatArray

EPSILON: Final = 1e-9
"""GPU amounts below this are float dust, not work."""


class WorkQueue:
    """Work waiting to run, oldest first, recording the wait of what it serves."""

    def __init__(self, horizon: int) -> None:
        """Make an empty queue for a run of ``horizon`` steps."""
        self._chunks: deque[list[float]] = deque()  # [arrival step, GPU-steps left]
        self._size = 0.0
        # waited[k]: GPU-steps served after waiting k steps; the last slot holds the
        # units still waiting at the end of the run.
        self.waited: FloatArray = np.zeros(horizon + 1)

    @property
    def size(self) -> float:
        """GPU-steps waiting now."""
        return self._size

    def arrive(self, step: int, amount: float) -> None:
        """Add ``amount`` GPU-steps of work arriving at ``step``."""
        if amount > EPSILON:
            self._chunks.append([float(step), amount])
            self._size += amount

    def serve(self, step: int, capacity: float) -> float:
        """Run up to ``capacity`` GPU-steps at ``step``, oldest first; return what ran."""
        served = 0.0
        while self._chunks and capacity - served > EPSILON:
            chunk = self._chunks[0]
            take = min(chunk[1], capacity - served)
            self.waited[step - int(chunk[0])] += take
            served += take
            chunk[1] -= take
            if chunk[1] <= EPSILON:
                self._chunks.popleft()
        self._size = max(0.0, self._size - served)
        if not self._chunks:
            self._size = 0.0  # drop accumulated float dust with the last chunk
        return served

    def drop(self, step: int) -> float:
        """Drop every unit still waiting after ``step`` (no-carry accounting).

        Each dropped unit counts as having waited the steps it spent in the queue plus
        this one (so work unmet at the step it arrived waited 1 step), and leaves.

        Returns:
            The GPU-steps dropped.
        """
        dropped = 0.0
        for arrival, amount in self._chunks:
            self.waited[min(step + 1 - int(arrival), len(self.waited) - 1)] += amount
            dropped += amount
        self._chunks.clear()
        self._size = 0.0
        return dropped

    def close(self, horizon: int) -> tuple[float, float]:
        """End the run: count each unit still waiting as waiting until the horizon.

        Returns:
            The unserved GPU-steps and their summed wait in GPU-steps (a lower bound:
            their wait did not end within the run).
        """
        unserved = 0.0
        censored_wait = 0.0
        for arrival, amount in self._chunks:
            waited = horizon - int(arrival)
            self.waited[waited] += amount
            unserved += amount
            censored_wait += amount * waited
        return unserved, censored_wait
