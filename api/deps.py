"""Dependencies of the routes, as ``Annotated`` aliases, and the app state they read.

Details: docs/api.md, "Notes from the code", `api/deps.py`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, status

from api.auth import TokenGuard
from api.callchain.feed import SpanFeed
from api.grpc_expander.server import RunningExpander
from api.latency import LatencyTracker
from api.metrics import AppMetrics
from api.service import RecommendationService
from api.wiring import Serving


def attach(
    app: FastAPI,
    serving: Serving,
    *,
    guard: TokenGuard,
    span_feed: SpanFeed,
    expander: RunningExpander | None,
) -> None:
    """Publish what the started app serves from (the routes find it from now on)."""
    state = app.state
    state.auth = guard
    state.max_body_bytes = serving.services.settings.service.max_body_bytes
    state.services = serving.services
    state.latency = serving.latency
    state.span_feed = span_feed
    state.service = serving.service
    state.grpc_expander = expander


def detach(app: FastAPI) -> None:
    """Withdraw the service and the span feed: requests get a 503 from now on."""
    app.state.service = None
    app.state.span_feed = None


def _from_state(request: Request, name: str) -> Any:
    """Return ``app.state.<name>``; a 503 while the app is starting or stopping."""
    value = getattr(request.app.state, name, None)
    if value is None:
        raise HTTPException(
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="the service is starting; retry shortly",
            headers={"Retry-After": "5"},
        )
    return value


async def get_service(request: Request) -> RecommendationService:
    """Return the app's recommendation service (async: no I/O, so no thread hop).

    Raises:
        HTTPException: 503 while the app is starting or stopping.
    """
    service: RecommendationService = _from_state(request, "service")
    return service


ServiceDep = Annotated[RecommendationService, Depends(get_service)]
"""The recommendation service of the running app."""


async def get_span_feed(request: Request) -> SpanFeed:
    """Return the app's span ingestion (async: no I/O, so no thread hop).

    Raises:
        HTTPException: 503 while the app is starting or stopping.
    """
    feed: SpanFeed = _from_state(request, "span_feed")
    return feed


SpanFeedDep = Annotated[SpanFeed, Depends(get_span_feed)]
"""The span ingestion of the running app (adds spans off the event loop)."""


async def get_latency(request: Request) -> LatencyTracker | None:
    """Return the app's call-chain analysis; None before the app has started."""
    tracker: LatencyTracker | None = getattr(request.app.state, "latency", None)
    return tracker


LatencyDep = Annotated[LatencyTracker | None, Depends(get_latency)]
"""The call-chain analysis of the running app (None before start-up)."""


async def get_metrics(request: Request) -> AppMetrics:
    """Return the app's own metrics registry (installed with the routes)."""
    registry: AppMetrics = request.app.state.metrics
    return registry


MetricsDep = Annotated[AppMetrics, Depends(get_metrics)]
"""The app's own Prometheus registry."""


async def get_mlflow_ui(request: Request) -> str | None:
    """Return the MLflow UI's address the dashboard links to (None: no link)."""
    address: str | None = getattr(request.app.state, "mlflow_ui", None)
    return address


MlflowUiDep = Annotated[str | None, Depends(get_mlflow_ui)]
"""The MLflow UI's address given to :func:`~api.main.create_app`, if any."""

PoolFilter = Annotated[
    list[str] | None,
    Query(
        alias="pool",
        description="only these pools (repeat the parameter: ?pool=a&pool=b); default all",
    ),
]
"""The optional ``?pool=`` filter of list endpoints."""

PoolName = Annotated[str, Path(description="the pool name", max_length=100)]
"""The ``{pool}`` path parameter."""
