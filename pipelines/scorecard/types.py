"""The scorecard's values: windows, the plan's changes, and the scores per window."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, NamedTuple


class Window(StrEnum):
    """A span of time the scorecard reports over, ending now."""

    DAY = "day"
    WEEK = "week"

    @property
    def duration(self) -> timedelta:
        """How long the window is."""
        return WINDOW_DURATIONS[self]


WINDOW_DURATIONS: Final = {Window.DAY: timedelta(days=1), Window.WEEK: timedelta(days=7)}
"""The length of each window."""


class PlanChange(NamedTuple):
    """A recommendation as the scorecard needs it: from ``at`` on, ``nodes`` were asked for."""

    at: datetime
    nodes: int


class Sides(NamedTuple):
    """One measure of what happened (``actual``) and of what the plan would have had."""

    actual: float
    plan: float

    @property
    def difference(self) -> float:
        """``plan - actual``: what the plan adds (negative: what it saves)."""
        return self.plan - self.actual


@dataclass(frozen=True)
class WindowScore:
    """The scorecard of one pool over one window.

    Both sides are integrated over the same covered time only: the samples where the
    demand, the nodes that existed and a recommendation in force one lead time earlier
    are all known.

    Attributes:
        start: its first instant (inclusive).
        end: its end (exclusive): the time the scorecard was made.
        waiting_gpu_hours: GPU-hours of demand above the GPUs of the pool's nodes.
        node_hours: nodes held times hours.
        samples: demand samples in the window that are covered.
        coverage: covered hours / the window's hours, in [0, 1].
    """

    window: Window
    start: datetime
    end: datetime
    waiting_gpu_hours: Sides
    node_hours: Sides
    samples: int
    coverage: float

    @property
    def waiting_gpu_hours_avoided(self) -> float:
        """Waiting GPU-hours the plan would have avoided (>= 0 by its definition)."""
        # actual - plan, not -difference: a tie is 0.0, never -0.0.
        return self.waiting_gpu_hours.actual - self.waiting_gpu_hours.plan

    @property
    def node_hours_added(self) -> float:
        """Node-hours the plan would have added (>= 0 by its definition)."""
        return self.node_hours.difference


class TimelinePoint(NamedTuple):
    """One demand sample with the nodes that existed and those planned (None: unknown)."""

    ds: datetime
    demand_gpus: float
    nodes: float | None
    planned_nodes: float | None


@dataclass(frozen=True)
class PoolScorecard:
    """A pool's scorecard over every window asked for, and the timeline of the shortest.

    Attributes:
        generated_at: the end of every window ("now").
        lead_time: the pool's lead time (a recommendation's nodes count from one lead
            time after it was made).
        cost_per_node_hour: the pool's node-hour price, to price the added node-hours.
        step: the sampling step each demand sample holds for (at most).
        recommendations: recommendations read (those in force at some covered time).
        timeline: the samples of the shortest window, for a plot.
    """

    pool: str
    generated_at: datetime
    gpus_per_node: int
    lead_time: timedelta
    cost_per_node_hour: float
    step: timedelta
    recommendations: int
    windows: dict[Window, WindowScore]
    timeline: tuple[TimelinePoint, ...]
