"""``GET /scorecard`` and ``/scorecard/{pool}``: the shadow scorecard (docs/api.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import PoolFilter, PoolName, ServiceDep
from api.scorecard import (
    DEFINITION,
    PoolScorecardOut,
    ScorecardOut,
    scorecards,
    windows_of,
)
from pipelines.scorecard.types import Window

router = APIRouter(tags=["scorecard"])

WindowParam = Annotated[
    Window | None,
    Query(description="only this window: day or week; default both"),
]
_ERRORS: dict[int | str, dict[str, str]] = {
    404: {"description": "an unknown pool (the answer names the known ones)"},
    422: {"description": "a window other than day or week"},
    503: {"description": "the store is down"},
}


@router.get(
    "/scorecard",
    response_model=ScorecardOut,
    responses=_ERRORS,
    summary="The shadow scorecard of every pool: waiting avoided, node-hours added",
)
def list_scorecards(
    service: ServiceDep, pools: PoolFilter = None, window: WindowParam = None
) -> ScorecardOut:
    """Return each pool's scorecard over the last day and week (without timelines)."""
    chosen = service.select(pools)
    cards = scorecards(service, chosen, windows_of(window))
    return ScorecardOut(
        generated_at=service.now(),
        definition=DEFINITION,
        pools=[PoolScorecardOut.of(card, with_timeline=False) for card in cards],
    )


@router.get(
    "/scorecard/{pool}",
    response_model=PoolScorecardOut,
    responses=_ERRORS,
    summary="One pool's shadow scorecard, with the timeline of its shortest window",
)
def get_scorecard(
    service: ServiceDep, pool: PoolName, window: WindowParam = None
) -> PoolScorecardOut:
    """Return the pool's scorecard and the samples behind the shortest window asked for:
    demand, the nodes that existed and the plan's nodes (for a plot)."""
    (card,) = scorecards(service, [service.pool(pool)], windows_of(window))
    return PoolScorecardOut.of(card, with_timeline=True)
