"""Ingest faults against real servers: Prometheus dying mid-ingest, a database that is down.

A real trace (Helios "Earth", ``../shared/data``) is backfilled into a real Prometheus
with ``promtool``, shifted to end a day ago. The ingest job reads it through custom
queries; the server is SIGKILLed between two requests of a run. That run must fail
without writing anything, and once the server is back the next run must leave the
store equal to the source: every sample once, none missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from api.settings import AppSettings, load_app_settings
from forecaster.types import DS, UID, Y
from pipelines.jobs.ingest import run_ingest
from pipelines.sources.prometheus import PrometheusConfig, PrometheusSource
from pipelines.store.store import open_store
from tests.integration.prometheus_server import (
    Binaries,
    PrometheusServer,
    Series,
    backfill,
    require_binaries,
    write_openmetrics,
)

pytestmark = pytest.mark.integration

TRACE = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "helios_earth_total_10min.csv"
)
POOL = "a100-train"
QUERIES = {
    f"{POOL}/allocated_gpus": 'helios_allocated_gpus{cluster="earth"}',
    f"{POOL}/queue_gpus": 'helios_pending_gpus{cluster="earth"}',
}
POOLS_YAML = f"pools:\n  - name: {POOL}\n    node_group_id: ng-{POOL}\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Binaries, Path, pd.DataFrame]:
    """TSDB blocks of the trace and the expected long frame of what they hold."""
    binaries = require_binaries()
    if not TRACE.is_file():
        pytest.skip(f"shared data not found at {TRACE.resolve()}; ingest fault tests skipped")
    trace = pd.read_csv(TRACE, parse_dates=["timestamp"])
    original = pd.DatetimeIndex(trace["timestamp"]).tz_localize("UTC")
    end = (pd.Timestamp.now(tz="UTC") - timedelta(days=1)).floor("10min")
    ds = original + (end - original[-1])
    values = {
        f"{POOL}/allocated_gpus": trace["allocated_gpus"].to_numpy(float),
        f"{POOL}/queue_gpus": trace["pending_gpus"].to_numpy(float),
    }
    root = tmp_path_factory.mktemp("ingest-faults")
    om = root / "history.om"
    write_openmetrics(
        om,
        [int(t.timestamp()) for t in ds],
        [
            Series("helios_allocated_gpus", {"cluster": "earth"}, values[f"{POOL}/allocated_gpus"]),
            Series("helios_pending_gpus", {"cluster": "earth"}, values[f"{POOL}/queue_gpus"]),
        ],
    )
    backfill(binaries, om, root / "blocks")
    expected = pd.concat(
        [pd.DataFrame({UID: uid, DS: ds, Y: y}) for uid, y in values.items()], ignore_index=True
    )
    return binaries, root / "blocks", expected


class _KillAfter(httpx.BaseTransport):
    """Forwards requests; SIGKILLs the server once ``count`` answers have arrived."""

    def __init__(self, server: PrometheusServer, count: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.server = server
        self.count = count
        self.sent = 0
        self.armed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        response = self.inner.handle_request(request)
        response.read()
        if self.armed and self.sent == self.count:
            self.server.kill()
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def server(
    history: tuple[Binaries, Path, pd.DataFrame], tmp_path: Path
) -> Iterator[PrometheusServer]:
    binaries, blocks, _ = history
    tsdb = tmp_path / "prometheus" / "data"
    shutil.copytree(blocks, tsdb)
    started = PrometheusServer(binaries, tsdb).start()
    try:
        yield started
    finally:
        started.stop()


def _settings(root: Path, **overrides: object) -> AppSettings:
    (root / "pools.yaml").write_text(POOLS_YAML, encoding="utf-8")
    return load_app_settings(root=root, pools_file=root / "pools.yaml", **overrides)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_prometheus_killed_mid_ingest_fails_cleanly_and_the_next_run_fills_the_gap(
    history: tuple[Binaries, Path, pd.DataFrame], server: PrometheusServer, tmp_path: Path
) -> None:
    _, _, expected = history
    settings = _settings(
        tmp_path, prometheus={"url": server.url, "step": "10min", "backfill_days": 3}
    )
    transport = _KillAfter(server, count=0)
    config = PrometheusConfig(
        url=server.url, timeout_s=5, max_attempts=2, backoff_s=0.05, trust_env=False
    )
    last = expected[DS].max()
    first_end = (last - pd.Timedelta(days=2)).to_pydatetime()
    second_end = (last - pd.Timedelta(days=1)).to_pydatetime()
    with (
        PrometheusSource(config, transport=transport) as source,
        open_store(settings.store_url) as store,
    ):
        first = run_ingest(settings, store=store, source=source, queries=QUERIES, now=first_end)
        assert first.outcome == "ok", first.summary
        before = store.samples.read()

        transport.armed, transport.count = True, transport.sent + 1  # dies after one answer
        crashed = run_ingest(settings, store=store, source=source, queries=QUERIES, now=second_end)
        assert crashed.outcome == "failed"
        assert "nothing written" in crashed.summary
        assert server.url in crashed.summary
        pd.testing.assert_frame_equal(store.samples.read(), before)

        server.start()  # same data, same port
        recovered = run_ingest(
            settings, store=store, source=source, queries=QUERIES, now=second_end
        )
        assert recovered.outcome == "ok", recovered.summary
        stored = store.samples.read()

    assert not stored.duplicated([UID, DS]).any()
    window = expected[
        (expected[DS] >= pd.Timestamp(first_end) - pd.Timedelta(days=3))
        & (expected[DS] <= pd.Timestamp(second_end))
    ]
    got = stored[stored[UID].isin(list(QUERIES))].reset_index(drop=True)
    want = window.sort_values([UID, DS]).reset_index(drop=True)
    assert len(got) == len(want) > 4 * 144
    pd.testing.assert_frame_equal(got[[UID, DS]], want[[UID, DS]], check_dtype=False)
    np.testing.assert_array_equal(got[Y].to_numpy(), want[Y].to_numpy())
    demand = stored[stored[UID] == f"{POOL}/demand_gpus"]
    assert len(demand) == len(want) // 2


def test_database_down_at_start_names_the_url_without_the_password(tmp_path: Path) -> None:
    settings = _settings(tmp_path, store_url="postgresql+psycopg://user:secret@127.0.0.1:1/x")
    report = run_ingest(settings, source=_NeverCalled(), now=pd.Timestamp.now(tz="UTC"))
    assert report.outcome == "failed"
    assert "postgresql+psycopg://user:***@127.0.0.1:1/x" in report.summary
    assert "secret" not in report.summary


class _NeverCalled:
    def fetch(self, *_: object) -> pd.DataFrame:
        raise AssertionError("the store is checked before the source is asked")
