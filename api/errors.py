"""The service's errors and how each becomes an HTTP answer.

Only this module knows HTTP; nothing a client sends yields a 5xx.
Details: docs/api.md, "Notes from the code", `api/errors.py`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

from fastapi import FastAPI, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.callchain.jsonload import json_problem
from forecaster.exceptions import ConfigError, DataValidationError, ForesightError, TrackingError
from forecaster.unavailable import Unavailable
from pipelines.errors import PublishError, StoreError

logger = logging.getLogger(__name__)


class UnknownPoolError(ForesightError, LookupError):
    """A request names a pool that is not configured."""

    def __init__(self, unknown: Sequence[str], known: Sequence[str]) -> None:
        self.unknown = list(unknown)
        self.known = list(known)
        names = ", ".join(repr(name) for name in self.unknown)
        super().__init__(f"no pool named {names}; known pools: {', '.join(self.known)}")


class PoolUnavailableError(ForesightError):
    """A pool exists but cannot be answered for yet (no live data, or no forecast)."""

    def __init__(self, pool: str, why: Unavailable) -> None:
        self.pool = pool
        self.why = why
        super().__init__(f"pool {pool!r}: {why.detail}")


_STATUS: Final[tuple[tuple[type[ForesightError], int, str], ...]] = (
    # Most specific first: the first match wins.
    (UnknownPoolError, status.HTTP_404_NOT_FOUND, "unknown_pool"),
    (PoolUnavailableError, status.HTTP_503_SERVICE_UNAVAILABLE, "pool_unavailable"),
    (DataValidationError, 422, "invalid_data"),
    (StoreError, status.HTTP_503_SERVICE_UNAVAILABLE, "store_unavailable"),
    (TrackingError, status.HTTP_503_SERVICE_UNAVAILABLE, "model_registry_unavailable"),
    (PublishError, status.HTTP_502_BAD_GATEWAY, "publish_failed"),
    (ConfigError, status.HTTP_500_INTERNAL_SERVER_ERROR, "configuration_error"),
)


def status_of(exc: ForesightError) -> tuple[int, str]:
    """Return the HTTP status and error code of one of our errors."""
    for kind, code, name in _STATUS:
        if isinstance(exc, kind):
            return code, name
    return status.HTTP_500_INTERNAL_SERVER_ERROR, "internal_error"


def error_body(error: str, message: str, **extra: Any) -> dict[str, Any]:
    """Return the JSON body every error answer shares."""
    return {"error": error, "message": message, **extra}


async def _foresight_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ForesightError)  # registered for ForesightError only
    code, name = status_of(exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, UnknownPoolError):
        extra["known_pools"] = exc.known
    if isinstance(exc, PoolUnavailableError):
        extra["pool"] = exc.pool
    if code >= status.HTTP_500_INTERNAL_SERVER_ERROR:
        logger.warning("%s %s failed: %s", request.method, request.url.path, exc)
    headers = {"Retry-After": "30"} if code == status.HTTP_503_SERVICE_UNAVAILABLE else None
    return JSONResponse(error_body(name, str(exc), **extra), status_code=code, headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # The rejected input is left out: it may be a 10 000-sample body, or hold a NaN
    # that JSON cannot carry back.
    details = jsonable_encoder(
        [
            {key: error[key] for key in ("loc", "msg", "type") if key in error}
            for error in exc.errors()
        ]
    )
    first = details[0] if details else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = f"invalid request: {where}: {first.get('msg', 'invalid value')}"
    if len(details) > 1:
        message += f" (and {len(details) - 1} more problems, see detail)"
    return JSONResponse(
        error_body("invalid_request", message, detail=details),
        status_code=422,
    )


_HTTP_ERRORS: Final[dict[int, str]] = {
    status.HTTP_400_BAD_REQUEST: "bad_request",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_503_SERVICE_UNAVAILABLE: "service_unavailable",
}
_PARSE_FAILED: Final = "There was an error parsing the body"
_SHOWN_PATH: Final = 200


def _http_message(
    request: Request, code: int, detail: str, cause: BaseException | None = None
) -> str:
    """The framework's terse details, said with what to do about them."""
    path = request.url.path[:_SHOWN_PATH]
    if code == status.HTTP_404_NOT_FOUND and detail == "Not Found":
        return f"no route {path}; the routes are listed at /docs"
    if code == status.HTTP_405_METHOD_NOT_ALLOWED:
        return f"{request.method} is not allowed on {path}; the routes are listed at /docs"
    if code == status.HTTP_400_BAD_REQUEST and detail == _PARSE_FAILED:
        return json_problem(cause) if cause is not None else "the body is not valid JSON"
    return detail


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)  # registered for it only
    code = exc.status_code
    name = _HTTP_ERRORS.get(code, "client_error" if code < 500 else "server_error")
    message = _http_message(request, code, str(exc.detail), exc.__cause__)
    return JSONResponse(error_body(name, message), status_code=code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers of our errors, of request validation and of the framework's
    own HTTP errors (unknown route, wrong method, unparsable body) on ``app``."""
    app.add_exception_handler(ForesightError, _foresight_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
