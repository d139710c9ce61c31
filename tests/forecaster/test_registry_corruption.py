"""Damaged files on disk must not stop serving (issue #13, items 3 and 4).

A corrupt MLflow database falls back to a valid last-known-good copy; a corrupt
last-known-good copy of the very version the registry names is repaired from the
registry instead of dropping serving to reactive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import TrackingError
from forecaster.models.naive import Persistence
from forecaster.registry import (
    last_known_good_dir,
    load_champion,
    promote,
    register,
)
from forecaster.tracking import TrackingConfig, start_training_run

LEVELS = (0.5, 0.9)
NAME = "damaged"


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


@pytest.fixture(scope="module")
def fitted() -> Persistence:
    ds = pd.date_range("2024-01-01", periods=48, freq="10min", tz="UTC")
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"unique_id": "a100/demand_gpus", "ds": ds, "y": rng.gamma(2, 3, 48)})
    return Persistence(horizon=6, window=24).fit(frame)


def _champion(tracking: TrackingConfig, fitted: Persistence, models_dir: Path) -> str:
    """Log, register and promote ``fitted``; load it once so the local copy exists."""
    with start_training_run(tracking, run_name="corruption") as run:
        info = run.log_forecaster(fitted, levels=LEVELS)
        run_id = run.run_id
    version = register(info.model_uri, NAME, tracking=tracking, run_id=run_id)
    promote(NAME, version, Decision(True, "first"), tracking=tracking)
    assert load_champion(NAME, models_dir=models_dir, tracking=tracking).source == "registry"
    return version


_LOAD_IN_NEW_PROCESS = """
import json, sys
from pathlib import Path
from forecaster.registry import load_champion
from forecaster.tracking import TrackingConfig
models_dir = Path(sys.argv[1])
loaded = load_champion(
    sys.argv[2], models_dir=models_dir,
    tracking=TrackingConfig(tracking_uri=f"sqlite:///{models_dir}/mlflow.db"),
)
print(json.dumps({"source": loaded.source, "version": loaded.version, "reason": loaded.reason}))
"""


def test_corrupt_mlflow_database_serves_the_last_known_good_copy(
    tmp_path: Path, fitted: Persistence
) -> None:
    models_dir = tmp_path / "models"
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{models_dir}/mlflow.db",
        artifact_location=(models_dir / "mlartifacts").as_uri(),
    )
    models_dir.mkdir()
    version = _champion(tracking, fitted, models_dir)
    # Cut the database in half, as a full disk or a half-copied volume leaves it.
    database = models_dir / "mlflow.db"
    database.write_bytes(database.read_bytes()[: database.stat().st_size // 2])

    # A fresh process, as `foresight serve` starts: MLflow caches an open store per
    # process, which would hide the damage from a load in this one.
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_IN_NEW_PROCESS, str(models_dir), NAME],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"},
    )

    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert (loaded["source"], loaded["version"]) == ("last_known_good", version)
    assert "database disk image is malformed" in loaded["reason"]


def test_corrupt_last_known_good_copy_is_loaded_from_the_registry_and_repaired(
    store: TrackingConfig, tmp_path: Path, fitted: Persistence
) -> None:
    version = _champion(store, fitted, tmp_path)
    copy = last_known_good_dir(tmp_path, NAME)
    assert copy is not None
    for pickled in (copy / "model").rglob("*.pkl"):
        pickled.write_bytes(b"\x80\x05garbage")
    shutil.rmtree(copy / "model" / "code", ignore_errors=True)

    loaded = load_champion(NAME, models_dir=tmp_path, tracking=store)

    assert (loaded.source, loaded.version, loaded.reason) == ("registry", version, "")
    pd.testing.assert_frame_equal(loaded.model.predict(3, LEVELS), fitted.predict(3, LEVELS))
    repaired = last_known_good_dir(tmp_path, NAME)
    assert repaired is not None
    assert repaired != copy
    assert json.loads((repaired / "metadata.json").read_text())["version"] == version
    # The repaired copy serves on its own when the registry is gone.
    offline = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/missing/none.db")
    fallback = load_champion(NAME, models_dir=tmp_path, tracking=offline)
    assert (fallback.source, fallback.version) == ("last_known_good", version)


def test_corrupt_copy_and_unusable_registry_name_both_problems(
    tmp_path: Path, fitted: Persistence
) -> None:
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{models_dir}/mlflow.db",
        artifact_location=(models_dir / "mlartifacts").as_uri(),
    )
    _champion(tracking, fitted, models_dir)
    copy = last_known_good_dir(models_dir, NAME)
    assert copy is not None
    (copy / "metadata.json").write_text("{not json")
    (models_dir / "mlflow.db").write_bytes(b"garbage" * 4096)

    with pytest.raises(TrackingError, match="last-known-good copy is unusable") as caught:
        load_champion(NAME, models_dir=models_dir, tracking=tracking)
    assert "mlflow.db" in str(caught.value)
