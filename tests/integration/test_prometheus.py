"""PrometheusSource against a real Prometheus holding a real GPU-cluster trace.

The Helios "Earth" cluster trace (``../shared/data``) is written as the metrics the
default queries read (kube-state-metrics, DCGM exporter, Kueue) for pool
``a100-train``, plus a decoy pool the queries must leave out, shifted to end a day
ago, backfilled with ``promtool`` and served by ``prometheus``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import SourceError
from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.signals import SIGNALS
from pipelines.sources.prometheus import MAX_POINTS, OnMultiple, PrometheusConfig, PrometheusSource
from pipelines.sources.queries import KUEUE_PENDING_WORKLOADS, promql_queries
from tests.integration.prometheus_server import (
    Binaries,
    PrometheusServer,
    Series,
    backfill,
    require_binaries,
    write_openmetrics,
)

pytestmark = pytest.mark.integration

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TRACE = SHARED / "helios_earth_total_10min.csv"
STEP = timedelta(minutes=10)
POOL = PoolConfig(name="a100-train", node_group_id="eks-a100-train")
DECOY = "h100-train"
NODES_IN_POOL = 8
CUSTOM_QUERY = 'helios_allocated_gpus{cluster="earth"}'


@dataclass(frozen=True)
class History:
    """What was backfilled: the expected value of each signal per shifted timestamp."""

    ds: pd.DatetimeIndex
    expected: pd.DataFrame  # columns: the signals, plus "kueue" and "custom"


@dataclass(frozen=True)
class Backfilled:
    history: History
    blocks: Path
    samples: int
    seconds: float


def _series(trace: pd.DataFrame) -> tuple[list[Series], pd.DataFrame]:
    """The exporters' series of the trace and what each query should return."""
    n = len(trace)
    one, zero = np.ones(n), np.zeros(n)
    pending = trace["pending_gpus"].to_numpy(float)
    allocated = trace["allocated_gpus"].to_numpy(float)
    util = trace["gpu_alloc_frac"].to_numpy(float) * 100.0
    ready = np.clip(np.ceil(trace["gpu_alloc_frac"].to_numpy(float) * NODES_IN_POOL), 0, 8)
    gpu = {"resource": "nvidia_com_gpu", "unit": "integer", "container": "main"}
    pods = {  # pod -> (pool, phase, node, GPUs requested)
        "queued-0": (POOL.name, "Pending", None, pending),
        "train-0": (POOL.name, "Running", "a100-0", allocated),
        "queued-d": (DECOY, "Pending", None, one * 3),
        "train-d": (DECOY, "Running", "h100-0", one * 7),
    }
    series = [
        Series("helios_allocated_gpus", {"cluster": "earth"}, allocated),
        Series("helios_pending_gpus", {"cluster": "earth"}, pending),
    ]
    for pod, (pool, phase, node, gpus) in pods.items():
        ids = {"namespace": "ml", "pod": pod}
        placed = {**ids, "node": node} if node else ids
        series.append(Series("kube_pod_container_resource_requests", {**placed, **gpu}, gpus))
        cpu = {**placed, "resource": "cpu", "unit": "core", "container": "main"}
        series.append(Series("kube_pod_container_resource_requests", cpu, one * 4))
        for state in ("Pending", "Running"):
            value = one if state == phase else zero
            series.append(Series("kube_pod_status_phase", {**ids, "phase": state}, value))
        series.append(Series("kube_pod_labels", {**ids, "label_foresight_io_pool": pool}, one))
    nodes = [(f"a100-{i}", POOL.name, (ready > i).astype(float)) for i in range(NODES_IN_POOL)]
    nodes.append(("h100-0", DECOY, one))
    for node, pool, is_ready in nodes:
        series.append(
            Series("kube_node_labels", {"node": node, "label_foresight_io_pool": pool}, one)
        )
        for status, value in (("true", is_ready), ("false", 1.0 - is_ready)):
            labels = {"node": node, "condition": "Ready", "status": status}
            series.append(Series("kube_node_status_condition", labels, value))
    for host, value in (("a100-0", util), ("h100-0", one * 3)):
        labels = {"gpu": "0", "UUID": f"GPU-{host}", "Hostname": host}
        series.append(Series("DCGM_FI_DEV_GPU_UTIL", labels, value))
    for status, value in (
        ("active", trace["pending_gpu_jobs"].to_numpy(float)),
        ("inadmissible", zero),
    ):
        labels = {"cluster_queue": POOL.name, "status": status}
        series.append(Series("kueue_pending_workloads", labels, value))
    expected = pd.DataFrame(
        {
            "queue_gpus": pending,
            "allocated_gpus": allocated,
            "gpu_util": util,
            "nodes": ready,
            "kueue": trace["pending_gpu_jobs"].to_numpy(float),
            "custom": allocated,
        }
    )
    return series, expected


