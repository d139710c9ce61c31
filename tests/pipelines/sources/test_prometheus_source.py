"""PrometheusSource against a fake Prometheus HTTP API (httpx.MockTransport)."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from forecaster.exceptions import ConfigError, SourceError
from forecaster.types import DS, UID, Y
from pipelines.sources.prometheus import (
    MAX_POINTS,
    PrometheusConfig,
    PrometheusSource,
    Window,
    plan_windows,
)

URL = "http://prom.test:9090"
T0 = pd.Timestamp("2024-05-01T00:00:00Z")
MINUTE = timedelta(minutes=1)
QUERY = 'sum(kube_pod_status_phase{phase="Pending"})'


def value_at(ms: int) -> float:
    """The fake server's one series: a deterministic function of time."""
    return float((ms // 60_000) % 97) + 0.25


@dataclass
class FakePrometheus:
    """Answers query_range like Prometheus; ``faults`` are served first, in order."""

    faults: list[Callable[[httpx.Request], httpx.Response]] = field(default_factory=list)
    series: Callable[[dict[str, str]], list[dict[str, Any]]] | None = None
    requests: list[httpx.Request] = field(default_factory=list)

    def params(self, index: int) -> dict[str, str]:
        form = parse_qs(self.requests[index].content.decode())
        return {key: values[0] for key, values in form.items()}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.faults:
            return self.faults.pop(0)(request)
        assert request.method == "POST"
        assert request.url.path == "/api/v1/query_range"
        params = self.params(len(self.requests) - 1)
        start, end, step = (round(float(params[k]) * 1000) for k in ("start", "end", "step"))
        if (end - start) // step + 1 > MAX_POINTS:
            # Prometheus's own answer to an oversized range.
            return httpx.Response(
                400,
                json={
                    "status": "error",
                    "errorType": "bad_data",
                    "error": "exceeded maximum resolution of 11,000 points per timeseries. "
                    "Try decreasing the query resolution (?step=XX)",
                },
            )
        if self.series is not None:
            result = self.series(params)
        else:
            values = [[t / 1000, repr(value_at(t))] for t in range(start, end + 1, step)]
            result = [{"metric": {}, "values": values}]
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "matrix", "result": result}}
        )


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_source(fake: FakePrometheus, sleeps: Sleeps | None = None, **options: Any) -> Any:
    config = PrometheusConfig(url=URL, **options)
    return PrometheusSource(
        config, transport=httpx.MockTransport(fake), sleep=Sleeps() if sleeps is None else sleeps
    )


def status(code: int, body: Any = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, json=body or {"status": "error", "error": "x"})


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


# --- windows -------------------------------------------------------------------------


def points(window: Window) -> int:
    """The evaluation timestamps of a ``query_range`` window, ends included."""
    return (window.end_ms - window.start_ms) // window.step_ms + 1


def test_exactly_max_points_is_one_request_and_one_more_is_two() -> None:
    end = T0 + (MAX_POINTS - 1) * MINUTE
    assert [points(w) for w in plan_windows(T0, end, MINUTE)] == [MAX_POINTS]
    windows = plan_windows(T0, end + MINUTE, MINUTE)
    assert [points(w) for w in windows] == [MAX_POINTS, 1]
    assert windows[1].start_ms == windows[0].end_ms + 60_000


def test_window_edges_are_aligned_inside_the_requested_range() -> None:
    start = T0 + timedelta(seconds=61)
    end = T0 + timedelta(minutes=5, seconds=59)
    (window,) = plan_windows(start, end, MINUTE)
    assert pd.Timestamp(window.start_ms, unit="ms", tz="UTC") == T0 + 2 * MINUTE
    assert pd.Timestamp(window.end_ms, unit="ms", tz="UTC") == T0 + 5 * MINUTE
    assert window.params("up") == {
        "query": "up",
        "start": f"{(T0 + 2 * MINUTE).timestamp():.3f}",
        "end": f"{(T0 + 5 * MINUTE).timestamp():.3f}",
        "step": "60.000",
    }


