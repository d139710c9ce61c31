"""``GET /healthz`` (the process answers) and ``GET /readyz`` (fit to serve)."""

from __future__ import annotations

from fastapi import APIRouter, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from api.auth import ReaderDep
from api.deps import ServiceDep
from api.readiness import check_readiness
from api.schemas import HealthOut, ReadyOut

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut, summary="Liveness")
async def healthz() -> HealthOut:
    """Answer while the process is up; checks nothing else."""
    return HealthOut()


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: {"model": ReadyOut, "description": "not ready; reasons say why"}},
    summary="Readiness",
)
async def readyz(service: ServiceDep, reader: ReaderDep) -> JSONResponse:
    """Check the model (and whether it came from the registry or the last-known-good
    copy), the store, and the freshness of every pool's live data.

    Without a read token (when tokens are configured) the reasons are cause codes
    (``model_missing``, ``store_unreachable``, ``store_not_writable``, ``data_stale``)
    and each check says only ``ok``; a read token gets the details.
    """
    verdict = await run_in_threadpool(check_readiness, service)
    if not reader:
        verdict = verdict.redacted()
    body = ReadyOut(ready=verdict.ready, reasons=verdict.reasons, checks=verdict.checks)
    code = status.HTTP_200_OK if verdict.ready else status.HTTP_503_SERVICE_UNAVAILABLE
    return JSONResponse(body.model_dump(mode="json"), status_code=code)
