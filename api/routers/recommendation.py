"""``GET /recommendation`` (all pools, filterable) and ``GET /recommendation/{pool}``.

Details: docs/api.md, "Notes from the code", `api/routers/recommendation.py`."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api.deps import PoolFilter, PoolName, ServiceDep
from api.routers.encoded import pool_json, set_json
from api.schemas import PoolRecommendation, RecommendationSet, UnavailablePool
from forecaster.unavailable import Unavailable

router = APIRouter(tags=["recommendations"])

_ERRORS: dict[int | str, dict[str, str]] = {
    404: {"description": "an unknown pool; the message lists the known ones"},
    503: {"description": "the store is unreachable, or the pool has no live data yet"},
}


@router.get(
    "/recommendation",
    response_model=RecommendationSet,
    responses=_ERRORS,
    summary="Recommendations of every pool (or of the ?pool= ones)",
)
async def list_recommendations(service: ServiceDep, pool: PoolFilter = None) -> Response:
    """Return the current recommendation of each requested pool, in the pools file's order.

    Pools without live data yet are listed under ``unavailable`` with the reason. A
    KEDA ``metrics-api`` scaler reads one number with e.g. ``valueLocation:
    pools.0.desired_nodes`` and ``?pool=<name>`` in the URL.
    """
    pools = service.select(pool)
    fresh = service.peek(pools)
    missing: dict[str, Unavailable] = {}
    if fresh is not None:
        entries = fresh
    else:
        entries, missing = await run_in_threadpool(service.recommendations, pools)
    # Read after the pools are decided: the set is as of a time at or after every
    # pool's own generated_at (the dashboard draws "now" there).
    body = set_json(
        service.now(),
        [entry.body for entry in entries],
        [UnavailablePool(pool=name, reason=why.detail) for name, why in missing.items()],
    )
    return Response(content=body, media_type="application/json")


@router.get(
    "/recommendation/{pool}",
    response_model=PoolRecommendation,
    responses=_ERRORS,
    summary="The recommendation of one pool",
)
async def get_recommendation(service: ServiceDep, pool: PoolName) -> Response:
    """Return one pool's current recommendation."""
    fresh = service.peek([service.pool(pool)])
    entry = fresh[0] if fresh else await run_in_threadpool(service.recommendation, pool)
    return Response(content=pool_json(entry.body), media_type="application/json")
