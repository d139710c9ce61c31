"""Polled reads answered from their bytes (api.polled_reads): as the routes answer them.

Each request is sent to the app as served and to the same app without the polled-read
middleware (the routes alone), on the same store and clock; status, body and content
type must agree, whether the middleware answers the read or steps aside. A counting
inner app shows which reads the middleware answers itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

import api.main
from api.polled_reads import PolledReads
from api.services import Services
from tests.api.app.test_app_auth import READ, WRITE, bearer, guarded


class _Routes:
    """Stands in for the middleware: every request goes on to the routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@pytest.fixture
def pair(
    make_services: Callable[..., Services],
    make_app: Callable[[Services], FastAPI],
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[TestClient, TestClient]]:
    """The app as served and the routes alone, both warm (every pool decided)."""
    served = make_app(make_services(clock=clock))
    monkeypatch.setattr(api.main, "PolledReads", _Routes)
    routes_only = make_app(make_services(clock=clock))
    with TestClient(served) as fast, TestClient(routes_only) as plain:
        for client in (fast, plain):
            assert client.get("/recommendation").status_code == 200
        yield fast, plain


READS = [
    "/recommendation/alpha",
    "/recommendation/beta",
    "/recommendation?pool=alpha",
    "/recommendation?pool=beta&pool=alpha",
    "/recommendation?pool=alpha&pool=alpha",
    "/recommendation/nope",
    "/recommendation?pool=nope",
    "/recommendation?pool=",
    "/recommendation/" + "x" * 101,
    "/recommendation/alpha/extra",
    "/recommendation",
]


@pytest.mark.parametrize("path", READS)
def test_every_read_answers_as_the_routes_do(
    pair: tuple[TestClient, TestClient], path: str
) -> None:
    fast, plain = pair
    got, want = fast.get(path), plain.get(path)
    assert (got.status_code, got.content) == (want.status_code, want.content)
    assert got.headers["content-type"] == want.headers["content-type"]
    assert got.headers["content-length"] == want.headers["content-length"]


def call(app: ASGIApp, scope_app: FastAPI, target: str, headers: list[tuple[bytes, bytes]]) -> int:
    """Send one GET through ``app`` as if ``scope_app`` had received it; its status."""
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query.encode(),
        "headers": headers,
        "app": scope_app,
    }
    status = 0

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    asyncio.run(app(scope, receive, send))
    return status


class _Counting:
    """An inner app that counts the requests reaching it and answers 299."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += 1
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("target", "answered"),
    [
        ("/recommendation/alpha", True),
        ("/recommendation?pool=alpha&pool=beta", True),
        ("/recommendation", False),  # the whole set: the route joins it
        ("/recommendation?pool=alpha&x=1", False),
        ("/recommendation/nope", False),
        ("/signals", False),
    ],
)
def test_the_middleware_answers_decided_pool_reads_itself(
    pair: tuple[TestClient, TestClient], target: str, answered: bool
) -> None:
    fast, _ = pair
    inner = _Counting()
    status = call(PolledReads(inner), fast.app, target, [])  # type: ignore[arg-type]
    assert (status == 200, inner.calls) == (answered, 0 if answered else 1)


def test_tokens_are_checked_before_answering(
    make_services: Callable[..., Services], make_app: Callable[[Services], FastAPI], clock: Any
) -> None:
    app = make_app(guarded(make_services(clock=clock), read=(READ,), write=(WRITE,)))
    with TestClient(app) as client:
        assert client.get("/recommendation/alpha", headers=bearer(READ)).status_code == 200
        for headers, status in [
            ([], 401),
            ([(b"authorization", b"Bearer wrong")], 401),
            ([(b"authorization", b"Basic abc")], 401),
            ([(b"authorization", b"Bearer " + READ.encode())], 200),
            ([(b"authorization", b"Bearer " + WRITE.encode())], 200),
        ]:
            inner = _Counting()
            got = call(PolledReads(inner), app, "/recommendation/alpha", headers)
            assert (got, inner.calls) == ((200, 0) if status == 200 else (299, 1))
            answer = client.get("/recommendation/alpha", headers=dict(headers_text(headers)))
            assert answer.status_code == status


def headers_text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode(), value.decode()) for name, value in headers]


def test_the_request_timer_labels_an_answered_read_with_its_route(
    pair: tuple[TestClient, TestClient],
) -> None:
    fast, _ = pair
    fast.get("/recommendation/alpha")
    fast.get("/recommendation?pool=beta")
    text = fast.get("/metrics").text
    for route in ("/recommendation/{pool}", "/recommendation"):
        line = f'method="GET",route="{route}",status="200"'
        assert any(line in row and "_count" in row for row in text.splitlines()), route


def test_a_pool_to_decide_first_goes_to_the_route(
    make_services: Callable[..., Services], make_app: Callable[[Services], FastAPI], clock: Any
) -> None:
    app = make_app(make_services(clock=clock))
    with TestClient(app):
        inner = _Counting()
        # Nothing is decided before the first read: the route decides in a thread.
        assert call(PolledReads(inner), app, "/recommendation/alpha", []) == 299
        assert inner.calls == 1
