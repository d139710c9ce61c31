"""``GET /signals/chain``: the call chain as the latest analysis sees it (docs/api.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import LatencyDep, ServiceDep

router = APIRouter(tags=["signals"])

_SERVICE_FIELDS = (
    "service, pool, span_count, call_count, p50_ms, p95_ms, self_p50_ms, self_p95_ms, "
    "own_p95_ms (= self_p95_ms: exclusive time, duration minus time in callees), "
    "residual_p95_ms, own_baseline_p95_ms (its usual exclusive p95, null until learnt), "
    "recent_own_p95_ms (over the last 30 s), own_limit_ms (the most healthy own p95: min "
    "of threshold and k x usual), own_slow, "
    "callers, callees, error_count, threshold_ms, threshold_source, "
    "status, culprit, verdict, scaled_with, slows_pools, extra_nodes, note"
)


@router.get(
    "/signals/chain",
    summary="The call chain: per-service latency, callers and callees, blame and verdict",
    responses={
        200: {
            "description": "analysed_at, window_seconds, services (each: "
            + _SERVICE_FIELDS
            + "), edges [{caller, callee}], bottlenecks (blamed services), pools "
            "{extra_nodes, reason, not_gpu_bound, outside_gpu_pools}"
        }
    },
)
async def get_chain(service: ServiceDep, tracker: LatencyDep) -> JSONResponse:
    """Return every service seen in the span window or configured with an SLO.

    ``verdict`` is one of ``bottleneck`` (blamed, on a GPU-bound pool),
    ``not_gpu_bound`` (blamed, its pool's GPUs idle), ``outside_gpu_pools`` (blamed, on
    no GPU pool: buying GPUs will not help), ``waiting_on_callee`` (slow only because
    its callees are), ``scaled_with_upstream``, ``ok``, ``near``, ``insufficient_data``
    or ``unjudged``. A service is blamed when its own (exclusive) p95 is past its own
    limit, whatever its call duration does.
    """
    body: dict[str, Any] = (
        tracker.chain()
        if tracker is not None
        else {"analysed_at": None, "services": [], "edges": [], "bottlenecks": [], "pools": {}}
    )
    body["spans_in_window"] = len(service.services.spans)
    return JSONResponse(body)
