"""``GET /recommendation`` (all pools, filterable) and ``GET /recommendation/{pool}``.

Bodies are assembled from each pool's JSON encoded once when it was decided, so a
request costs a join of bytes rather than a serialisation of every pool; the joined
``pools`` array is itself kept per selection until any pool changes or expires
(:mod:`api.body_cache`), so answering from memory does not grow with the pools. Only
the set's ``generated_at`` is made per request.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from api.deps import PoolFilter, PoolName, ServiceDep
from api.schemas import PoolRecommendation, RecommendationSet, UnavailablePool
from pipelines.policy.types import iso_utc

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
    selection = tuple(pool or ())
    # Read before the entries are: a change in between then fails the next lookup.
    version = service.version
    now = service.now()
    array = service.pool_arrays.get(selection, version, now)
    unavailable: list[dict[str, str]] = []
    if array is None:
        pools = service.select(pool)
        fresh = service.peek(pools)
        if fresh is not None:
            expires = min((e.recommendation.valid_until for e in fresh), default=now)
            array = service.pool_arrays.put(selection, version, [e.json for e in fresh], expires)
        else:
            entries, missing = await run_in_threadpool(service.recommendations, pools)
            array = b"[" + b",".join(entry.json for entry in entries) + b"]"
            unavailable = [
                UnavailablePool(pool=name, reason=why).model_dump() for name, why in missing.items()
            ]
    body = b"".join(
        (
            b'{"generated_at":',
            json.dumps(iso_utc(now)).encode(),
            b',"pools":',
            array,
            b',"unavailable":',
            json.dumps(unavailable).encode() if unavailable else b"[]",
            b"}",
        )
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
    return Response(content=entry.json, media_type="application/json")