@pytest.fixture(scope="module")
def binaries() -> Binaries:
    return require_binaries()


@pytest.fixture(scope="module")
def backfilled(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Backfilled:
    if not TRACE.is_file():
        pytest.skip(f"shared data not found at {TRACE.resolve()}; Prometheus tests skipped")
    trace = pd.read_csv(TRACE, parse_dates=["timestamp"])
    original = pd.DatetimeIndex(trace["timestamp"]).tz_localize("UTC")
    # Shift whole steps so the history ends a day ago, on the 10-min grid.
    end = (pd.Timestamp.now(tz="UTC") - timedelta(days=1)).floor("10min")
    ds = original + (end - original[-1])
    series, expected = _series(trace)
    root = tmp_path_factory.mktemp("prometheus")
    openmetrics = root / "history.om"
    samples = write_openmetrics(openmetrics, [int(t.timestamp()) for t in ds], series)
    seconds = backfill(binaries, openmetrics, root / "blocks")
    openmetrics.unlink()
    return Backfilled(History(ds, expected), root / "blocks", samples, seconds)


def _serve(binaries: Binaries, backfilled: Backfilled, name: str) -> PrometheusServer:
    tsdb = backfilled.blocks.parent / name / "data"
    shutil.copytree(backfilled.blocks, tsdb)
    return PrometheusServer(binaries, tsdb).start()


@pytest.fixture(scope="module")
def prometheus(binaries: Binaries, backfilled: Backfilled) -> Iterator[PrometheusServer]:
    server = _serve(binaries, backfilled, "shared")
    try:
        yield server
    finally:
        server.stop()


SourceFactory = Callable[..., PrometheusSource]


@pytest.fixture
def make_source() -> Iterator[SourceFactory]:
    """Build sources for a test and close their connections afterwards."""
    made: list[PrometheusSource] = []

    def make(
        url: str, *, max_points: int = MAX_POINTS, on_multiple: OnMultiple = "error"
    ) -> PrometheusSource:
        config = PrometheusConfig(
            url=url, timeout_s=10, max_points=max_points, on_multiple=on_multiple, trust_env=False
        )
        made.append(PrometheusSource(config))
        return made[-1]

    yield make
    for source in made:
        source.close()


def _assert_round_trip(frame: pd.DataFrame, uid: str, ds: pd.DatetimeIndex, y: pd.Series) -> None:
    got = frame[frame[UID] == uid]
    assert pd.DatetimeIndex(got[DS]).equals(ds), f"{uid}: timestamps differ"
    np.testing.assert_array_equal(got[Y].to_numpy(), y.to_numpy(), err_msg=uid)


def test_backfill_is_fast_with_month_blocks(backfilled: Backfilled) -> None:
    assert backfilled.samples > 200_000
    assert backfilled.seconds < 20, f"backfill took {backfilled.seconds:.1f} s"


def test_custom_query_round_trips_exactly_in_chunks(
    prometheus: PrometheusServer, backfilled: Backfilled, make_source: SourceFactory
) -> None:
    history = backfilled.history
    source = make_source(prometheus.url, max_points=1000)  # 4,464 points: five requests
    began = time.monotonic()
    frame = source.fetch(
        {"earth/allocated_gpus": CUSTOM_QUERY}, history.ds[0], history.ds[-1], STEP
    )
    elapsed = time.monotonic() - began
    assert len(frame) == len(history.ds)
    _assert_round_trip(frame, "earth/allocated_gpus", history.ds, history.expected["custom"])
    print(f"ingest: {len(frame)} samples in {elapsed:.3f} s ({len(frame) / elapsed:,.0f}/s)")


def test_default_queries_are_valid_and_read_the_pool_only(
    prometheus: PrometheusServer, backfilled: Backfilled, make_source: SourceFactory
) -> None:
    history = backfilled.history
    queries = promql_queries([POOL])
    assert set(queries) == {POOL.series_id(signal) for signal in SIGNALS}
    frame = make_source(prometheus.url).fetch(queries, history.ds[0], history.ds[-1], STEP)
    for signal in SIGNALS:
        _assert_round_trip(frame, POOL.series_id(signal), history.ds, history.expected[signal])


def test_kueue_alternative_query(
    prometheus: PrometheusServer, backfilled: Backfilled, make_source: SourceFactory
) -> None:
    history = backfilled.history
    pool = PoolConfig(
        name=POOL.name,
        node_group_id=POOL.node_group_id,
        signals={"queue_gpus": {"promql": KUEUE_PENDING_WORKLOADS}},
    )
    queries = promql_queries([pool], signals=["queue_gpus"])
    start = history.ds[-145]
    frame = make_source(prometheus.url).fetch(queries, start, history.ds[-1], STEP)
    _assert_round_trip(
        frame, pool.series_id("queue_gpus"), history.ds[-145:], history.expected["kueue"][-145:]
    )


def test_promql_error_names_query_and_prometheus_message(
    prometheus: PrometheusServer, make_source: SourceFactory
) -> None:
    now = pd.Timestamp.now(tz="UTC")
    broken = 'sum(kube_node_labels{label_foresight_io_pool="a100-train"}'
    with pytest.raises(SourceError) as caught:
        make_source(prometheus.url).fetch({"a100-train/nodes": broken}, now - STEP, now, STEP)
    message = str(caught.value)
    assert broken in message
    assert "parse error" in message
    assert "HTTP 400" in message


def test_several_series_error_or_sum(
    prometheus: PrometheusServer, backfilled: Backfilled, make_source: SourceFactory
) -> None:
    last = backfilled.history.ds[-1]
    query = {"x": 'kube_node_labels{label_foresight_io_pool="a100-train"}'}
    with pytest.raises(SourceError, match="returned 8 series"):
        make_source(prometheus.url).fetch(query, last - STEP, last, STEP)
    summed = make_source(prometheus.url, on_multiple="sum").fetch(query, last - STEP, last, STEP)
    assert summed[Y].tolist() == [8.0, 8.0]


def test_queries_outside_the_history_are_empty(
    prometheus: PrometheusServer, backfilled: Backfilled, make_source: SourceFactory
) -> None:
    first = backfilled.history.ds[0]
    frame = make_source(prometheus.url).fetch(
        {"x": CUSTOM_QUERY}, first - timedelta(days=2), first - timedelta(days=1), STEP
    )
    assert frame.empty


class _KillAfter(httpx.BaseTransport):
    """Forwards requests; SIGKILLs the server once ``count`` answers have arrived."""

    def __init__(self, server: PrometheusServer, count: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.server = server
        self.count = count
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        response = self.inner.handle_request(request)
        response.read()  # the whole answer is in before the crash
        if self.sent == self.count:
            self.server.kill()
        return response

    def close(self) -> None:
        self.inner.close()


def test_prometheus_killed_mid_ingest_retries_then_fails_and_recovers(
    binaries: Binaries, backfilled: Backfilled
) -> None:
    history = backfilled.history
    queries = {"earth/allocated_gpus": CUSTOM_QUERY}
    server = _serve(binaries, backfilled, "crash")
    transport = _KillAfter(server, count=2)
    config = PrometheusConfig(
        url=server.url,
        timeout_s=5,
        max_points=1000,
        max_attempts=3,
        backoff_s=0.05,
        trust_env=False,
    )
    try:
        with PrometheusSource(config, transport=transport) as source:
            with pytest.raises(SourceError) as caught:
                source.fetch(queries, history.ds[0], history.ds[-1], STEP)
            message = str(caught.value)
            assert server.url in message
            assert CUSTOM_QUERY in message
            assert "failed 3 tries" in message
            assert transport.sent == 2 + 3  # two answered windows, then three tries of the third

            # Back on the same data and port: the same source's next run gets everything.
            server.start()
            frame = source.fetch(queries, history.ds[0], history.ds[-1], STEP)
        _assert_round_trip(frame, "earth/allocated_gpus", history.ds, history.expected["custom"])
        assert transport.sent == 5 + 5
    finally:
        server.stop()
