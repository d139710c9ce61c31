"""Background loops that hand the GIL to the event loop every half millisecond of work.

A thread running Python code keeps the GIL until another thread has waited for it for
the switch interval (``sys.getswitchinterval()``, 5 ms by default). So a request that
reaches the event loop while a worker thread decodes a span batch, settles spans or
stores a push waits up to 5 ms before its handler even starts, and longer when two
such threads pass the GIL between them first: that wait, not the handlers' own cost,
makes the read tail under span ingest and pushes.

:class:`Pacer` bounds it: a loop calls :meth:`Pacer.tick` between items, and once
``budget`` of work has passed since the last pause the pacer sleeps for ``pause``.
A blocking sleep releases the GIL, and a thread waiting for it (the event loop) wakes
and takes it at once; ``time.sleep(0)`` does not do that reliably, as the sleeper
usually takes the GIL back before the waiter has woken up. The price is ``pause`` per
``budget`` of work (a fifth more wall time for a long loop), paid only by background
work. Never tick on the event loop's own thread: the pause would block it.
"""

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
