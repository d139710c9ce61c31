"""POST /v1/traces and /signals/spans, body limits, and latency reaching /recommendation."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from google.rpc import status_pb2  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from api.callchain.incremental import ChainWindow
from api.main import create_app
from api.services import Services
from api.settings import ServiceSettings
from pipelines.config.pools import PoolsConfig

T0 = 1_714_564_800_000_000_000
MS = 1_000_000
PROTOBUF = "application/x-protobuf"


@pytest.fixture
def services(make_services: Callable[..., Services], clock: Any) -> Services:
    """Services whose span window folds spans in at once (no settle delay)."""
    return make_services(clock=clock, spans=ChainWindow(settle=timedelta(0)))


@pytest.fixture
def pools() -> PoolsConfig:
    """alpha runs a gateway (SLO 500 ms) calling a ranker (SLO 100 ms); beta runs nothing."""
    return PoolsConfig.model_validate(
        {
            "pools": [
                {
                    "name": "alpha",
                    "node_group_id": "ng-alpha",
                    "gpus_per_node": 8,
                    "min_nodes": 1,
                    "max_nodes": 40,
                    "lead_time": "10m",
                    "quantile": 0.9,
                    "services": [
                        {"name": "gateway", "slo_p95_ms": 500},
                        {"name": "ranker", "slo_p95_ms": 100},
                    ],
                },
                {"name": "beta", "node_group_id": "ng-beta", "gpus_per_node": 4, "max_nodes": 10},
            ]
        }
    )


def chain(traces: int, ranker_ms: int, *, first: int = 0) -> list[dict[str, Any]]:
    """Spans of ``traces`` gateway -> ranker calls in the simple span list format."""
    spans: list[dict[str, Any]] = []
    for i in range(first, first + traces):
        start = T0 + i * 1000 * MS
        spans += [
            {"trace_id": f"t{i}", "span_id": "g", "service": "gateway", "start": start,
             "duration_ms": ranker_ms + 20},
            {"trace_id": f"t{i}", "span_id": "r", "parent_span_id": "g", "service": "ranker",
             "start": start + 10 * MS, "duration_ms": ranker_ms},
        ]  # fmt: skip
    return spans


def otlp_request(service: str, spans: int) -> ExportTraceServiceRequest:
    """An export of ``spans`` root spans of 50 ms from ``service``."""
    name = KeyValue(key="service.name", value=AnyValue(string_value=service))
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[name]),
                scope_spans=[
                    ScopeSpans(
                        spans=[
                            PbSpan(
                                trace_id=(i + 1).to_bytes(16, "big"),
                                span_id=(i + 1).to_bytes(8, "big"),
                                name="op",
                                start_time_unix_nano=T0,
                                end_time_unix_nano=T0 + 50 * MS,
                            )
                            for i in range(spans)
                        ]
                    )
                ],
            )
        ]
    )


def otlp_json(service: str, spans: int) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": f"{i + 1:032x}",
                                "spanId": f"{i + 1:016x}",
                                "name": "op",
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 50 * MS),
                            }
                            for i in range(spans)
                        ]
                    }
                ],
            }
        ]
    }


@pytest.fixture
def small_limit(make_services: Callable[..., Services], clock: Any) -> Services:
    """Services whose body limit is 10 000 bytes."""
    services = make_services(clock=clock)
    services.settings = services.settings.model_copy(
        update={"service": ServiceSettings(max_body_bytes=10_000)}
    )
    return services


@pytest.fixture
def limited(small_limit: Services, make_app: Callable[[Services], FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app(small_limit)) as client:
        yield client


def test_otlp_protobuf_export_is_answered_in_protobuf_and_fills_the_window(
    client: TestClient, services: Services
) -> None:
    body = otlp_request("gateway", 3).SerializeToString()

    response = client.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF})

    assert response.status_code == 200
    assert response.headers["content-type"] == PROTOBUF
    assert ExportTraceServiceResponse.FromString(response.content) == ExportTraceServiceResponse()
    assert len(services.spans) == 3


def test_otlp_json_export_gzipped_is_answered_in_json(
    client: TestClient, services: Services
) -> None:
    body = gzip.compress(json.dumps(otlp_json("ranker", 2)).encode())

    response = client.post(
        "/v1/traces",
        content=body,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    assert {s.service for s in services.spans.spans(services.span_clock())} == {"ranker"}


def test_malformed_protobuf_is_400_with_a_protobuf_status(client: TestClient) -> None:
    response = client.post(
        "/v1/traces", content=b"\xff\xff\xff", headers={"Content-Type": PROTOBUF}
    )

    assert response.status_code == 400
    status = status_pb2.Status.FromString(response.content)
    assert "ExportTraceServiceRequest" in status.message


def test_malformed_json_is_400_naming_the_field(client: TestClient) -> None:
    document = otlp_json("gateway", 1)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "xyz"

    response = client.post("/v1/traces", json=document)

    assert response.status_code == 400
    assert "resourceSpans[0].scopeSpans[0].spans[0].traceId" in response.json()["message"]


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({"Content-Type": "text/plain"}, "content type 'text/plain'"),
        ({"Content-Type": PROTOBUF, "Content-Encoding": "br"}, "content encoding 'br'"),
    ],
)
def test_other_content_types_and_encodings_are_415(
    client: TestClient, headers: dict[str, str], fragment: str
) -> None:
    response = client.post("/v1/traces", content=b"{}", headers=headers)

    assert response.status_code == 415
    assert fragment in response.text


def test_oversized_export_is_413_by_content_length(limited: TestClient) -> None:
    body = otlp_request("gateway", 400).SerializeToString()
    assert len(body) > 10_000

    response = limited.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF})

    assert response.status_code == 413
    assert "10000 bytes" in response.json()["message"]


async def _stream_chunks(app: FastAPI, path: str, chunks: int) -> tuple[int, int]:
    """POST ``chunks`` chunks of 1000 bytes without Content-Length; (status, chunks read)."""
    pulled = 0
    code = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": pulled < chunks}

    async def send(message: dict[str, Any]) -> None:
        nonlocal code
        if message["type"] == "http.response.start":
            code = message["status"]

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    await app(scope, receive, send)
    return code, pulled


@pytest.mark.parametrize("path", ["/v1/traces", "/signals/spans", "/signals/metrics"])
def test_oversized_chunked_body_is_stopped_while_streaming(limited: TestClient, path: str) -> None:
    app = limited.app
    assert isinstance(app, FastAPI)

    code, pulled = asyncio.run(_stream_chunks(app, path, chunks=100))

    assert code == 413
    # Stopped at the first chunk past 10 000 bytes, not after all 100 000.
    assert pulled == 11


def test_gzip_bomb_is_413_on_the_decompressed_size(limited: TestClient) -> None:
    body = gzip.compress(b"\0" * 200_000)
    assert len(body) < 10_000

    response = limited.post(
        "/v1/traces", content=body, headers={"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}
    )

    assert response.status_code == 413
    assert "decompressed" in status_pb2.Status.FromString(response.content).message


def test_span_list_push_reports_what_it_stored(client: TestClient) -> None:
    response = client.post("/signals/spans", json=chain(3, 50))

    assert response.status_code == 200
    assert response.json() == {
        "accepted": 6,
        "evicted": 0,
        "window_spans": 6,
        "rejected": 0,
        "rejected_reasons": [],
    }


def test_a_span_list_without_a_valid_span_is_422_naming_index_and_field(
    client: TestClient,
) -> None:
    spans = chain(1, 50)
    spans[0]["start"] = "yesterday"
    spans[1]["duration"] = 5

    response = client.post("/signals/spans", json=spans)

    assert response.status_code == 422
    assert "span [1]: duration" in response.json()["message"]


def test_span_list_of_other_content_type_is_415(client: TestClient) -> None:
    response = client.post("/signals/spans", content=b"[]", headers={"Content-Type": "text/csv"})

    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"


@pytest.mark.parametrize("path", ["/signals/spans", "/signals/metrics"])
def test_every_post_has_the_body_limit(limited: TestClient, path: str) -> None:
    response = limited.post(path, content=b"[" + b" " * 20_000 + b"]",
                            headers={"Content-Type": "application/json"})  # fmt: skip

    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert response.json()["limit_bytes"] == 10_000


def test_analysis_turns_a_slow_ranker_into_extra_nodes_of_its_pool(
    services: Services, make_app: Callable[..., FastAPI]
) -> None:
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=None)
    with TestClient(app) as client:
        before = client.get("/recommendation/alpha").json()["explanation"]["latency"]
        client.post("/signals/spans", json=chain(30, 400))

        changed = app.state.latency.update(app.state.service.live)
        app.state.service.invalidate(sorted(changed))
        after = client.get("/recommendation/alpha").json()["explanation"]["latency"]

    assert before["extra_nodes"] == 0
    assert changed == {"alpha"}
    assert after["extra_nodes"] > 0
    assert "ranker p95 400 ms vs SLO 100 ms" in after["reason"]
    assert app.state.latency.analysis.services["ranker"].culprit
    assert not app.state.latency.analysis.services["gateway"].culprit


def test_background_analysis_invalidates_the_recommendation(services: Services) -> None:
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=0.05)
    with TestClient(app) as client:
        client.get("/recommendation/alpha")
        client.post("/signals/spans", json=chain(30, 400))
        deadline = time.monotonic() + 10
        latency: dict[str, Any] = {}
        while time.monotonic() < deadline:
            latency = client.get("/recommendation/alpha").json()["explanation"]["latency"]
            if latency["extra_nodes"]:
                break
            time.sleep(0.05)

    assert latency["extra_nodes"] > 0
    assert "ranker" in latency["reason"]


def test_a_latency_source_given_by_the_caller_is_kept(
    make_services: Callable[..., Services], clock: Any
) -> None:
    from policy.types import LatencyAdjustment

    fixed = LatencyAdjustment(extra_nodes=2, reason="given")
    services = make_services(clock=clock, latency=lambda pool, now: fixed)
    with TestClient(create_app(services=services, refresh_seconds=None)) as client:
        latency = client.get("/recommendation/alpha").json()["explanation"]["latency"]

    assert latency["reason"] == "given"
