"""Request body limits: a 413 as soon as a body is known to be too large (docs/api.md)."""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_body

DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""The limit before the settings are loaded (the settings' default)."""


class BodyTooLargeError(HTTPException):
    """A request body exceeds the limit (answered 413).

    An ``HTTPException`` so that FastAPI passes it through while parsing a body instead
    of turning it into a 400.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            status_code=status.HTTP_413_CONTENT_TOO_LARGE,
            detail=f"the request body is larger than {limit} bytes; send smaller batches "
            "(the limit is service.max_body_bytes)",
        )


def body_limit(app: Any) -> int:
    """Return the body limit of ``app`` (a Starlette app, from ``scope['app']``)."""
    state = getattr(app, "state", None)
    limit = getattr(state, "max_body_bytes", None)
    return limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_BODY_BYTES


def declared_length(scope: Scope) -> int | None:
    """Return the request's ``Content-Length``, None when absent or not a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


class BodyLimitMiddleware:
    """Answer 413 for bodies over the app's limit, while they are read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope.get("app"))
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await too_large_response(BodyTooLargeError(limit))(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        await self.app(scope, limited, send)


async def read_body(request: Request, limit: int) -> bytes:
    """Read a request body of at most ``limit`` bytes, chunk by chunk.

    Raises:
        BodyTooLargeError: the body is longer than ``limit``.
    """
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLargeError(limit)
    return bytes(body)


def too_large_response(exc: BodyTooLargeError) -> JSONResponse:
    """Return the JSON 413 answer."""
    return JSONResponse(
        error_body("payload_too_large", str(exc.detail), limit_bytes=exc.limit),
        status_code=status.HTTP_413_CONTENT_TOO_LARGE,
        # The rest of the body is not read; the connection cannot be reused safely.
        headers={"Connection": "close"},
    )


async def _too_large(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyTooLargeError)  # registered for it only
    return too_large_response(exc)


def install_limits(app: FastAPI) -> None:
    """Add the body limit middleware and the 413 answer to ``app``."""
    app.add_exception_handler(BodyTooLargeError, _too_large)
    app.add_middleware(BodyLimitMiddleware)
