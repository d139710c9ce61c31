"""Background loops that hand the GIL to the event loop every half millisecond of work.

Details: docs/api.md, "Notes from the code", `api/pacing.py`."""

from __future__ import annotations

import time
from typing import Final

BUDGET_S: Final = 0.0005
"""Work between pauses: the longest a waiting event loop waits for a pacing thread."""

PAUSE_S: Final = 0.0001
"""How long a pause sleeps: long enough for a waiting thread to wake and take the GIL."""


class Pacer:
    """Pauses a loop briefly after every ``budget`` seconds of work.

    Args:
        budget: seconds of work between pauses, > 0.
        pause: seconds a pause sleeps, >= 0.
    """

    def __init__(self, budget: float = BUDGET_S, pause: float = PAUSE_S) -> None:
        if budget <= 0 or pause < 0:
            raise ValueError(f"budget must be > 0 and pause >= 0, got {budget} and {pause}")
        self.budget = budget
        self.pause = pause
        self.pauses = 0
        self._since = time.perf_counter()

    def tick(self) -> None:
        """Sleep ``pause`` if ``budget`` has passed since the last pause (or creation)."""
        if time.perf_counter() - self._since >= self.budget:
            time.sleep(self.pause)
            self.pauses += 1
            self._since = time.perf_counter()
