"""The whole chain ingest -> train -> forecast -> evaluate on one real series.

The Helios "Earth" allocated-GPU trace (``../shared/data``) is backfilled into a real
Prometheus with ``promtool`` (shifted to end a day ago) and read through the job's
Prometheus source; training uses the fast model set and a local SQLite MLflow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from api.settings import load_app_settings
from forecaster.types import DS, Y
from pipelines.config.tracking import tracking_config
from pipelines.jobs.evaluate import RETRAIN, run_evaluate
from pipelines.jobs.forecast import run_forecast
from pipelines.jobs.ingest import run_ingest
from pipelines.jobs.train import run_train
from pipelines.store.store import open_store
from tests.integration.prometheus_server import (
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
SERIES = "earth/allocated_gpus"
QUERIES = {SERIES: 'helios_allocated_gpus{cluster="earth"}'}


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[PrometheusServer, pd.Series]]:
    """A Prometheus over the shifted trace, and the trace as a series indexed by time."""
    binaries = require_binaries()
    if not TRACE.is_file():
        pytest.skip(f"shared data not found at {TRACE.resolve()}; chain test skipped")
    trace = pd.read_csv(TRACE, parse_dates=["timestamp"])
    original = pd.DatetimeIndex(trace["timestamp"]).tz_localize("UTC")
    end = (pd.Timestamp.now(tz="UTC") - timedelta(days=1)).floor("10min")
    ds = original + (end - original[-1])
    values = trace["allocated_gpus"].to_numpy(float)
    om = tmp_path / "history.om"
    write_openmetrics(
        om,
        [int(t.timestamp()) for t in ds],
        [Series("helios_allocated_gpus", {"cluster": "earth"}, values)],
    )
    tsdb = tmp_path / "prometheus" / "data"
    backfill(binaries, om, tsdb)
    server = PrometheusServer(binaries, tsdb).start()
    try:
        yield server, pd.Series(values, index=ds)
    finally:
        server.stop()


@pytest.mark.timeout(180)
def test_ingest_train_forecast_evaluate_on_a_real_series(
    prometheus: tuple[PrometheusServer, pd.Series], tmp_path: Path
) -> None:
    server, truth = prometheus
    (tmp_path / "pools.yaml").write_text(
        "pools:\n  - name: earth\n    node_group_id: ng-earth\n", encoding="utf-8"
    )
    settings = load_app_settings(
        root=tmp_path,
        pools_file=tmp_path / "pools.yaml",
        prometheus={"url": server.url, "step": "10min", "backfill_days": 10},
        horizon=6,
        horizons=("10min", "1h"),
        selection_horizon="1h",
        backtest_windows=2,
        heldout_windows=1,
        max_train_days=7,
        scheduler={"workers": 1},
    )
    made_at = (truth.index[-1] - pd.Timedelta(days=1)).to_pydatetime()
    later = made_at + timedelta(hours=3)
    began = time.monotonic()
    with open_store(settings.store_url) as store:
        ingested = run_ingest(settings, store=store, queries=QUERIES, now=made_at)
        assert ingested.outcome == "ok", ingested.summary
        stored = store.samples.read([SERIES]).set_index(DS)[Y]
        expected = truth[(truth.index >= made_at - timedelta(days=10)) & (truth.index <= made_at)]
        assert len(stored) == len(expected) == 10 * 144 + 1  # both ends included
        np.testing.assert_array_equal(stored.to_numpy(), expected.to_numpy())

        trained = run_train(settings, store=store, fast=True)
        assert trained.outcome == "ok", trained.summary
        assert trained.details["promoted"] is True

        forecast = run_forecast(settings, store=store, now=made_at)
        assert forecast.outcome == "ok", forecast.summary
        saved = store.forecasts.read([SERIES])
        assert len(saved) == 6
        assert set(saved["model_version"]) == {trained.details["version"]}

        assert run_ingest(settings, store=store, queries=QUERIES, now=later).outcome == "ok"
        evaluated = run_evaluate(settings, store=store, now=later)
    elapsed = time.monotonic() - began

    assert evaluated.outcome == "ok", evaluated.summary
    live = evaluated.details["live_mase"][SERIES]
    assert np.isfinite(live)
    assert live > 0
    assert evaluated.details["rows_scored"] == 6
    assert isinstance(evaluated.details[RETRAIN], bool)
    client = tracking_config(settings).client()
    run = client.get_run(evaluated.details["run_id"])
    assert run.data.tags["job"] == "evaluate"
    assert run.data.metrics["live/mase/1/1h"] == pytest.approx(live)
    print(f"chain: {elapsed:.1f} s; live MASE {live:.3f}; {evaluated.summary}")
