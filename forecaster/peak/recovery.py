"""Demand coming back after an idle spell: expect the level it had before (docs/forecasting.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from forecaster.peak.types import FloatArray

IDLE: Final = pd.Timedelta(minutes=30)
"""The shortest spell at zero that counts as idle (shorter ones are gaps between jobs)."""
HOLD: Final = pd.Timedelta(hours=1)
"""How long after the return the level is held (the window the returns were measured on)."""
BEFORE: Final = pd.Timedelta(hours=1)
"""The window before the idle spell whose maximum is the level expected back."""
MIN_LEVEL: Final = 0.5
"""The lowest quantile level the served bound is raised at."""
EVIDENCE: Final = pd.Timedelta(weeks=1)
"""How far back :func:`comes_back` looks for the series' own returns from idle (the
time-of-day reference's window, so every caller of the served bound has it)."""
MIN_RETURNS: Final = 5
"""Returns in :data:`EVIDENCE` below which the series' own record is not judged (the
rule holds, on the Helios evidence)."""


@dataclass(frozen=True)
class ReturnRule:
    """The return-from-idle rule on one series' grid, in steps.

    Attributes:
        idle: the fewest steps at zero that make an idle spell, >= 1.
        hold: the most steps after the return that the level is held, >= 1.
        before: the steps before the idle spell whose maximum is the level, >= 1.
        evidence: the steps before an origin whose returns :func:`comes_back` judges
            the series by, >= 1.
    """

    idle: int
    hold: int
    before: int
    evidence: int = 1

    def __post_init__(self) -> None:
        if min(self.idle, self.hold, self.before, self.evidence) < 1:
            raise ValueError(
                f"idle, hold, before and evidence must be >= 1 step, got {self.idle}, "
                f"{self.hold}, {self.before}, {self.evidence}"
            )

    @classmethod
    def on_step(
        cls,
        step: pd.Timedelta,
        *,
        idle: pd.Timedelta = IDLE,
        hold: pd.Timedelta = HOLD,
        before: pd.Timedelta = BEFORE,
        evidence: pd.Timedelta = EVIDENCE,
    ) -> ReturnRule:
        """The rule's durations in steps of ``step`` (at least one step each)."""
        if step <= pd.Timedelta(0):
            raise ValueError(f"step must be positive, got {step}")

        def steps(duration: pd.Timedelta) -> int:
            return max(1, math.ceil(duration / step))

        return cls(
            idle=steps(idle), hold=steps(hold), before=steps(before), evidence=steps(evidence)
        )


def return_level(y: FloatArray, p: int, rule: ReturnRule) -> float:
    """The level demand is expected back at, at origin ``p``; NaN where the rule is silent.

    Reads ``y[: p + 1]`` only. Silent unless: ``y[p] > 0``; demand has been above zero
    for at most ``rule.hold`` steps (``y[p]`` included); before that it was exactly 0
    for at least ``rule.idle`` steps; and the maximum of the ``rule.before`` steps
    before those zeros is known and above ``y[p]``. A missing value (NaN) breaks a run:
    a gap in the data is not idleness.
    """
    if not 0 <= p < len(y) or not y[p] > 0.0:
        return math.nan
    start = p
    while start > 0 and y[start - 1] > 0.0:
        start -= 1
        if p - start + 1 > rule.hold:
            return math.nan
    zeros = start
    while zeros > 0 and y[zeros - 1] == 0.0:
        zeros -= 1
    if start - zeros < rule.idle or zeros == 0:
        return math.nan
    window = y[max(0, zeros - rule.before) : zeros]
    if not np.all(np.isfinite(window)):
        return math.nan
    level = float(np.max(window))
    return level if level > float(y[p]) else math.nan


def return_levels(y: FloatArray, rule: ReturnRule) -> FloatArray:
    """:func:`return_level` at every position of ``y`` (NaN where the rule is silent)."""
    return np.array([return_level(y, p, rule) for p in range(len(y))], dtype=np.float64)


def comes_back(y: FloatArray, p: int, rule: ReturnRule) -> bool:
    """Whether the series' own returns from idle before ``p`` support holding the level.

    Reads ``y[p - rule.evidence : p + 1]`` only (so a caller holding at least that much
    history gets the same answer): the returns in it (the first origin of each run of
    :func:`return_level`) whose hold has passed by ``p``. False when there are at least
    :data:`MIN_RETURNS` of them and fewer than half reached their level within the hold;
    True otherwise (too few returns to judge: the rule's premise stands).
    """
    recent = np.asarray(y[max(0, p - rule.evidence) : p + 1], dtype=np.float64)
    levels = return_levels(recent, rule)
    known = np.isfinite(levels)
    starts = np.flatnonzero(known & ~np.concatenate([[False], known[:-1]]))
    done = starts[starts + rule.hold <= len(recent)]
    if len(done) < MIN_RETURNS:
        return True
    reached = sum(bool(np.nanmax(recent[r : r + rule.hold]) >= levels[r]) for r in done)
    return 2 * reached >= len(done)


def held_level(y: FloatArray, p: int, rule: ReturnRule) -> float:
    """:func:`return_level` where the series :func:`comes_back`, else NaN."""
    level = return_level(y, p, rule)
    return level if math.isfinite(level) and comes_back(y, p, rule) else math.nan
