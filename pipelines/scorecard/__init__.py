"""The shadow scorecard: per pool, what Foresight's plan would have changed.

Against the nodes that actually existed and the demand that came, over the last day
and week: the waiting GPU-hours the plan would have avoided and the node-hours it
would have added. :func:`score` is the pure core (definitions in its module,
:mod:`pipelines.scorecard.compute`); :func:`pool_scorecard` reads the store for it.
It lives in ``pipelines`` so the API and the CLI both import it downward.
"""

from pipelines.scorecard.compute import align, score, score_window
from pipelines.scorecard.load import pool_scorecard
from pipelines.scorecard.types import (
    WINDOW_DURATIONS,
    PlanChange,
    PoolScorecard,
    Sides,
    TimelinePoint,
    Window,
    WindowScore,
)

__all__ = [
    "WINDOW_DURATIONS",
    "PlanChange",
    "PoolScorecard",
    "Sides",
    "TimelinePoint",
    "Window",
    "WindowScore",
    "align",
    "pool_scorecard",
    "score",
    "score_window",
]
