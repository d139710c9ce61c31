"""Tests of registration, the champion alias, and the last-known-good copy."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.exceptions import TrackingError
from forecaster.last_known_good import LKG_DIR, export_last_known_good, last_known_good_dir
from forecaster.model_files import download_model
from forecaster.models.naive import Persistence
from forecaster.registry import (
    champion_version,
    load_champion,
    promote,
    register,
)
from forecaster.tracking import TrackingConfig, start_training_run

LEVELS = (0.5, 0.9)


@dataclass(frozen=True)
class Decision:
    promote: bool
    reason: str


@pytest.fixture(scope="module")
def fitted() -> Persistence:
    ds = pd.date_range("2024-01-01", periods=48, freq="10min", tz="UTC")
    rng = np.random.default_rng(11)
    frame = pd.concat(
        pd.DataFrame({"unique_id": uid, "ds": ds, "y": rng.gamma(2.0, 3.0, len(ds))})
        for uid in ("a100/queue_gpus", "h100/queue_gpus")
    )
    return Persistence(horizon=6, window=24).fit(frame)


@pytest.fixture(scope="module")
def logged(store: TrackingConfig, fitted: Persistence) -> tuple[str, str]:
    """A model logged once for the module: (model_uri, run_id)."""
    with start_training_run(store, run_name="registry-test") as run:
        info = run.log_forecaster(fitted, levels=LEVELS)
        return info.model_uri, run.run_id


@pytest.fixture
def unreachable(monkeypatch: pytest.MonkeyPatch) -> TrackingConfig:
    """A registry URI where nothing listens, with MLflow's retries turned off."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return TrackingConfig(tracking_uri=f"http://127.0.0.1:{port}", experiment_name="x")


def _new_version(store: TrackingConfig, logged: tuple[str, str], name: str) -> str:
    model_uri, run_id = logged
    return register(model_uri, name, tracking=store, run_id=run_id)


def test_alias_moves_only_when_the_gate_says_promote(
    store: TrackingConfig, logged: tuple[str, str]
) -> None:
    name = "gate"
    v1 = _new_version(store, logged, name)
    assert v1 == "1"
    assert champion_version(name, tracking=store) is None
    assert promote(name, v1, Decision(False, "no baseline to beat"), tracking=store) is False
    assert champion_version(name, tracking=store) is None
    assert promote(name, v1, Decision(True, "first model"), tracking=store) is True
    assert champion_version(name, tracking=store) == "1"

    v2 = _new_version(store, logged, name)
    assert promote(name, v2, Decision(False, "MASE 1.2 >= champion 1.0"), tracking=store) is False
    assert champion_version(name, tracking=store) == "1"

    client = MlflowClient(tracking_uri=store.tracking_uri, registry_uri=store.tracking_uri)
    tags = client.get_model_version(name, v2).tags
    assert tags["foresight.promotion"] == "rejected"
    assert tags["foresight.promotion_reason"] == "MASE 1.2 >= champion 1.0"
    assert client.get_model_version(name, v1).tags["foresight.promotion"] == "promoted"
    assert client.get_model_version(name, v1).run_id == logged[1]


def test_champion_version_of_unknown_model_is_none(store: TrackingConfig) -> None:
    assert champion_version("never-registered", tracking=store) is None


def test_load_champion_from_registry_keeps_last_known_good(
    store: TrackingConfig, logged: tuple[str, str], fitted: Persistence, tmp_path: Path
) -> None:
    name = "serve"
    _new_version(store, logged, name)
    v2 = _new_version(store, logged, name)
    promote(name, v2, Decision(True, "better"), tracking=store)

    loaded = load_champion(name, models_dir=tmp_path, tracking=store)
    assert (loaded.source, loaded.version, loaded.reason) == ("registry", "2", "")
    pd.testing.assert_frame_equal(loaded.model.predict(3, LEVELS), fitted.predict(3, LEVELS))
    copy = last_known_good_dir(tmp_path, name)
    assert copy is not None
    metadata = json.loads((copy / "metadata.json").read_text())
    assert metadata["version"] == "2"
    assert metadata["run_id"] == logged[1]
    assert {"name", "exported_at"} <= metadata.keys()
    # A second load of the same champion reuses the copy instead of re-exporting it.
    assert load_champion(name, models_dir=tmp_path, tracking=store).version == "2"
    assert last_known_good_dir(tmp_path, name) == copy


