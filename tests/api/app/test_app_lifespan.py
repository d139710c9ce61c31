"""create_app's own lifespan: settings, pools, store, seeding and the replay clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from api.clock import ReplayClock
from api.main import create_app
from api.settings import load_app_settings
from pipelines.store.store import open_store

POOLS_YAML = """
pools:
  - name: alpha
    node_group_id: ng-alpha
    min_nodes: 1
    max_nodes: 20
"""


def _write_sample(sample_dir: Path) -> None:
    ds = pd.date_range("2025-03-01", periods=48, freq="5min", tz="UTC")
    rows = []
    for signal, value in {"allocated_gpus": 24.0, "queue_gpus": 8.0, "nodes": 4.0}.items():
        rows.append(pd.DataFrame({"unique_id": f"alpha/{signal}", "ds": ds, "y": value}))
    util = pd.DataFrame({"unique_id": "alpha/gpu_util", "ds": ds, "y": np.linspace(10, 90, 48)})
    frame = pd.concat([*rows, util])
    frame["ds"] = frame["ds"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    sample_dir.mkdir(parents=True)
    frame.to_csv(sample_dir / "metrics.csv.gz", index=False)
    (sample_dir / "pools.yaml").write_text(POOLS_YAML)


@pytest.fixture(autouse=True)
def _fail_fast_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    # MLflow retries an unreachable server for minutes by default.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")


def test_embedded_default_seeds_the_store_and_replays_the_sample(tmp_path: Path) -> None:
    _write_sample(tmp_path / "data" / "sample")
    # An unreachable registry and no last-known-good copy: the app serves reactively.
    settings = load_app_settings(root=tmp_path, mlflow_tracking_uri="http://127.0.0.1:9/")

    app = create_app(settings, clock="replay", refresh_seconds=None)
    with TestClient(app) as client:
        alpha = client.get("/recommendation/alpha").json()
        ready = client.get("/readyz").json()

    # "Now" is the newest sample, so the old data counts as fresh.
    assert alpha["generated_at"] == "2025-03-01T03:55:00Z"
    assert alpha["data_freshness_seconds"] == 0.0
    assert alpha["explanation"]["inputs"]["live_demand_gpus"]["value"] == 32.0
    assert alpha["mode"] == "reactive"
    assert alpha["current_nodes"] == 4
    assert ready["checks"]["data"]["ok"] is True
    assert ready["checks"]["model"]["ok"] is False
    with open_store(settings.store_url) as store:
        assert store.samples.last_timestamp("alpha/demand_gpus") == pd.Timestamp(
            "2025-03-01T03:55:00Z"
        )


def test_background_refresh_sees_samples_written_by_others(tmp_path: Path) -> None:
    _write_sample(tmp_path / "data" / "sample")
    settings = load_app_settings(root=tmp_path, mlflow_tracking_uri="http://127.0.0.1:9/")
    app = create_app(settings, clock="replay", refresh_seconds=0.05)
    with TestClient(app) as client:
        client.get("/recommendation/alpha")
        with open_store(settings.store_url) as other:
            later = pd.Timestamp("2025-03-01T04:00:00Z")
            other.samples.upsert(
                pd.DataFrame(
                    {
                        "unique_id": ["alpha/demand_gpus", "alpha/nodes"],
                        "ds": [later, later],
                        "y": [80.0, 4.0],
                    }
                )
            )
        deadline = datetime.now(UTC) + timedelta(seconds=5)
        alpha = client.get("/recommendation/alpha").json()
        while alpha["generated_at"] != "2025-03-01T04:00:00Z" and datetime.now(UTC) < deadline:
            alpha = client.get("/recommendation/alpha").json()

    assert alpha["generated_at"] == "2025-03-01T04:00:00Z"
    assert alpha["desired_nodes"] == 10


def test_replay_clock_reads_the_newest_sample_or_falls_back() -> None:
    fixed = datetime(2030, 1, 1, tzinfo=UTC)
    newest: list[datetime | None] = [None]
    clock = ReplayClock(lambda: newest[0], fallback=lambda: fixed)

    assert clock() == fixed
    newest[0] = datetime(2025, 3, 1, tzinfo=UTC)
    assert clock() == datetime(2025, 3, 1, tzinfo=UTC)
