"""Issue #18's scenarios end to end: the real OpenTelemetry SDK exports to the running app.

Chain gateway -> preprocess (CPU, on no GPU pool) -> ranker (pool ``rank``) -> llm
(pool ``llm``), each service its own TracerProvider with BatchSpanProcessor and the
OTLP/HTTP protobuf exporter pointed at ``/v1/traces`` of the app under uvicorn. The
spans carry explicit start and end times, so each scenario sets the durations it needs
without sleeping. The app's span window folds spans in at once (no settle delay) and
forgets them after 10 s, and the analysis runs every 0.2 s.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from api.callchain.incremental import ChainWindow
from api.main import create_app
from api.services import Services
from api.settings import load_app_settings
from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence
from forecaster.registry import LoadedModel
from pipelines.config.pools_file import load_pools
from pipelines.jobs.forecast import run_forecast
from pipelines.store.store import open_store
from tests.integration.test_otel_export import _free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

END = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
MS = 1_000_000
CHAIN = ("gateway", "preprocess", "ranker", "llm")
POOLS_YAML = """
pools:
  - name: rank
    node_group_id: ng-rank
    max_nodes: 40
    services:
      - {name: ranker, slo_p95_ms: 500}
  - name: llm
    node_group_id: ng-llm
    max_nodes: 40
    services:
      - {name: llm, slo_p95_ms: 400}
services:
  - {name: preprocess, slo_p95_ms: 560}
"""


def _history(pool: str, util: float) -> pd.DataFrame:
    ds = pd.date_range(end=END, periods=288, freq="5min", tz="UTC")
    ones = np.ones(len(ds))
    signals = {
        "demand_gpus": 40 * ones,
        "queue_gpus": 8 * ones,
        "allocated_gpus": 32 * ones,
        "nodes": 6 * ones,
        "gpu_util": util * ones,
    }
    return pd.concat(
        [pd.DataFrame({"unique_id": f"{pool}/{s}", "ds": ds, "y": y}) for s, y in signals.items()]
    )


@dataclass
class App:
    url: str

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as response:
            return json.load(response)

    def text(self, path: str) -> str:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as response:
            return str(response.read().decode())

    def wait_for(self, check: Callable[[dict[str, Any]], bool], timeout: float = 60) -> Any:
        """Poll /signals/chain until ``check`` holds; return the last body."""
        deadline = time.monotonic() + timeout
        body = self.get("/signals/chain")
        while not check(body):
            assert time.monotonic() < deadline, f"condition never held: {body}"
            time.sleep(0.1)
            body = self.get("/signals/chain")
        return body

    def verdicts(self, body: dict[str, Any]) -> dict[str, str]:
        return {s["service"]: s["verdict"] for s in body["services"]}


def _serve(
    tmp_path: Path,
    utils: dict[str, float],
    pools_yaml: str = POOLS_YAML,
    settle: timedelta = timedelta(0),
) -> Iterator[App]:
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(pools_yaml)
    settings = load_app_settings(root=tmp_path, pools_file=pools_file, horizon=12, max_train_days=1)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.samples.upsert(pd.concat([_history(pool, util) for pool, util in utils.items()]))
    model = ChampionForecaster({}, {"persistence": Persistence(horizon=12)}, default="persistence")
    model.fit(_history("fit", 50))
    champion = LoadedModel(model=model, version="1", source="registry")
    # The API serves what the forecast job stored (as `foresight serve` runs it first).
    made = run_forecast(settings, store=store, now=END, champion=champion)
    assert made.outcome in ("ok", "partial"), made.summary
    services = Services(
        settings,
        load_pools(pools_file),
        store,
        champion,
        clock=lambda: END,
        owns_store=True,
        spans=ChainWindow(
            max_age=timedelta(seconds=10), settle=settle, bucket=timedelta(seconds=1)
        ),
    )
    port = _free_port()
    app = create_app(services=services, refresh_seconds=None, analysis_seconds=0.2)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn exited before it started"
        assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
        time.sleep(0.05)
    try:
        yield App(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """GPUs busy on both pools."""
    yield from _serve(tmp_path, {"rank": 90.0, "llm": 95.0})


@pytest.fixture
def idle_rank_app(tmp_path: Path) -> Iterator[App]:
    """The issue's case: llm's GPUs at 95 %, the ranker's pool idle at 15 %."""
    yield from _serve(tmp_path, {"rank": 15.0, "llm": 95.0})


@pytest.fixture
def tight_ranker_app(tmp_path: Path) -> Iterator[App]:
    """ranker's SLO (300 ms) is tighter than its callee llm's (400 ms)."""
    yield from _serve(
        tmp_path,
        {"rank": 90.0, "llm": 95.0},
        POOLS_YAML.replace("slo_p95_ms: 500", "slo_p95_ms: 300"),
    )


