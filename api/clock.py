"""The process's one clock: wall time, or "as of the newest sample" for replaying old data.

In replay, now moves only when newer samples arrive: without data time stands still,
deliberately, as in the offline replay.
Details: docs/api.md, "Notes from the code", `api/clock.py`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware."""

ClockMode = Literal["system", "replay"]
"""``system``: wall time. ``replay``: as of the newest sample (see :class:`ReplayClock`)."""

REPLAY_AHEAD_STEPS: Final = 3
"""How many steps of the data a pushed sample may lie past the replay's ``now``.

The same three steps after which live readings are stale: one push can move ``now``
no further than the newest readings of the other pools stay fresh."""

WALL_AHEAD: Final = timedelta(minutes=5)
"""The default of how far past the wall clock the replay's ``now`` may ever be."""


def system_clock() -> datetime:
    """Return the current UTC wall time."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class ReplayWindow:
    """The times a pushed sample may carry under the replay clock: at most ``latest``.

    Attributes:
        now: the replay's ``now`` (the newest sample) when the push arrived.
        step: the data's step (the largest of the pools' series steps).
        steps: how many steps past ``now`` are accepted.
    """

    now: datetime
    step: timedelta
    steps: int = REPLAY_AHEAD_STEPS

    @property
    def latest(self) -> datetime:
        """The latest time accepted: ``now + steps x step``."""
        return self.now + self.steps * self.step

    def describe(self) -> str:
        """Say what the window is and why, for a refusal's message."""
        minutes = self.steps * self.step.total_seconds() / 60
        return (
            f"the replay's window ends at {self.latest.isoformat()} (--clock replay: 'now' "
            f"is the newest sample, {self.now.isoformat()}, and a sample may lie at most "
            f"{self.steps} steps of the data, {minutes:g} min, past it)"
        )


class ReplayClock:
    """A clock that reads "now" as the newest sample it is told about.

    Args:
        newest: returns the newest sample timestamp known, None when there is none
            (it is called per decision, so it must be cheap: an in-memory lookup).
        fallback: the clock used while no sample is known (the wall clock).
        ahead: how far past the fallback's time "now" may be at most: samples
            written by others than the push route (which checks the replay's
            window) cannot drag "now" far into the future either.
    """

    def __init__(
        self,
        newest: Callable[[], datetime | None],
        fallback: Clock = system_clock,
        ahead: timedelta = WALL_AHEAD,
    ) -> None:
        self._newest = newest
        self._fallback = fallback
        self._ahead = ahead

    def __call__(self) -> datetime:
        """Return the newest sample time (at most ``ahead`` past the fallback's time)."""
        newest = self._newest()
        bound = self._fallback()
        return bound if newest is None else min(newest, bound + self._ahead)

    def window(self, step: timedelta) -> ReplayWindow | None:
        """Return the replay's window for data of ``step``; None before any sample.

        Before the first sample there is no replay to protect: the first push sets
        ``now`` (within the wall clock's tolerance, which every push must meet).
        """
        if self._newest() is None:
            return None
        return ReplayWindow(self(), step)


def decision_clock(
    mode: ClockMode, newest: Callable[[], datetime | None], ahead: timedelta = WALL_AHEAD
) -> Clock:
    """Return the clock a process decides by in ``mode``.

    Args:
        mode: ``system`` (the wall clock) or ``replay`` (a :class:`ReplayClock`).
        newest: the newest sample of the pools' live signals (replay only).
        ahead: how far past the wall clock the replay's ``now`` may be at most
            (``service.max_sample_future_seconds``).
    """
    if mode == "replay":
        return ReplayClock(newest, fallback=system_clock, ahead=ahead)
    return system_clock


def from_another_clock(at: datetime | None, now: datetime, skew: timedelta) -> bool:
    """Whether ``at`` lies more than ``skew`` past ``now``: it was dated by another clock.

    A stored time that far ahead of the decision cannot have been made by this
    clock (e.g. a forecast or a stabilisation state written by a process on the wall
    clock while this one replays last month); within ``skew`` it is the ordinary
    disagreement of two replicas' clocks, or of a poll that has not yet seen the
    newest sample.
    """
    return at is not None and at > now + skew


def warn_another_clock(
    seen: set[tuple[str, str, datetime]], pool: str, what: str, at: datetime, now: datetime
) -> None:
    """Log, once per stored value (``seen`` remembers), that an input dated after now is unused.

    Args:
        seen: the ``(pool, what, at)`` already logged; updated.
    """
    key = (pool, what, at)
    if key in seen:
        return
    seen.add(key)
    logger.warning(
        "pool %s: the stored %s is dated %s, after now (%s): another clock dated it, so "
        "it is not used (see docs/api.md, 'One clock')",
        pool,
        what,
        at.isoformat(),
        now.isoformat(),
    )
