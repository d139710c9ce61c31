"""OTLP partial success on POST /v1/traces and /signals/spans, and hostile JSON bodies.

A batch keeps its valid spans and reports the rejected ones (OTLP ``partial_success``
in the request's encoding); a body nothing can be taken from is the documented 400
(``google.rpc.Status``), never a plain-text 500.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from google.rpc import status_pb2  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from api.services import Services
from tests.api.app.test_app_traces import MS, PROTOBUF, T0, chain, otlp_json, otlp_request


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def test_json_batch_keeps_valid_spans_and_reports_the_rejected(
    client: TestClient, services: Services
) -> None:
    document = otlp_json("gateway", 5)
    spans = _spans(document)
    spans[1]["endTimeUnixNano"] = str(T0 - 5 * MS)  # a skewed clock: ends before it starts
    spans[2]["parentSpanId"] = spans[2]["spanId"]  # its own parent
    spans[3]["startTimeUnixNano"] = "0"

    response = client.post("/v1/traces", json=document)

    assert response.status_code == 200
    reply = json_format.Parse(response.content, ExportTraceServiceResponse())
    assert reply.partial_success.rejected_spans == 3
    message = reply.partial_success.error_message
    assert "spans[1]" in message
    assert "before it starts" in message
    assert "spans[2]" in message
    assert "its parent" in message
    assert "spans[3]" in message
    assert len(services.spans) == 2


def test_protobuf_batch_reports_partial_success_in_protobuf(
    client: TestClient, services: Services
) -> None:
    request = otlp_request("ranker", 4)
    bad = request.resource_spans[0].scope_spans[0].spans[0]
    bad.end_time_unix_nano = bad.start_time_unix_nano - 1

    response = client.post(
        "/v1/traces", content=request.SerializeToString(), headers={"Content-Type": PROTOBUF}
    )

    assert response.status_code == 200
    assert response.headers["content-type"] == PROTOBUF
    reply = ExportTraceServiceResponse.FromString(response.content)
    assert reply.partial_success.rejected_spans == 1
    assert "spans[0]" in reply.partial_success.error_message
    assert len(services.spans) == 3


def test_a_fully_valid_batch_has_no_partial_success(client: TestClient) -> None:
    response = client.post("/v1/traces", json=otlp_json("gateway", 2))

    assert response.status_code == 200
    assert response.json() == {}


def test_a_batch_without_one_valid_span_is_400(client: TestClient) -> None:
    document = otlp_json("gateway", 2)
    for span in _spans(document):
        span["startTimeUnixNano"] = "0"

    response = client.post("/v1/traces", json=document)

    assert response.status_code == 400
    assert "2 of 2 spans rejected" in response.json()["message"]


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def _huge_time() -> bytes:
    document = otlp_json("gateway", 1)
    _spans(document)[0]["startTimeUnixNano"] = "1" + "0" * 5000
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (_nested(100_000), "nested"),
        (b'{"resourceSpans": ' + b"9" * 5000 + b"}", "more than 4300 digits"),
        (_huge_time(), "startTimeUnixNano"),
        (b'{"resourceSpans": [' * 50_000, "nested"),
    ],
    ids=["100k-nested-objects", "5000-digit-integer", "5000-digit-time", "deep-open-arrays"],
)
def test_hostile_json_bodies_are_the_documented_400(
    client: TestClient, body: bytes, fragment: str
) -> None:
    response = client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert fragment in response.json()["message"]


def test_hostile_protobuf_body_is_the_documented_400(client: TestClient) -> None:
    # 100 000 nested sub-messages (field 1, length-delimited, ever deeper).
    body = b""
    for _ in range(2_000):
        body = b"\x0a" + _varint(len(body)) + body
    response = client.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF})

    assert response.status_code == 400
    status_pb2.Status.FromString(response.content)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def test_span_list_keeps_valid_spans_and_reports_the_rejected(
    client: TestClient, services: Services
) -> None:
    spans = chain(3, 50)
    spans[1]["duration"] = 5  # a misspelt field
    spans[2]["parent_span_id"] = spans[2]["span_id"]  # its own parent

    response = client.post("/signals/spans", json=spans)

    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 4
    assert body["rejected"] == 2
    assert any(reason.startswith("span [1]") for reason in body["rejected_reasons"])
    assert any("its parent" in reason for reason in body["rejected_reasons"])
    assert len(services.spans) == 4


@pytest.mark.parametrize(
    "body", [_nested(100_000), b"[" + b"9" * 5000 + b"]", b"[" * 50_000], ids=str
)
def test_hostile_span_lists_are_422(client: TestClient, body: bytes) -> None:
    response = client.post(
        "/signals/spans", content=body, headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 422
    assert response.json()["error"]
