"""The shadow scorecard as the API serves it: response bodies and how they are built.

Details: docs/scorecard.md, "Notes from the code", `api/scorecard.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from api.schemas import Utc
from api.service import RecommendationService
from pipelines.config.pools import PoolConfig
from pipelines.scorecard.load import pool_scorecard
from pipelines.scorecard.types import PoolScorecard, Sides, Window, WindowScore

DEFINITION: Final = (
    "plan nodes at t = max(nodes that existed at t, the recommendation in force at "
    "t - lead_time); waiting GPU-hours = sum of max(0, demand - nodes x gpus_per_node) x "
    "hours; node-hours = sum of nodes x hours; both sides over the covered samples only "
    "(demand, nodes and a recommendation in force all known). See docs/scorecard.md."
)
"""One paragraph of how to read the numbers, served with them."""


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SidesOut(_Out):
    """One measure, as it happened and as the plan would have had it."""

    actual: float = Field(description="what happened")
    plan: float = Field(description="what the plan would have had")
    difference: float = Field(description="plan - actual")

    @classmethod
    def of(cls, sides: Sides) -> SidesOut:
        """The wire form of a pair of sides."""
        return cls(actual=sides.actual, plan=sides.plan, difference=sides.difference)


class WindowOut(_Out):
    """A pool's scorecard over one window ending now."""

    window: Window
    start: Utc
    end: Utc = Field(description="the service's now")
    waiting_gpu_hours: SidesOut
    node_hours: SidesOut
    waiting_gpu_hours_avoided: float = Field(description="actual - plan waiting GPU-hours")
    node_hours_added: float = Field(description="plan - actual node-hours")
    added_cost: float = Field(description="node_hours_added x the pool's cost_per_node_hour")
    samples: int = Field(description="covered demand samples in the window")
    coverage: float = Field(description="covered hours / the window's hours, 0 to 1")

    @classmethod
    def of(cls, score: WindowScore, cost_per_node_hour: float) -> WindowOut:
        """The wire form of one window's score."""
        return cls(
            window=score.window,
            start=score.start,
            end=score.end,
            waiting_gpu_hours=SidesOut.of(score.waiting_gpu_hours),
            node_hours=SidesOut.of(score.node_hours),
            waiting_gpu_hours_avoided=score.waiting_gpu_hours_avoided,
            node_hours_added=score.node_hours_added,
            added_cost=score.node_hours_added * cost_per_node_hour,
            samples=score.samples,
            coverage=score.coverage,
        )


class TimelinePointOut(_Out):
    """One demand sample with the nodes that existed and the plan's (null: unknown)."""

    ds: Utc
    demand_gpus: float
    nodes: float | None
    plan_nodes: float | None


class PoolScorecardOut(_Out):
    """One pool's scorecard."""

    pool: str
    generated_at: Utc = Field(description="the end of every window (the service's now)")
    gpus_per_node: int
    lead_time_seconds: float
    step_seconds: float = Field(description="the longest one sample counts for")
    recommendations: int = Field(description="recommendations in force at some time scored")
    windows: dict[Window, WindowOut]
    timeline: list[TimelinePointOut] | None = Field(
        default=None,
        description="the shortest window's samples (at most 500, evenly spaced), for a plot",
    )

    @classmethod
    def of(cls, card: PoolScorecard, *, with_timeline: bool) -> PoolScorecardOut:
        """The wire form of a pool's scorecard, with its timeline or without."""
        return cls(
            pool=card.pool,
            generated_at=card.generated_at,
            gpus_per_node=card.gpus_per_node,
            lead_time_seconds=card.lead_time.total_seconds(),
            step_seconds=card.step.total_seconds(),
            recommendations=card.recommendations,
            windows={
                window: WindowOut.of(score, card.cost_per_node_hour)
                for window, score in card.windows.items()
            },
            timeline=[
                TimelinePointOut(
                    ds=p.ds, demand_gpus=p.demand_gpus, nodes=p.nodes, plan_nodes=p.planned_nodes
                )
                for p in card.timeline
            ]
            if with_timeline
            else None,
        )


class ScorecardOut(_Out):
    """Every asked-for pool's scorecard, in the pools file's order."""

    generated_at: Utc
    definition: str = Field(description="how the numbers are defined")
    pools: list[PoolScorecardOut]


def windows_of(window: Window | None) -> tuple[Window, ...]:
    """The windows to score: the one asked for, or every one."""
    return tuple(Window) if window is None else (window,)


def scorecards(
    service: RecommendationService, pools: Sequence[PoolConfig], windows: Sequence[Window]
) -> list[PoolScorecard]:
    """Score ``pools`` over ``windows`` ending at the service's clock.

    Raises:
        StoreError: the store failed (503).
    """
    now = service.now()
    store = service.services.store
    return [pool_scorecard(store, pool, now=now, windows=windows) for pool in pools]
