"""``GET /`` (the dashboard page), its assets and the dashboard's own data routes.

Details: docs/dashboard.md, "Notes from the code", `api/dashboard/router.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Final

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, Response

from api.dashboard.page import ASSETS, asset_text, render_page
from api.dashboard.pool_view import pool_view, samples
from api.dashboard.schemas import HistoryOut, PoolViewOut, StatusOut
from api.dashboard.status import deployment_status
from api.deps import MlflowUiDep, PoolName, ServiceDep
from api.service import RecommendationService

router = APIRouter(tags=["dashboard"])
"""The dashboard's data route (guarded by the read token when one is configured)."""

page_router = APIRouter(tags=["dashboard"])
"""The page shell and its assets (open: a browser cannot send a bearer token on navigation)."""

MAX_HISTORY_HOURS: Final = 24 * 14

_POOL_ERRORS: Final[dict[int | str, dict[str, str]]] = {
    404: {"description": "an unknown pool"},
    503: {"description": "store down"},
}
"""The errors of the routes of one pool."""

BOTTLENECK_PATHS: Final = ("/signals/chain", "/callchain/bottlenecks", "/bottlenecks")
"""Routes of the call chain the page draws when the app has one of them (the first wins)."""

HistoryHours = Annotated[
    float,
    Query(gt=0, le=MAX_HISTORY_HOURS, description="hours of history before now (max 14 days)"),
]


def _bottlenecks_url(request: Request) -> str | None:
    # The OpenAPI document lists every documented route (FastAPI builds it once per app);
    # walking app.routes would depend on how a FastAPI version nests included routers.
    paths = request.app.openapi().get("paths", {})
    for path in BOTTLENECK_PATHS:
        if path in paths:
            return path.lstrip("/")
    return None


@page_router.get(
    "/",
    response_class=HTMLResponse,
    summary="The dashboard: per pool demand, forecast, recommendation and why",
)
async def dashboard(request: Request, service: ServiceDep) -> HTMLResponse:
    """Return the dashboard page; its script reads the JSON routes it links to."""
    page = render_page(service.names, bottlenecks_url=_bottlenecks_url(request))
    # The page is a shell; the numbers come from the JSON routes, so never cache it stale.
    return HTMLResponse(page, headers={"Cache-Control": "no-cache"})


@page_router.get(
    "/dashboard/static/{name}",
    include_in_schema=False,
    responses={404: {"description": "not one of the dashboard's assets"}},
)
async def dashboard_asset(name: str) -> Response:
    """Return one of the dashboard's script and style files."""
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no dashboard asset {name!r}")
    text = await run_in_threadpool(asset_text, name)
    return Response(text, media_type=media_type, headers={"Cache-Control": "max-age=300"})


def pool_history(service: RecommendationService, pool: str, hours: float) -> HistoryOut:
    """Return the pool's demand and node samples over the ``hours`` before now.

    Raises:
        UnknownPoolError: no such pool (404).
        StoreError: the store failed (503).
    """
    config = service.pool(pool)
    until = service.now()
    since = until - timedelta(hours=hours)
    series = samples(service, config, since, until)
    return HistoryOut(
        pool=pool, since=since, until=until, gpus_per_node=config.gpus_per_node, series=series
    )


@router.get(
    "/dashboard/history/{pool}",
    response_model=HistoryOut,
    responses=_POOL_ERRORS,
    summary="Recent demand and node samples of one pool (for the dashboard's charts)",
)
def get_history(service: ServiceDep, pool: PoolName, hours: HistoryHours = 24.0) -> HistoryOut:
    """Return the pool's ``demand_gpus`` and ``nodes`` samples of the last ``hours``."""
    return pool_history(service, pool, hours)


@router.get(
    "/dashboard/pool/{pool}",
    response_model=PoolViewOut,
    responses=_POOL_ERRORS,
    summary="One pool as the dashboard draws it: nodes vs recommended, band, freshness, why",
)
def get_pool_view(service: ServiceDep, pool: PoolName, hours: HistoryHours = 6.0) -> PoolViewOut:
    """Return the pool's samples, recommendations in force, scale events and served band."""
    return pool_view(service, pool, hours)


@router.get(
    "/dashboard/status",
    response_model=StatusOut,
    responses={503: {"description": "store down"}},
    summary="The served model, its forecast run and the scheduler (for the dashboard)",
)
def get_status(service: ServiceDep, mlflow_ui: MlflowUiDep) -> StatusOut:
    """Return the served model (and its MLflow UI page), forecast-run ages and job states."""
    return deployment_status(service, mlflow_ui)
