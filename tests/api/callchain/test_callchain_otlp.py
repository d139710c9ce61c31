"""OTLP/HTTP decoding: protobuf and JSON give the same spans; malformed bodies say why."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from api.callchain.otlp.export import decode_export, export_response
from api.callchain.otlp.json_mapping import decode_json_batch
from api.callchain.otlp.media import JSON, PROTOBUF
from api.callchain.otlp.protobuf import decode_protobuf_batch
from api.callchain.types import PayloadTooLargeError, Span, UnsupportedMediaTypeError
from forecaster.exceptions import DataValidationError
from tests.api.callchain.strict import require_all

T0 = 1_714_564_800_000_000_000
TRACE = "5b8efff798038103d269b633813fc60c"
# (service, span_id, parent, name, kind, start offset ms, duration ms, status)
SPEC = [
    ("gateway", "eee19b7ec3c1b174", None, "GET /search", 2, 0, 180, 0),
    ("gateway", "eee19b7ec3c1b175", "eee19b7ec3c1b174", "call ranker", 3, 5, 160, 0),
    ("ranker", "aaa19b7ec3c1b176", "eee19b7ec3c1b175", "rank", 2, 10, 150, 2),
    ("embedder", "bbb19b7ec3c1b177", "aaa19b7ec3c1b176", "embed", 2, 20, 40, 1),
]


def decode_export_request(
    body: bytes, content_type: str, encoding: str | None = None, **limits: int
) -> list[Span]:
    """The strict decode: every span valid, or the first problem raised."""
    return require_all(decode_export(body, content_type, encoding, **limits))


def decode_json(body: bytes | str) -> list[Span]:
    return require_all(decode_json_batch(body))


def decode_protobuf(body: bytes) -> list[Span]:
    return require_all(decode_protobuf_batch(body))


def _protobuf_request() -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for service in ("gateway", "ranker", "embedder"):
        resource = Resource(
            attributes=[
                KeyValue(key="host.name", value=AnyValue(string_value="n1")),
                KeyValue(key="service.name", value=AnyValue(string_value=service)),
            ]
        )
        spans = [
            PbSpan(
                trace_id=bytes.fromhex(TRACE),
                span_id=bytes.fromhex(span_id),
                parent_span_id=bytes.fromhex(parent) if parent else b"",
                name=name,
                kind=kind,
                start_time_unix_nano=T0 + start * 1_000_000,
                end_time_unix_nano=T0 + (start + duration) * 1_000_000,
                status=Status(code=status),
            )
            for svc, span_id, parent, name, kind, start, duration, status in SPEC
            if svc == service
        ]
        request.resource_spans.append(
            ResourceSpans(
                resource=resource,
                scope_spans=[ScopeSpans(scope=InstrumentationScope(name="test"), spans=spans)],
            )
        )
    return request


def _json_request() -> dict[str, Any]:
    resource_spans = []
    for service in ("gateway", "ranker", "embedder"):
        spans = []
        for svc, span_id, parent, name, kind, start, duration, status in SPEC:
            if svc != service:
                continue
            span: dict[str, Any] = {
                "traceId": TRACE,
                "spanId": span_id,
                "name": name,
                "kind": kind,
                # OTLP JSON writes 64-bit integers as strings; numbers are accepted too.
                "startTimeUnixNano": str(T0 + start * 1_000_000),
                "endTimeUnixNano": T0 + (start + duration) * 1_000_000,
                "status": {"code": status} if status else {},
            }
            if parent:
                span["parentSpanId"] = parent
            spans.append(span)
        resource_spans.append(
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": service}},
                    ]
                },
                "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
            }
        )
    return {"resourceSpans": resource_spans}


def test_protobuf_and_json_decode_to_identical_spans() -> None:
    from_protobuf = decode_export_request(
        _protobuf_request().SerializeToString(), "application/x-protobuf"
    )
    from_json = decode_export_request(
        json.dumps(_json_request()).encode(), "application/json; charset=utf-8"
    )

    assert from_protobuf == from_json
    assert [s.service for s in from_json] == ["gateway", "gateway", "ranker", "embedder"]
    root, client, ranker, embedder = from_json
    assert root.parent_span_id is None
    assert ranker.parent_span_id == client.span_id
    assert (root.kind, client.kind, ranker.status, embedder.status) == (
        "server",
        "client",
        "error",
        "ok",
    )
    assert ranker.duration_ms == 150.0
    assert root.start.isoformat() == "2024-05-01T12:00:00+00:00"


def test_json_accepts_snake_case_enum_names_and_base64_ids() -> None:
    document = _json_request()
    span = document["resourceSpans"][1]["scopeSpans"][0]["spans"][0]
    span["trace_id"] = base64.b64encode(bytes.fromhex(span.pop("traceId"))).decode()
    span["spanId"] = span["spanId"].upper()
    span["kind"] = "SPAN_KIND_SERVER"
    span["status"] = {"code": "STATUS_CODE_ERROR"}

    assert decode_json(json.dumps(document)) == decode_json(json.dumps(_json_request()))


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_bodies_are_decoded(encoding: str) -> None:
    raw = _protobuf_request().SerializeToString()
    body = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)

    assert decode_export_request(body, PROTOBUF, encoding) == decode_protobuf(raw)


def test_a_compression_bomb_is_stopped_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)

    with pytest.raises(PayloadTooLargeError, match="larger than 1000000 bytes"):
        decode_export_request(bomb, PROTOBUF, "gzip", max_decompressed_bytes=1_000_000)


def test_missing_service_name_is_unknown_service() -> None:
    document = _json_request()
    del document["resourceSpans"][0]["resource"]

    assert decode_json(json.dumps(document))[0].service == "unknown_service"


def test_empty_requests_hold_no_spans() -> None:
    assert decode_protobuf(b"") == []
    assert decode_json(b"{}") == []


def _mutated(path: tuple[Any, ...], value: Any) -> bytes:
    """The JSON request with the field at ``path`` (under the first ranker span) changed."""
    document = _json_request()
    target: Any = document["resourceSpans"][1]["scopeSpans"][0]["spans"][0]
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(document).encode()


_DELETE = object()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON \\(line 1, column 2\\)"),
        (b"\xff\xfe", "not valid JSON \\(line 1, column 1\\)"),
        (b"[]", "the body must be a JSON object"),
        (b'{"resourceSpans": {}}', "resourceSpans must be a list"),
        (b'{"resourceSpans": [1]}', r"resourceSpans\[0\] must be an object"),
        (_mutated(("traceId",), "xyz"), r"spans\[0\]\.traceId must be a hex string of 32"),
        (_mutated(("traceId",), "0" * 32), "all zeros"),
        (_mutated(("spanId",), _DELETE), r"spans\[0\]\.spanId must be 8 bytes, got 0"),
        (_mutated(("parentSpanId",), "abcd"), "parentSpanId must be a hex string of 16"),
        (_mutated(("startTimeUnixNano",), "soon"), "startTimeUnixNano must be Unix nanoseconds"),
        (_mutated(("startTimeUnixNano",), 1.5), "must be an integer or a decimal string"),
        (_mutated(("endTimeUnixNano",), _DELETE), "endTimeUnixNano is missing"),
        (_mutated(("endTimeUnixNano",), "1"), "ends .* before it starts"),
        (_mutated(("kind",), "SPAN_KIND_SIDEWAYS"), r"kind must be one of 0 or SPAN_KIND_UNSPEC"),
        (_mutated(("status", "code"), True), r"status\.code must be one of"),
        (_mutated(("name",), 7), "name must be a string"),
    ],
)
def test_malformed_json_says_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(DataValidationError, match=message):
        decode_export_request(body, JSON)


def test_service_name_must_be_a_string_value() -> None:
    document = _json_request()
    document["resourceSpans"][0]["resource"]["attributes"][0]["value"] = {"intValue": "3"}

    with pytest.raises(DataValidationError, match=r"service\.name\) must be"):
        decode_json(json.dumps(document))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x0a\xff", "not a protobuf ExportTraceServiceRequest"),
        (b'{"resourceSpans": []}', "protobuf"),
        (b"\x50\x01", "holds no resource_spans"),
    ],
)
def test_malformed_protobuf_says_what_is_wrong(body: bytes, message: str) -> None:
    with pytest.raises(DataValidationError, match=message):
        decode_export_request(body, PROTOBUF)


def test_invalid_protobuf_span_names_its_position() -> None:
    request = _protobuf_request()
    request.resource_spans[2].scope_spans[0].spans[0].span_id = b"\x01\x02"

    with pytest.raises(DataValidationError, match=r"resourceSpans\[2\].*spans\[0\]\.spanId"):
        decode_protobuf(request.SerializeToString())


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [(None, None), ("text/plain", None), (PROTOBUF, "br")],
)
def test_unsupported_media_is_its_own_error(content_type: str | None, encoding: str | None) -> None:
    with pytest.raises(UnsupportedMediaTypeError):
        decode_export_request(b"", content_type, encoding)


def test_corrupt_gzip_is_a_validation_error() -> None:
    # The message says what to send, not zlib's "Error -3 while decompressing data".
    with pytest.raises(DataValidationError, match="not a valid gzip stream") as raised:
        decode_export_request(b"\x1f\x8bnot gzip at all", PROTOBUF, "gzip")
    assert "Error -3" not in str(raised.value)
    truncated = gzip.compress(_protobuf_request().SerializeToString())[:-12]
    with pytest.raises(DataValidationError, match="truncated"):
        decode_export_request(truncated, PROTOBUF, "gzip")


def test_export_response_matches_the_request_encoding() -> None:
    body, media = export_response("application/json")
    assert (json.loads(body), media) == ({}, JSON)
    body, media = export_response(PROTOBUF)
    assert media == PROTOBUF
    assert ExportTraceServiceResponse.FromString(body) == ExportTraceServiceResponse()


def test_span_rejects_inconsistent_values() -> None:
    with pytest.raises(DataValidationError, match="its parent"):
        Span("t", "a", "a", "svc", "", 1, 2)
    with pytest.raises(DataValidationError, match="service must not be empty"):
        Span("t", "a", None, "", "", 1, 2)
