"""The real OpenTelemetry SDK exports a 3-service call chain to the running app.

The app runs under uvicorn on a free loopback port; three TracerProviders (gateway ->
ranker -> embedder, each its own ``service.name``) export with the OTLP/HTTP protobuf
exporter to ``/v1/traces``. The ranker is slow (400 ms against a 100 ms SLO): the
background analysis must add nodes to pool ``alpha`` (where the pools file puts the
ranker) and ``/recommendation`` must say so in its explanation.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from api.main import create_app
from api.services import Services
from api.settings import load_app_settings
from forecaster.champion import ChampionForecaster
from forecaster.models.naive import Persistence
from forecaster.registry import LoadedModel
from pipelines.config.pools_file import load_pools
from pipelines.jobs.forecast import run_forecast
from pipelines.store.store import open_store

pytestmark = pytest.mark.timeout(120)

END = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
MS = 1_000_000
POOLS_YAML = """
pools:
  - name: alpha
    node_group_id: ng-alpha
    gpus_per_node: 8
    max_nodes: 40
    lead_time: 10m
    services:
      - {name: gateway, slo_p95_ms: 1000}
      - {name: ranker, slo_p95_ms: 100}
  - name: beta
    node_group_id: ng-beta
    gpus_per_node: 4
    max_nodes: 10
    services:
      - {name: embedder, slo_p95_ms: 300}
"""


def _history(pool: str) -> pd.DataFrame:
    """A day of 5-minute samples: 40 GPUs demanded, 6 nodes, GPUs 70 % busy."""
    ds = pd.date_range(end=END, periods=288, freq="5min", tz="UTC")
    ones = np.ones(len(ds))
    signals = {
        "demand_gpus": 40 * ones,
        "queue_gpus": 8 * ones,
        "allocated_gpus": 32 * ones,
        "nodes": 6 * ones,
        "gpu_util": 70 * ones,
    }
    return pd.concat(
        [pd.DataFrame({"unique_id": f"{pool}/{s}", "ds": ds, "y": y}) for s, y in signals.items()]
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    """The app over a temp store and pools file, served by uvicorn on loopback."""
    pools_file = tmp_path / "pools.yaml"
    pools_file.write_text(POOLS_YAML)
    settings = load_app_settings(root=tmp_path, pools_file=pools_file, horizon=12, max_train_days=1)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.samples.upsert(pd.concat([_history("alpha"), _history("beta")]))
    model = ChampionForecaster({}, {"persistence": Persistence(horizon=12)}, default="persistence")
    model.fit(_history("fit"))
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
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start the app within 30 s")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _export_chain(endpoint: str, traces: int) -> None:
    """Export ``traces`` traces of gateway (450 ms) -> ranker (400 ms) -> embedder (20 ms)."""
    providers = {
        name: TracerProvider(resource=Resource.create({"service.name": name}))
        for name in ("gateway", "ranker", "embedder")
    }
    for provider in providers.values():
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    gateway, ranker, embedder = (p.get_tracer("foresight-test") for p in providers.values())
    propagator = TraceContextTextMapPropagator()
    t0 = time.time_ns()
    for i in range(traces):
        start = t0 + i * 1000 * MS
        g = gateway.start_span("GET /search", kind=SpanKind.SERVER, start_time=start)
        headers: dict[str, str] = {}
        propagator.inject(headers, context=trace.set_span_in_context(g))
        r = ranker.start_span(
            "rank", context=propagator.extract(headers), kind=SpanKind.SERVER,
            start_time=start + 10 * MS,
        )  # fmt: skip
        headers = {}
        propagator.inject(headers, context=trace.set_span_in_context(r))
        e = embedder.start_span(
            "embed", context=propagator.extract(headers), kind=SpanKind.SERVER,
            start_time=start + 20 * MS,
        )  # fmt: skip
        e.end(end_time=start + 40 * MS)
        r.end(end_time=start + 410 * MS)
        g.end(end_time=start + 450 * MS)
    for provider in providers.values():
        assert provider.force_flush(10_000)
        provider.shutdown()


def test_sdk_traces_of_a_slow_service_add_nodes_to_its_pool(base_url: str) -> None:
    before = _get(f"{base_url}/recommendation/alpha")["explanation"]["latency"]

    _export_chain(f"{base_url}/v1/traces", traces=30)

    deadline = time.monotonic() + 20
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = _get(f"{base_url}/recommendation")
        alpha = body["pools"][0]["explanation"]["latency"]
        if alpha["extra_nodes"]:
            break
        time.sleep(0.1)
    alpha, beta = (p["explanation"] for p in body["pools"])
    assert before["extra_nodes"] == 0
    assert alpha["latency"]["extra_nodes"] > 0
    assert alpha["latency"]["applied_nodes"] == alpha["latency"]["extra_nodes"]
    assert "ranker p95 400 ms vs SLO 100 ms" in alpha["latency"]["reason"]
    assert "call-chain latency adds" in alpha["summary"]
    # The gateway is slow only while waiting on the ranker, and the embedder is fast.
    assert beta["latency"]["extra_nodes"] == 0
    metrics = urllib.request.urlopen(f"{base_url}/metrics", timeout=5).read().decode()
    assert 'foresight_latency_extra_nodes{pool="alpha"}' in metrics
    assert 'route="/v1/traces"' in metrics
