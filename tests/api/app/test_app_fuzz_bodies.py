"""Hostile bodies for every POST route: never a 5xx, never a hang, memory bounded (#13).

The bodies the probing in issue #13 used, and their relatives: deep nesting, huge
integers and digit strings, invalid UTF-8, corrupt and bomb gzip, non-finite numbers,
wrong types, impossible times, unknown signals, empty and near-limit bodies. Each is
sent to every POST route with each content type the route takes; the answer must be
a 4xx (or 200 for what is valid) within a few seconds, and the Python heap must not
grow by more than :data:`MAX_PEAK_BYTES` while it is handled.
"""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from typing import Final

import pytest
from fastapi.testclient import TestClient

MAX_SECONDS: Final = 10.0
MAX_PEAK_BYTES: Final = 256 * 1024 * 1024
JSON: Final = "application/json"
PROTOBUF: Final = "application/x-protobuf"
AT: Final = "2025-03-31T00:00:00Z"


def _sample(**changes: object) -> bytes:
    sample: dict[str, object] = {"series_id": "alpha/nodes", "ts": AT, "value": 3}
    sample.update(changes)
    return json.dumps([sample]).encode()


def _span(**changes: object) -> bytes:
    span: dict[str, object] = {
        "trace_id": "t",
        "span_id": "s",
        "service": "gw",
        "start": 1,
        "duration_ms": 1,
    }
    span.update(changes)
    return json.dumps([span]).encode()


def _otlp(start: str) -> bytes:
    return (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00","spanId":"00",'
        f'"name":"x","startTimeUnixNano":{start},"endTimeUnixNano":"2"}}]}}]}}]}}'
    ).encode()


DEEP = 100_000
BODIES: Final[dict[str, tuple[bytes, dict[str, str]]]] = {
    "nested_arrays": (b"[" * DEEP + b"]" * DEEP, {}),
    "nested_objects": (b'{"a":' * DEEP + b"1" + b"}" * DEEP, {}),
    "int_5000_digits": (_sample(value=None).replace(b"null", b"1" * 5000), {}),
    "otlp_int_5000_digits": (_otlp("1" * 5000), {}),
    "otlp_digit_string": (_otlp('"1' + "0" * 5000 + '"'), {}),
    "invalid_utf8": (b'[{"series_id": "\xff\xfe", "ts": "x", "value": 1}]', {}),
    "gzip_corrupt": (b"\x1f\x8b\x08\x00garbage", {"content-encoding": "gzip"}),
    "gzip_bomb": (gzip.compress(b"[" + b" " * 50_000_000 + b"]"), {"content-encoding": "gzip"}),
    "unknown_encoding": (b"[]", {"content-encoding": "br"}),
    "nan": (b'[{"series_id": "alpha/nodes", "ts": "2025-03-31T00:00:00Z", "value": NaN}]', {}),
    "huge_float": (_sample(value=None).replace(b"null", b"1e400"), {}),
    "string_value": (_sample(value="12"), {}),
    "bool_value": (_sample(value=True), {}),
    "null_everything": (b'[{"series_id": null, "ts": null, "value": null}]', {}),
    "far_future": (_sample(ts="2262-04-01T00:00:00Z"), {}),
    "year_9999": (_sample(ts="9999-12-31T23:59:59Z"), {}),
    "epoch": (_sample(ts="1970-01-01T00:00:00Z"), {}),
    "numeric_ts": (_sample(ts=0), {}),
    "unknown_signal": (_sample(series_id="alpha/junk"), {}),
    "span_huge_duration": (_span(duration_ms=1e308), {}),
    "span_negative": (_span(duration_ms=-1, start=-(10**30)), {}),
    "empty": (b"", {}),
    "whitespace": (b"   \n", {}),
    "null": (b"null", {}),
    "object": (b"{}", {}),
    "long_string": (json.dumps([{"series_id": "a" * 3_000_000}]).encode(), {}),
    "many_unknown_series": (
        json.dumps(
            [{"series_id": f"alpha/s{i}", "ts": AT, "value": 1} for i in range(10_000)]
        ).encode(),
        {},
    ),
}

ROUTES: Final = (
    ("/signals/metrics", JSON),
    ("/signals/spans", JSON),
    ("/v1/traces", JSON),
    ("/v1/traces", PROTOBUF),
)


def _cases() -> list[object]:
    cases: list[object] = []
    for path, content_type in ROUTES:
        for name in BODIES:
            cases.append(pytest.param(path, content_type, name, id=f"{path}-{content_type}-{name}"))
    return cases


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("path", "content_type", "name"), _cases())
def test_no_body_yields_a_5xx_a_hang_or_unbounded_memory(
    client: TestClient, path: str, content_type: str, name: str
) -> None:
    body, headers = BODIES[name]
    tracemalloc.start()
    try:
        started = time.monotonic()
        response = client.post(
            path, content=body, headers={"content-type": content_type, **headers}
        )
        took = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response.status_code < 500, response.text[:500]
    assert took < MAX_SECONDS
    assert peak < MAX_PEAK_BYTES
    if response.status_code >= 400 and path != "/v1/traces":
        assert {"error", "message"} <= set(response.json())
