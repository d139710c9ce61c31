"""The simple span list of POST /signals/spans."""

from __future__ import annotations

import json

import pytest

from api.callchain.spanlist import SpanIn, decode_span_list_batch
from api.callchain.types import Span
from forecaster.exceptions import DataValidationError
from tests.api.callchain.strict import require_all

T0_NS = 1_714_564_800_000_000_000  # 2024-05-01T12:00:00Z


def decode_span_list(body: bytes | str) -> list[Span]:
    """The strict decode: every span valid, or the first problem raised."""
    return require_all(decode_span_list_batch(body))


def test_rfc3339_and_unix_nanos_give_the_same_span() -> None:
    body = json.dumps(
        [
            {
                "trace_id": "t1",
                "span_id": "a",
                "service": "gateway",
                "name": "GET /search",
                "start": "2024-05-01T14:00:00.010+02:00",
                "duration_ms": 180.5,
                "kind": "server",
            },
            {
                "trace_id": "t1",
                "span_id": "b",
                "parent_span_id": "a",
                "service": "ranker",
                "start": T0_NS + 20_000_000,
                "end": str(T0_NS + 170_000_000),
                "status": "error",
            },
            {
                "trace_id": "t1",
                "span_id": "c",
                "parent_span_id": "",
                "service": "x",
                "start": "2024-05-01T12:00:00Z",
                "end": "2024-05-01T12:00:00.000001Z",
            },
        ]
    )

    root, child, orphan = decode_span_list(body)

    assert root == Span(
        "t1", "a", None, "gateway", "GET /search", T0_NS + 10_000_000, T0_NS + 190_500_000, "server"
    )
    assert (child.parent_span_id, child.duration_ms, child.status) == ("a", 150.0, "error")
    assert (orphan.parent_span_id, orphan.duration_ns) == (None, 1000)


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ({"end": "2024-05-01T12:00:01Z", "duration_ms": 1}, "exactly one of end and duration_ms"),
        ({}, "exactly one of end and duration_ms"),
        ({"duration_ms": 1, "start": "2024-05-01T12:00:00"}, "timezone"),
        ({"duration_ms": 1, "start": 1.7e18}, "Unix nanoseconds as an integer"),
        ({"duration_ms": -1}, "greater than or equal to 0"),
        ({"duration_ms": 1, "duration": 1}, "duration: Extra inputs are not permitted"),
        ({"duration_ms": 1, "span_id": "has space"}, "span_id: String should match"),
        ({"duration_ms": 1, "service": ""}, r"span \[0\]: service"),
        ({"duration_ms": 1, "kind": "sideways"}, r"span \[0\]: kind"),
        ({"end": "2024-05-01T11:00:00Z"}, r"span \[0\]: .* before it starts"),
    ],
)
def test_invalid_spans_say_what_is_wrong(span: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "trace_id": "t",
        "span_id": "s",
        "service": "svc",
        "start": "2024-05-01T12:00:00Z",
    }
    body = json.dumps([base | span])

    with pytest.raises(DataValidationError, match=message):
        decode_span_list(body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not valid JSON"),
        (b"{}", "the span list is invalid"),
        (b'{"spans": []}', "the span list is invalid"),
        (b"[1]", "valid dictionary"),
        (b"not json", "not valid JSON"),
    ],
)
def test_bodies_that_are_not_span_lists_are_rejected(body: bytes, message: str) -> None:
    with pytest.raises(DataValidationError, match=message):
        decode_span_list(body)


def test_models_from_a_framework_body_convert_the_same_way() -> None:
    model = SpanIn.model_validate(
        {"trace_id": "t", "span_id": "s", "service": "svc", "start": T0_NS, "duration_ms": 0.1}
    )

    assert model.to_span().end_ns == T0_NS + 100_000
    assert decode_span_list(b"[]") == []
