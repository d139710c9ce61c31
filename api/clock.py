"""The service's clock: wall time, or "as of the last sample" for replaying old data.

Decisions take ``now`` as a parameter (the policy never reads a clock); the service
asks its :data:`Clock` once per decision. Two clocks ship:

- :func:`system_clock`: UTC wall time, for live metrics.
- :class:`ReplayClock`: the newest sample timestamp in the store. The committed sample
  data set ends in the past, so on the wall clock every reading would be days old and
  every pool would fall back to reactive for stale data. Replaying makes the data
  drive time: ``now`` is the last sample, and it moves only when newer samples
  arrive. Consequently a scale-down stabilisation window also elapses only as data
  arrives. ``make run``'s embedded default serves with it. It never runs ahead of
  its fallback (the wall clock) by more than a tolerance: a sample stamped in the
  future cannot drag "now" there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware."""

ClockMode = Literal["system", "replay"]
"""``system``: wall time. ``replay``: as of the newest sample (see :class:`ReplayClock`)."""


def system_clock() -> datetime:
    """Return the current UTC wall time."""
    return datetime.now(UTC)


class ReplayClock:
    """A clock that reads "now" as the newest sample it is told about.

    Args:
        newest: returns the newest sample timestamp known, None when there is none
            (it is called per decision, so it must be cheap: an in-memory lookup).
        fallback: the clock used while no sample is known.
        ahead: how far past the fallback's time "now" may be at most.
    """

    def __init__(
        self,
        newest: Callable[[], datetime | None],
        fallback: Clock = system_clock,
        ahead: timedelta = timedelta(minutes=5),
    ) -> None:
        self._newest = newest
        self._fallback = fallback
        self._ahead = ahead

    def __call__(self) -> datetime:
        """Return the newest sample time (at most ``ahead`` past the fallback's time)."""
        newest = self._newest()
        bound = self._fallback()
        return bound if newest is None else min(newest, bound + self._ahead)
