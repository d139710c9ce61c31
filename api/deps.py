"""Dependencies of the routes, as ``Annotated`` aliases.

The service lives on ``app.state`` from the lifespan on; a request that arrives
before it (or after shutdown) gets a 503, never an attribute error.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request, status

from api.callchain.feed import SpanFeed
from api.service import RecommendationService


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
