"""A dead MLflow server costs serving seconds, not MLflow's minutes of retries."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import TrackingError
from forecaster.models.naive import Persistence
from forecaster.registry import check_reachable, load_champion, promote, register
from forecaster.tracking import TrackingConfig, start_training_run

pytestmark = pytest.mark.timeout(60)

LEVELS = (0.5, 0.9)
RETRY_SETTINGS = (
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
)


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def mlflow_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own retry settings (7 retries, backoff factor 2): minutes on a dead host."""
    for name in RETRY_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def test_dead_server_falls_back_to_last_known_good_within_seconds(
    store: TrackingConfig, tmp_path: Path, mlflow_defaults: None
) -> None:
    ds = pd.date_range("2024-01-01", periods=48, freq="10min", tz="UTC")
    frame = pd.DataFrame(
        {"unique_id": "a100/queue_gpus", "ds": ds, "y": np.random.default_rng(4).gamma(2, 3, 48)}
    )
    fitted = Persistence(horizon=6, window=24).fit(frame)
    with start_training_run(store, run_name="failfast") as run:
        info = run.log_forecaster(fitted, levels=LEVELS)
    version = register(info.model_uri, "failfast", tracking=store, run_id=run.run_id)
    promote("failfast", version, Decision(True, "first"), tracking=store)
    load_champion("failfast", models_dir=tmp_path, tracking=store)  # writes the copy
    dead = TrackingConfig(tracking_uri=f"http://127.0.0.1:{_closed_port()}")

    began = time.monotonic()
    loaded = load_champion("failfast", models_dir=tmp_path, tracking=dead)
    elapsed = time.monotonic() - began

    assert elapsed < 10, f"fallback took {elapsed:.1f} s"
    assert loaded.source == "last_known_good"
    assert loaded.version == version
    assert "unreachable" in loaded.reason
    assert dead.tracking_uri in loaded.reason
    pd.testing.assert_frame_equal(loaded.model.predict(2, LEVELS), fitted.predict(2, LEVELS))


def test_dead_server_without_a_copy_is_a_prompt_clear_error(
    tmp_path: Path, mlflow_defaults: None
) -> None:
    dead = TrackingConfig(tracking_uri=f"http://user:secret@127.0.0.1:{_closed_port()}")
    began = time.monotonic()
    with pytest.raises(TrackingError, match="unreachable") as caught:
        load_champion("none", models_dir=tmp_path, tracking=dead)
    assert time.monotonic() - began < 10
    assert "secret" not in str(caught.value)
    assert "no last-known-good copy" in str(caught.value)


def test_probe_passes_a_listening_server_and_skips_local_stores(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        check_reachable(TrackingConfig(tracking_uri=f"http://127.0.0.1:{port}"))
    check_reachable(TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/nowhere.db"))
