"""``GET /metrics``: the Prometheus text exposition of the app's own registry.

Open like ``/healthz``: scrapers rarely carry tokens and the gauges are aggregates.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from api.metrics import AppMetrics

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    summary="Prometheus metrics",
)
async def metrics(request: Request) -> Response:
    """Return desired/current nodes, model and data age, live error and request latency.

    Gauges are read from the service at scrape time (see :mod:`api.metrics`).
    """
    registry: AppMetrics = request.app.state.metrics
    # A scrape may recompute an expired recommendation (store I/O): off the event loop.
    body, content_type = await run_in_threadpool(registry.exposition)
    return Response(body, media_type=content_type)