def test_window_with_no_aligned_instant_is_empty() -> None:
    assert plan_windows(T0 + timedelta(seconds=1), T0 + timedelta(seconds=59), MINUTE) == []


@pytest.mark.parametrize(
    ("start", "end", "step"),
    [
        (T0, T0 - MINUTE, MINUTE),
        (T0, T0 + MINUTE, timedelta(0)),
        (T0, T0 + MINUTE, timedelta(microseconds=1500)),
    ],
)
def test_invalid_windows_are_rejected(start: Any, end: Any, step: timedelta) -> None:
    with pytest.raises(ValueError, match=r"step|before"):
        plan_windows(start, end, step)


@settings(max_examples=200, deadline=None)
@given(
    offset_s=st.integers(-(10**6), 10**9),
    length_s=st.integers(0, 10**6),
    step_s=st.integers(1, 7200),
    max_points=st.integers(1, 50),
)
def test_windows_cover_every_aligned_instant_once(
    offset_s: int, length_s: int, step_s: int, max_points: int
) -> None:
    start = pd.Timestamp(offset_s, unit="s", tz="UTC")
    end = start + timedelta(seconds=length_s)
    step = timedelta(seconds=step_s)
    if length_s // step_s > 20_000:
        return
    windows = plan_windows(start, end, step, max_points)
    instants = [t for w in windows for t in range(w.start_ms, w.end_ms + 1, w.step_ms)]
    step_ms = step_s * 1000
    start_ms, end_ms = offset_s * 1000, (offset_s + length_s) * 1000
    first = -(-start_ms // step_ms) * step_ms
    expected = list(range(first, end_ms + 1, step_ms))
    assert instants == expected
    assert all(1 <= points(w) <= max_points for w in windows)


# --- fetching ------------------------------------------------------------------------


def test_long_range_is_chunked_and_values_round_trip() -> None:
    fake = FakePrometheus()
    end = T0 + 25_000 * MINUTE
    frame = make_source(fake).fetch({"a100/queue_gpus": QUERY}, T0, end, MINUTE)
    assert len(fake.requests) == 3  # 11,000 + 11,000 + 3,001 points
    assert len(frame) == 25_001
    assert frame[DS].is_unique
    assert frame[DS].is_monotonic_increasing
    assert str(frame[DS].dtype) == "datetime64[ns, UTC]"
    assert frame[DS].iloc[0] == T0
    assert frame[DS].iloc[-1] == end
    expected = [value_at(int(ts.value // 1_000_000)) for ts in frame[DS]]
    np.testing.assert_array_equal(frame[Y].to_numpy(), expected)
    assert set(frame[UID]) == {"a100/queue_gpus"}


def test_several_queries_come_back_sorted_by_series() -> None:
    fake = FakePrometheus()
    queries = {"b/x": "up", "a/x": "up"}
    frame = make_source(fake).fetch(queries, T0, T0 + 2 * MINUTE, MINUTE)
    assert frame[UID].tolist() == ["a/x"] * 3 + ["b/x"] * 3
    assert [fake.params(i)["query"] for i in range(2)] == ["up", "up"]


def test_server_errors_are_retried_with_backoff_then_succeed() -> None:
    fake = FakePrometheus(faults=[status(503), refuse, status(502)])
    sleeps = Sleeps()
    frame = make_source(fake, sleeps, backoff_s=0.5).fetch({"s": QUERY}, T0, T0 + MINUTE, MINUTE)
    assert len(frame) == 2
    assert len(fake.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_retries_exhausted_raise_source_error_naming_url_and_query() -> None:
    fake = FakePrometheus(faults=[refuse] * 10)
    sleeps = Sleeps()
    source = make_source(fake, sleeps, max_attempts=5, backoff_s=1.0, max_backoff_s=3.0)
    with pytest.raises(SourceError) as caught:
        source.fetch({"a100/gpu_util": QUERY}, T0, T0 + MINUTE, MINUTE)
    message = str(caught.value)
    assert URL in message
    assert QUERY in message
    assert "a100/gpu_util" in message
    assert "ConnectError" in message
    assert len(fake.requests) == 5
    assert sleeps == [1.0, 2.0, 3.0, 3.0]


def test_rate_limit_is_retried() -> None:
    fake = FakePrometheus(faults=[status(429)])
    frame = make_source(fake).fetch({"s": QUERY}, T0, T0, MINUTE)
    assert len(frame) == 1
    assert len(fake.requests) == 2


def test_promql_error_is_not_retried_and_carries_prometheus_message() -> None:
    error = 'parse error: unexpected "}" in label matching, expected string'
    body = {"status": "error", "errorType": "bad_data", "error": error}
    fake = FakePrometheus(faults=[status(400, body)] * 3)
    sleeps = Sleeps()
    with pytest.raises(SourceError) as caught:
        make_source(fake, sleeps).fetch({"s": "up{job=}"}, T0, T0 + MINUTE, MINUTE)
    message = str(caught.value)
    assert "up{job=}" in message
    assert error in message
    assert "bad_data" in message
    assert "HTTP 400" in message
    assert len(fake.requests) == 1
    assert sleeps == []


def test_bearer_token_and_extra_headers_are_sent() -> None:
    fake = FakePrometheus()
    source = make_source(
        fake, bearer_token=SecretStr("s3cret-token"), headers=(("X-Scope-OrgID", "team-a"),)
    )
    source.fetch({"s": "up"}, T0, T0, MINUTE)
    headers = fake.requests[0].headers
    assert headers["authorization"] == "Bearer s3cret-token"
    assert headers["x-scope-orgid"] == "team-a"


def test_basic_auth_is_sent() -> None:
    fake = FakePrometheus()
    make_source(fake, username="ops", password=SecretStr("pa:ss")).fetch(
        {"s": "up"}, T0, T0, MINUTE
    )
    expected = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
    assert fake.requests[0].headers["authorization"] == expected


def test_secrets_stay_out_of_reprs_and_errors() -> None:
    config = PrometheusConfig(
        url="https://admin:hunter2@prom.test", bearer_token=SecretStr("tok-123")
    )
    assert "tok-123" not in repr(config)
    assert "hunter2" not in repr(PrometheusSource(config))
    fake = FakePrometheus(faults=[status(500)] * 2)
    source = PrometheusSource(
        PrometheusConfig(url="https://admin:hunter2@prom.test", max_attempts=2),
        transport=httpx.MockTransport(fake),
        sleep=Sleeps(),
    )
    with pytest.raises(SourceError) as caught:
        source.fetch({"s": "up"}, T0, T0, MINUTE)
    assert "hunter2" not in str(caught.value)
    assert "https://prom.test" in str(caught.value)


def test_nan_and_infinite_values_become_nan() -> None:
    def series(params: dict[str, str]) -> list[dict[str, Any]]:
        start = float(params["start"])
        values = [[start + 60 * i, v] for i, v in enumerate(["1.5", "NaN", "+Inf", "-Inf", "2"])]
        return [{"metric": {}, "values": values}]

    frame = make_source(FakePrometheus(series=series)).fetch(
        {"s": "up"}, T0, T0 + 4 * MINUTE, MINUTE
    )
    assert len(frame) == 5
    y = frame[Y].tolist()
    assert y[0] == 1.5
    assert y[4] == 2.0
    assert all(math.isnan(v) for v in y[1:4])


def two_series(params: dict[str, str]) -> list[dict[str, Any]]:
    start = float(params["start"])
    return [
        {"metric": {"gpu": "0", "Hostname": "n1"}, "values": [[start, "1"], [start + 60, "2"]]},
        {"metric": {"gpu": "1", "Hostname": "n1"}, "values": [[start, "10"], [start + 60, "NaN"]]},
        {"metric": {"gpu": "2", "Hostname": "n2"}, "values": [[start + 120, "5"]]},
    ]


def test_several_series_are_an_error_listing_their_labels_by_default() -> None:
    source = make_source(FakePrometheus(series=two_series))
    with pytest.raises(SourceError) as caught:
        source.fetch({"a100/gpu_util": "DCGM_FI_DEV_GPU_UTIL"}, T0, T0 + 2 * MINUTE, MINUTE)
    message = str(caught.value)
    assert "returned 3 series" in message
    assert '{Hostname="n1", gpu="0"}' in message
    assert "DCGM_FI_DEV_GPU_UTIL" in message
    assert "on_multiple='sum'" in message


def test_several_series_are_summed_per_timestamp_when_asked() -> None:
    source = make_source(FakePrometheus(series=two_series), on_multiple="sum")
    frame = source.fetch({"s": "DCGM_FI_DEV_GPU_UTIL"}, T0, T0 + 2 * MINUTE, MINUTE)
    assert frame[DS].tolist() == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
    y = frame[Y].tolist()
    assert y[0] == 11.0
    assert math.isnan(y[1])  # a NaN term makes the sum NaN, as in PromQL
    assert y[2] == 5.0


def test_empty_result_adds_no_rows() -> None:
    frame = make_source(FakePrometheus(series=lambda params: [])).fetch(
        {"s": "absent_metric"}, T0, T0 + MINUTE, MINUTE
    )
    assert frame.empty
    assert list(frame.columns) == [UID, DS, Y]
    assert str(frame[DS].dtype) == "datetime64[ns, UTC]"


def test_fractional_timestamps_are_rounded_to_milliseconds() -> None:
    def series(params: dict[str, str]) -> list[dict[str, Any]]:
        return [{"metric": {}, "values": [[1714521600.1229999, "3"]]}]

    frame = make_source(FakePrometheus(series=series)).fetch({"s": "up"}, T0, T0, MINUTE)
    assert frame[DS].iloc[0] == pd.Timestamp("2024-05-01T00:00:00.123Z")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (lambda r: httpx.Response(200, text="<html>login</html>"), "not JSON"),
        (lambda r: httpx.Response(200, json={"status": "error", "error": "boom"}), "boom"),
        (
            lambda r: httpx.Response(
                200, json={"status": "success", "data": {"resultType": "vector", "result": []}}
            ),
            "expected 'matrix'",
        ),
    ],
)
def test_unexpected_answers_are_source_errors(
    response: Callable[[httpx.Request], httpx.Response], expected: str
) -> None:
    fake = FakePrometheus(faults=[response])
    with pytest.raises(SourceError, match=expected):
        make_source(fake).fetch({"s": "up"}, T0, T0, MINUTE)
    assert len(fake.requests) == 1


def test_url_path_prefix_is_kept() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
        return httpx.Response(200, json=body)

    config = PrometheusConfig(url="https://gw.test/prometheus/")
    PrometheusSource(config, transport=httpx.MockTransport(handler)).fetch(
        {"s": "up"}, T0, T0, MINUTE
    )
    assert seen == ["/prometheus/api/v1/query_range"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"url": "prom:9090"}, "http"),
        ({"url": URL, "max_points": MAX_POINTS + 1}, "max_points"),
        ({"url": URL, "max_attempts": 0}, "max_attempts"),
        ({"url": URL, "timeout_s": 0}, "timeout_s"),
        ({"url": URL, "username": "ops"}, "both username and password"),
        (
            {
                "url": URL,
                "bearer_token": SecretStr("t"),
                "username": "u",
                "password": SecretStr("p"),
            },
            "not both",
        ),
        ({"url": URL, "verify_tls": False, "ca_file": Path("ca.pem")}, "verify_tls"),
    ],
)
def test_invalid_config_is_a_config_error(options: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        PrometheusConfig(**options)


def test_missing_ca_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConfigError, match=r"ca\.pem"):
        PrometheusSource(PrometheusConfig(url="https://prom.test", ca_file=missing))


def test_source_is_reusable_until_closed() -> None:
    fake = FakePrometheus()
    with make_source(fake) as source:
        first = source.fetch({"s": "up"}, T0, T0 + MINUTE, MINUTE)
        second = source.fetch({"s": "up"}, T0, T0 + MINUTE, MINUTE)
    pd.testing.assert_frame_equal(first, second)
    assert len(fake.requests) == 2
    with pytest.raises(RuntimeError):
        source.fetch({"s": "up"}, T0, T0, MINUTE)
