"""Span ingestion and the call-chain analysis never hold up a read.

The window below holds a span batch (or an analysis) until the test lets it go, as a
large batch being folded would. Reads must complete meanwhile. The assertions are on
order and progress, never on time: a wait's timeout is only a safety net, and on code
that blocks the event loop the read would return after the batch, failing the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from api.callchain.feed import SpanFeed
from api.callchain.incremental import ChainWindow
from api.callchain.types import ServiceStats, Span
from api.callchain.window import AddResult
from api.deps import get_span_feed
from api.main import create_app
from api.services import Services
from tests.api.app.test_app_traces import PROTOBUF, otlp_request

WAIT_S = 20  # a safety net against a hang, never a timing assertion


class HeldWindow(ChainWindow):
    """A span window whose ``add`` and ``stats`` wait at a gate the test opens."""

    def __init__(self) -> None:
        super().__init__(settle=timedelta(0))
        self.in_add = threading.Event()
        self.in_stats = threading.Event()
        self.gate = threading.Event()
        self.gate.set()  # open until a test closes it
        self.hold_stats = False
        self.done: list[str] = []

    def add(self, spans: Iterable[Span], now: datetime) -> AddResult:
        self.in_add.set()
        self.gate.wait(WAIT_S)
        result = super().add(spans, now)
        self.done.append("add")
        return result

    def stats(
        self, now: datetime, max_staleness: timedelta = timedelta(0)
    ) -> Mapping[str, ServiceStats]:
        if self.hold_stats:
            self.in_stats.set()
            self.gate.wait(WAIT_S)
        result = super().stats(now, max_staleness)
        self.done.append("stats")
        return result


@pytest.fixture
def window() -> HeldWindow:
    return HeldWindow()


@pytest.fixture
def app(make_services: Callable[..., Services], clock: Any, window: HeldWindow) -> FastAPI:
    # No background analysis: the test runs it when it wants.
    services = make_services(clock=clock, spans=window)
    return create_app(services=services, refresh_seconds=None, analysis_seconds=None)


@pytest.fixture
def client(app: FastAPI, window: HeldWindow) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client
        window.gate.set()  # never leave a thread waiting at the gate


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(result=call()), daemon=True)
    thread.start()
    return thread, out


def test_a_read_completes_while_a_large_span_batch_is_being_added(
    client: TestClient, window: HeldWindow
) -> None:
    client.get("/recommendation")  # decided once, so the read below answers from memory
    body = otlp_request("gateway", 5_000).SerializeToString()
    window.gate.clear()

    export, out = _in_thread(
        lambda: client.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF})
    )
    assert window.in_add.wait(WAIT_S), "the batch never reached the window"
    read = client.get("/recommendation")
    chain = client.get("/signals/chain")

    # Both reads were answered while the batch was still held in the window.
    assert (read.status_code, chain.status_code) == (200, 200)
    assert window.done == []
    assert export.is_alive()
    window.gate.set()
    export.join(WAIT_S)
    exported = out["result"]
    assert exported.status_code == 200
    assert ExportTraceServiceResponse.FromString(exported.content) == ExportTraceServiceResponse()
    assert window.done == ["add"]
    assert len(window) == 5_000


def test_a_read_of_the_chain_completes_while_an_analysis_settles_the_window(
    app: FastAPI, client: TestClient, window: HeldWindow
) -> None:
    client.post("/v1/traces", content=otlp_request("gateway", 30).SerializeToString(),
                headers={"Content-Type": PROTOBUF})  # fmt: skip
    window.gate.clear()
    window.hold_stats = True

    analysis, _ = _in_thread(lambda: app.state.latency.update(app.state.service.live))
    assert window.in_stats.wait(WAIT_S), "the analysis never read the window"
    chain = client.get("/signals/chain")
    read = client.get("/recommendation")

    assert (chain.status_code, read.status_code) == (200, 200)
    assert chain.json()["analysed_at"] is None  # the analysis under way has not finished
    assert chain.json()["spans_in_window"] == 30
    assert "stats" not in window.done
    window.gate.set()
    analysis.join(WAIT_S)
    assert window.done[-1] == "stats"
    assert client.get("/signals/chain").json()["analysed_at"] is not None


def test_a_batch_is_refused_with_503_while_ingestion_is_behind(
    app: FastAPI, client: TestClient, window: HeldWindow
) -> None:
    small = SpanFeed(window, max_queued_spans=10)
    small.start()
    app.dependency_overrides[get_span_feed] = lambda: small
    try:
        window.gate.clear()
        first, out = _in_thread(
            lambda: client.post(
                "/v1/traces",
                content=otlp_request("gateway", 8).SerializeToString(),
                headers={"Content-Type": PROTOBUF},
            )
        )
        assert window.in_add.wait(WAIT_S)
        refused = client.post(
            "/v1/traces",
            content=otlp_request("ranker", 5).SerializeToString(),
            headers={"Content-Type": PROTOBUF},
        )
        listed = client.post("/signals/spans", json=[
            {"trace_id": "x", "span_id": f"s{i}", "service": "ranker",
             "start": "2025-03-30T23:55:00Z", "duration_ms": 5} for i in range(5)
        ])  # fmt: skip

        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["content-type"] == PROTOBUF
        assert listed.status_code == 503
        assert listed.json()["error"] == "ingestion_behind"
        assert "send the 5 spans again" in listed.json()["message"]
        window.gate.set()
        first.join(WAIT_S)
        assert out["result"].status_code == 200
        # Nothing of the refused batches was taken: they are the sender's to retry.
        assert len(window) == 8
    finally:
        window.gate.set()
        app.dependency_overrides.clear()
        small.stop(WAIT_S)