class Counting(SpanExporter):
    """The real OTLP exporter, counting the spans of successful and failed exports."""

    def __init__(self, endpoint: str) -> None:
        self.inner = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        self.ok = 0
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.ok += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


def export(
    app: App, traces: int, own_ms: dict[str, int], *, skewed: int = 0
) -> dict[str, Counting]:
    """Export ``traces`` traces of the chain; ``own_ms`` is each service's own work.

    Each service works ``own_ms`` before calling the next one and 1 ms after it returns,
    so its exclusive time is ``own_ms + 1`` and its duration adds its callees'.
    ``skewed`` extra llm spans end before they start (a sender with a skewed clock).
    """
    exporters = {name: Counting(f"{app.url}/v1/traces") for name in CHAIN}
    providers = {}
    for name in CHAIN:
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        provider.add_span_processor(BatchSpanProcessor(exporters[name]))
        providers[name] = provider
    tracers = [providers[name].get_tracer("foresight-test") for name in CHAIN]
    t0 = time.time_ns()
    for i in range(traces):
        start = t0 + i * 2000 * MS
        opened = []
        context = None
        at = start
        for name, tracer in zip(CHAIN, tracers, strict=True):
            span = tracer.start_span(name, context=context, kind=SpanKind.SERVER, start_time=at)
            opened.append((span, name))
            context = trace.set_span_in_context(span)
            at += own_ms[name] * MS
        for span, _ in reversed(opened):
            at += 1 * MS
            span.end(end_time=at)
    for i in range(skewed):
        bad = tracers[3].start_span("gen", start_time=t0 + i * MS + 10 * MS)
        bad.end(end_time=t0 + i * MS)
    for provider in providers.values():
        assert provider.force_flush(10_000)
        provider.shutdown()
    return exporters


HEALTHY = {"gateway": 5, "preprocess": 20, "ranker": 30, "llm": 200}


def test_healthy_chain_blames_no_one_and_adds_nothing(app: App) -> None:
    export(app, 30, HEALTHY)

    body = app.wait_for(lambda b: sum(s.get("call_count") or 0 for s in b["services"]) >= 120)

    assert body["bottlenecks"] == []
    verdicts = app.verdicts(body)
    assert verdicts["llm"] == "ok"
    assert verdicts["preprocess"] == "ok"
    assert all(pool["extra_nodes"] == 0 for pool in body["pools"].values())
    llm = next(s for s in body["services"] if s["service"] == "llm")
    assert llm["p95_ms"] == pytest.approx(201, rel=0.01)


def test_gpu_bottleneck_lifts_its_pool_and_idle_callers_pool_is_not_called_idle(
    idle_rank_app: App,
) -> None:
    app = idle_rank_app
    export(app, 30, {**HEALTHY, "llm": 800})

    body = app.wait_for(lambda b: b["bottlenecks"] == ["llm"])

    verdicts = app.verdicts(body)
    assert verdicts["llm"] == "bottleneck"
    assert body["pools"]["llm"]["extra_nodes"] > 0
    assert verdicts["ranker"] == "waiting_on_callee"
    rank = body["pools"]["rank"]
    assert (rank["extra_nodes"], rank["not_gpu_bound"]) == (0, False)
    recs = {r["pool"]: r for r in app.get("/recommendation")["pools"]}
    assert recs["llm"]["explanation"]["latency"]["applied_nodes"] > 0
    reason = recs["llm"]["explanation"]["latency"]["reason"]
    assert "llm p95 80" in reason
    assert "ms vs SLO 400 ms" in reason
    assert "not GPU-bound" not in recs["rank"]["explanation"]["summary"]


def test_downstream_blame_reports_exclusive_own_time(app: App) -> None:
    export(app, 30, {**HEALTHY, "llm": 800})

    body = app.wait_for(lambda b: b["bottlenecks"] == ["llm"])

    ranker = next(s for s in body["services"] if s["service"] == "ranker")
    # ranker lasts 30 + 801 + 1 ms but only 31 ms of it is its own work.
    assert ranker["p95_ms"] == pytest.approx(832, rel=0.01)
    assert ranker["own_p95_ms"] == pytest.approx(31, rel=0.01)
    assert (ranker["status"], ranker["culprit"]) == ("slow", False)
    assert "not blamed" in ranker["note"]
    gateway = next(s for s in body["services"] if s["service"] == "gateway")
    assert gateway["own_p95_ms"] == pytest.approx(6, rel=0.02)


