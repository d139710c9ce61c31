"""The polled reads answered from their encoded bytes, ahead of the framework's routing.

Details: docs/api.md, "Notes from the code", `api/polled_reads.py`."""

from __future__ import annotations

from typing import Final, NamedTuple
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import AuthError, TokenGuard
from api.routers.encoded import pool_json, set_json
from api.service import RecommendationService
from forecaster.exceptions import ForesightError

PREFIX: Final = "/recommendation"
"""The path of the set; a pool's is ``PREFIX/<name>``."""

MAX_POOL_NAME: Final = 100
"""The route's limit on a ``{pool}`` (longer names go on to it, which answers 422)."""

_HEADERS: Final = [(b"content-type", b"application/json")]


class _Template(NamedTuple):
    """What the request timer reads of a matched route: its path template."""

    path: str


_SET: Final = _Template(PREFIX)
_POOL: Final = _Template(PREFIX + "/{pool}")


class PolledReads:
    """ASGI middleware answering decided per-pool reads from their bytes (docs/api.md).

    Args:
        app: the wrapped ASGI app (the Starlette app whose ``state`` holds the service
            and the token guard, as :mod:`api.deps` publishes them).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = scope["type"] == "http" and scope["method"] == "GET" and _answer(scope)
        if not body:
            await self.app(scope, receive, send)
            return
        scope["route"] = _SET if scope["path"] == PREFIX else _POOL
        headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _answer(scope: Scope) -> bytes | None:
    """The body of a read this middleware may answer, else None."""
    path: str = scope["path"]
    if not path.startswith(PREFIX):
        return None
    state = getattr(scope.get("app"), "state", None)
    service: RecommendationService | None = getattr(state, "service", None)
    guard: TokenGuard | None = getattr(state, "auth", None)
    if service is None or guard is None or not _may_read(guard, scope):
        return None
    rest = path[len(PREFIX) :]
    try:
        if rest == "" and scope["query_string"]:
            names = _pool_filter(scope["query_string"])
            entries = service.peek(service.select(names)) if names else None
            if entries is None:
                return None
            body = set_json(service.now(), [entry.body for entry in entries], [])
        elif rest.startswith("/") and 0 < len(rest) - 1 <= MAX_POOL_NAME and "/" not in rest[1:]:
            entries = service.peek([service.pool(rest[1:])])
            if entries is None:
                return None
            body = pool_json(entries[0].body)
        else:
            return None
    except ForesightError:  # e.g. an unknown pool: the route answers it
        return None
    return body


def _pool_filter(query: bytes) -> list[str] | None:
    """The ``?pool=`` names when the query holds nothing else, else None."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    if not pairs or any(key != "pool" for key, _ in pairs):
        return None
    return [value for _, value in pairs]


def _may_read(guard: TokenGuard, scope: Scope) -> bool:
    """Whether the request's bearer token (if any) may read; refusals go to the routes."""
    token = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not credentials:
                return False
            token = credentials
    try:
        guard.check("read", token)
    except AuthError:
        return False
    return True
