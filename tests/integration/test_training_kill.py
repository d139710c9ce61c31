"""A training SIGKILLed mid-run leaves the previous champion serving.

A champion (version 1) is trained first. A second training, in its own process, is
killed with SIGKILL at one of two moments: while its MLflow run is open (the run opens
before the backtest, so that is mid-training), or
right after it registered its new version and before the gate could move the
``champion`` alias (the most dangerous window). Either way the alias still names
version 1, ``load_champion`` serves version 1, the last-known-good copy is version 1,
and the next training runs to the end and is promoted.

The child pauses at a named step (it replaces ``register`` or ``promote`` in
``forecaster.training`` with a wrapper that signals the test and sleeps), so the kill
lands inside the window under test every time instead of whenever the machine's
load lets it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.last_known_good import last_known_good_dir
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.registry import champion_version, load_champion
from forecaster.tracking import TrackingConfig
from forecaster.training import TrainingPlan, train

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

MODEL = "demand"
STEP = pd.Timedelta(hours=1)
DAY = 24
PLAN = TrainingPlan(
    horizon=6,
    horizons={"6h": 6},
    selection_horizon="6h",
    n_windows=3,
    levels=(0.5, 0.9),
    max_train=10 * DAY,
    # Per-series selection: with seasonal naive among the candidates the next training
    # is better on this seasonal frame, so the gate promotes it (the guarded rule only
    # chooses among persistence and the gradient-boosted families).
    champion="select",
)
_WAIT_S = 120.0

# The child: a real training in its own process, pausing at one step so the test can
# SIGKILL it there. It reads its inputs from argv; the frame comes as Parquet.
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import pandas as pd
    import forecaster.training as training
    from forecaster.models.naive import Persistence, SeasonalNaive
    from forecaster.tracking import TrackingConfig

    data, uri, artifacts, models_dir, marker, pause_at = sys.argv[1:7]

    def paused(name, real):
        def wrapper(*args, **kwargs):
            Path(marker).write_text(name)
            time.sleep(600)  # the test kills us here
            return real(*args, **kwargs)
        return wrapper

    setattr(training, pause_at, paused(pause_at, getattr(training, pause_at)))
    plan = training.TrainingPlan(
        horizon=6, horizons={"6h": 6}, selection_horizon="6h", n_windows=3,
        levels=(0.5, 0.9), max_train=240, champion="select",
    )
    training.train(
        pd.read_parquet(data),
        [Persistence(horizon=6), SeasonalNaive(season_length=24, horizon=6)],
        plan,
        tracking=TrackingConfig(tracking_uri=uri, experiment_name="kill",
                                artifact_location=artifacts),
        model_name="demand",
        models_dir=Path(models_dir),
        run_name="killed",
    )
    """
)


def seasonal_frame(seed: int = 21, days: int = 14) -> pd.DataFrame:
    """Daily-seasonal series: seasonal naive beats the first champion (persistence)."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-05-01", periods=n, freq=STEP, tz="UTC")
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "unique_id": f"pool-{i}/demand_gpus",
                    "ds": ds,
                    "y": np.clip(
                        level + 0.7 * level * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 1, n),
                        0,
                        None,
                    ),
                }
            )
            for i, level in enumerate((40.0, 15.0, 25.0))
        ],
        ignore_index=True,
    )


def _wait_for(
    condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        if proc.poll() is not None:
            pytest.fail(
                f"the training exited ({proc.returncode}) before {what}:\n{log.read_text()}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {_WAIT_S:.0f} s:\n{log.read_text()}")
        time.sleep(0.05)


def _kill_training(
    tmp_path: Path, tracking: TrackingConfig, models_dir: Path, pause_at: str
) -> None:
    """Run the child training and SIGKILL it at its pause before ``pause_at``."""
    data = tmp_path / "frame.parquet"
    marker = tmp_path / f"paused-{pause_at}"
    log = tmp_path / f"child-{pause_at}.log"
    client = MlflowClient(tracking_uri=tracking.tracking_uri, registry_uri=tracking.tracking_uri)
    experiment = client.get_experiment_by_name("kill")
    assert experiment is not None
    before = len(client.search_runs([experiment.experiment_id]))

    def new_run_started() -> bool:
        return len(client.search_runs([experiment.experiment_id])) > before

    with log.open("wb") as out:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(data),
                tracking.tracking_uri,
                str(tracking.artifact_location),
                str(models_dir),
                str(marker),
                pause_at,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        if pause_at == "register":
            # Kill as soon as the run exists: mid-training (it opens before the
            # backtest), or at the latest paused before registering.
            _wait_for(new_run_started, child, "MLflow run", log)
        else:
            _wait_for(marker.exists, child, f"pause before {pause_at}", log)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)


def _assert_version_1_serves(tracking: TrackingConfig, models_dir: Path, moment: str) -> None:
    assert champion_version(MODEL, tracking=tracking) == "1", moment
    served = load_champion(MODEL, models_dir=models_dir, tracking=tracking)
    assert (served.source, served.version) == ("registry", "1"), moment
    copy = last_known_good_dir(models_dir, MODEL)
    assert copy is not None
    assert copy.name.startswith("v1-"), moment


def test_a_killed_training_leaves_the_previous_champion_serving(tmp_path: Path) -> None:
    tracking = TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
        experiment_name="kill",
        artifact_location=(tmp_path / "artifacts").as_uri(),
    )
    client = MlflowClient(tracking_uri=tracking.tracking_uri, registry_uri=tracking.tracking_uri)
    models_dir = tmp_path / "models"
    df = seasonal_frame()
    df.to_parquet(tmp_path / "frame.parquet")
    first = train(
        df,
        [Persistence(horizon=6)],
        PLAN,
        tracking=tracking,
        model_name=MODEL,
        models_dir=models_dir,
    )
    assert first.promoted
    assert first.version == "1"

    _kill_training(tmp_path, tracking, models_dir, "register")
    _assert_version_1_serves(tracking, models_dir, "killed while its run was open")
    assert {str(v.version) for v in client.search_model_versions(f"name = '{MODEL}'")} == {"1"}

    _kill_training(tmp_path, tracking, models_dir, "promote")
    _assert_version_1_serves(tracking, models_dir, "killed after registering")
    versions = {str(v.version): v for v in client.search_model_versions(f"name = '{MODEL}'")}
    assert set(versions) == {"1", "2"}
    # The orphan is complete but unjudged: no gate decision, no alias, never served.
    assert "foresight.promotion" not in versions["2"].tags
    assert not versions["2"].aliases

    # The next training runs to the end and, being better, is promoted.
    candidates = [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]
    after = train(df, candidates, PLAN, tracking=tracking, model_name=MODEL, models_dir=models_dir)
    assert after.promoted, after.decision.reason
    assert after.version == "3"
    assert champion_version(MODEL, tracking=tracking) == "3"
    assert load_champion(MODEL, models_dir=models_dir, tracking=tracking).version == "3"
    copy = last_known_good_dir(models_dir, MODEL)
    assert copy is not None
    assert copy.name.startswith("v3-")