def test_cpu_bottleneck_outside_gpu_pools_is_reported_and_buys_nothing(app: App) -> None:
    export(app, 30, {**HEALTHY, "preprocess": 400})

    # Every span in (on a loaded machine an early analysis may see part of them), then
    # the verdict.
    body = app.wait_for(
        lambda b: (
            all(s.get("call_count") == 30 for s in b["services"])
            and b["bottlenecks"] == ["preprocess"]
        )
    )

    pre = next(s for s in body["services"] if s["service"] == "preprocess")
    assert (pre["pool"], pre["verdict"]) == (None, "outside_gpu_pools")
    assert pre["slows_pools"] == ["llm", "rank"]
    assert pre["own_p95_ms"] == pytest.approx(401, rel=0.01)
    for pool in ("llm", "rank"):
        assert body["pools"][pool]["extra_nodes"] == 0
        assert "bottleneck outside every GPU pool" in body["pools"][pool]["reason"]
    recs = {r["pool"]: r for r in app.get("/recommendation")["pools"]}
    assert all(r["explanation"]["latency"]["applied_nodes"] == 0 for r in recs.values())
    assert "preprocess p95 6" in recs["llm"]["explanation"]["latency"]["reason"]
    metrics = app.text("/metrics")
    assert (
        'foresight_service_bottleneck{pool="",service="preprocess",verdict="outside_gpu_pools"}'
        " 1.0" in metrics
    )


def test_recovery_clears_the_bottleneck_once_slow_spans_leave_the_window(app: App) -> None:
    export(app, 30, {**HEALTHY, "llm": 800})
    app.wait_for(lambda b: b["bottlenecks"] == ["llm"])

    time.sleep(11)  # the window is 10 s: the slow spans expire
    export(app, 30, HEALTHY)
    body = app.wait_for(
        lambda b: app.verdicts(b).get("llm") == "ok" and b["pools"]["llm"]["extra_nodes"] == 0
    )

    assert app.verdicts(body)["llm"] == "ok"
    recs = {r["pool"]: r for r in app.get("/recommendation")["pools"]}
    assert recs["llm"]["explanation"]["latency"]["extra_nodes"] == 0


def test_partial_success_keeps_the_valid_spans_of_an_sdk_batch(app: App) -> None:
    exporters = export(app, 30, HEALTHY, skewed=3)

    # Before partial success the whole llm batch was a 400 and the SDK counted it failed.
    assert exporters["llm"].failed == 0
    assert exporters["llm"].ok == 33
    body = app.wait_for(
        lambda b: any(s["service"] == "llm" and "span_count" in s for s in b["services"])
    )
    llm = next(s for s in body["services"] if s["service"] == "llm")
    assert llm["span_count"] == 30


def test_a_caller_with_healthy_own_time_is_not_blamed_for_a_callee_over_its_slo(
    tight_ranker_app: App,
) -> None:
    app = tight_ranker_app
    # Healthy traffic first, long enough for every service's usual exclusive time to be
    # learnt (5 analyses with at least 20 calls each; the analysis runs every 0.2 s).
    export(app, 30, HEALTHY)
    app.wait_for(lambda b: all(s.get("call_count") == 30 for s in b["services"]))
    # analysed_at is on the decision clock (fixed here), so it cannot count analyses:
    # wait for a dozen analysis periods of wall time instead.
    time.sleep(12 * 0.2)
    assert app.verdicts(app.get("/signals/chain"))["ranker"] == "ok"  # 232 of 300 ms

    # llm slows to 800 ms. ranker now lasts 832 ms; even with llm back at its 400 ms SLO
    # it would last 432 ms, over its own 300 ms, so subtracting llm's excess used to
    # blame ranker (and gateway, judged by its baseline) although their own work is
    # unchanged: 31 and 6 ms.
    export(app, 30, {**HEALTHY, "llm": 800})
    body = app.wait_for(
        lambda b: (
            all(s.get("call_count") == 60 for s in b["services"]) and "llm" in b["bottlenecks"]
        )
    )

    assert body["bottlenecks"] == ["llm"]
    ranker = next(s for s in body["services"] if s["service"] == "ranker")
    assert (ranker["status"], ranker["culprit"]) == ("slow", False)
    assert ranker["verdict"] == "waiting_on_callee"
    assert body["pools"]["rank"]["extra_nodes"] == 0
    assert body["pools"]["llm"]["extra_nodes"] > 0
    assert ranker["own_p95_ms"] == pytest.approx(31, rel=0.01)
    assert ranker["own_baseline_p95_ms"] == pytest.approx(31, rel=0.01)
    assert "usual 31 ms" in ranker["note"]
    gateway = next(s for s in body["services"] if s["service"] == "gateway")
    assert gateway["threshold_source"] == "baseline"
    assert gateway["culprit"] is False
    recs = {r["pool"]: r for r in app.get("/recommendation")["pools"]}
    assert recs["rank"]["explanation"]["latency"]["applied_nodes"] == 0