def test_unreachable_registry_falls_back_to_last_known_good(
    store: TrackingConfig,
    logged: tuple[str, str],
    fitted: Persistence,
    unreachable: TrackingConfig,
    tmp_path: Path,
) -> None:
    name = "fallback"
    v1 = _new_version(store, logged, name)
    promote(name, v1, Decision(True, "first"), tracking=store)
    load_champion(name, models_dir=tmp_path, tracking=store)

    loaded = load_champion(name, models_dir=tmp_path, tracking=unreachable)
    assert loaded.source == "last_known_good"
    assert loaded.version == v1
    assert unreachable.tracking_uri in loaded.reason
    assert "last-known-good version 1" in loaded.reason
    pd.testing.assert_frame_equal(loaded.model.predict(2, LEVELS), fitted.predict(2, LEVELS))


def test_registry_without_champion_falls_back_to_last_known_good(
    store: TrackingConfig, logged: tuple[str, str], tmp_path: Path
) -> None:
    name = "no-alias"
    _new_version(store, logged, name)
    local = download_model(logged[0], tmp_path / "dl", tracking=store)
    export_last_known_good(local, tmp_path, {"name": name, "version": "7", "run_id": "r"})
    loaded = load_champion(name, models_dir=tmp_path, tracking=store)
    assert (loaded.source, loaded.version) == ("last_known_good", "7")
    assert "no models:/no-alias@champion" in loaded.reason


def test_no_champion_anywhere_raises(unreachable: TrackingConfig, tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match="no last-known-good copy"):
        load_champion("ghost", models_dir=tmp_path, tracking=unreachable)


def test_failed_export_leaves_previous_copy_intact(
    store: TrackingConfig, logged: tuple[str, str], tmp_path: Path
) -> None:
    models_dir = tmp_path / "models"
    good = download_model(logged[0], tmp_path / "good", tracking=store)
    first = export_last_known_good(good, models_dir, {"name": "m", "version": "1", "run_id": "a"})

    # A source whose copy fails part-way: one file is a dangling symlink.
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in good.iterdir():
        if item.is_file():
            (broken / item.name).write_bytes(item.read_bytes())
    (broken / "zz_weights.bin").symlink_to(tmp_path / "missing-target")
    with pytest.raises(TrackingError, match="could not copy"):
        export_last_known_good(broken, models_dir, {"name": "m", "version": "2", "run_id": "b"})

    # A source that is not an MLflow model at all.
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    with pytest.raises(TrackingError, match="MLmodel"):
        export_last_known_good(
            not_a_model, models_dir, {"name": "m", "version": "3", "run_id": "c"}
        )

    assert last_known_good_dir(models_dir, "m") == first
    assert json.loads((first / "metadata.json").read_text())["version"] == "1"
    leftovers = [p.name for p in (models_dir / LKG_DIR / "m").iterdir()]
    assert sorted(leftovers) == sorted(["CURRENT", first.name])


def test_new_export_replaces_current_and_prunes_old_copies(
    store: TrackingConfig, logged: tuple[str, str], tmp_path: Path
) -> None:
    good = download_model(logged[0], tmp_path / "good", tracking=store)
    models_dir = tmp_path / "models"
    copies = [
        export_last_known_good(good, models_dir, {"name": "m", "version": v, "run_id": "r"})
        for v in ("1", "2", "3")
    ]
    assert last_known_good_dir(models_dir, "m") == copies[-1]
    kept = {p.name for p in (models_dir / LKG_DIR / "m").iterdir() if p.is_dir()}
    assert kept == {copies[1].name, copies[2].name}  # current and the one before


def test_export_requires_identifying_metadata(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="run_id"):
        export_last_known_good(tmp_path, tmp_path, {"name": "m", "version": "1"})
