"""``GET /metrics``: the Prometheus text exposition of the app's own registry (docs/api.md)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool

from api.auth import AUTH_RESPONSES, authorize_metrics
from api.deps import MetricsDep

router = APIRouter(
    tags=["health"], dependencies=[Depends(authorize_metrics)], responses=AUTH_RESPONSES
)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    summary="Prometheus metrics",
)
async def metrics(registry: MetricsDep) -> Response:
    """Return desired/current nodes, model and data age, live error and request latency.

    Gauges are read from the service at scrape time (see :mod:`api.metrics`).
    """
    # A scrape may recompute an expired recommendation (store I/O): off the event loop.
    body, content_type = await run_in_threadpool(registry.exposition)
    return Response(body, media_type=content_type)
