"""Each data warning once per run: the commands of one run share what was said."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines import data_warnings
from pipelines.config.settings import Settings, load_settings
from pipelines.data_warnings import RUN_ID_ENV, STAMP_FILE
from pipelines.dataset import load_dataset


def _gappy_file(path: Path, missing: int = 5) -> Path:
    ds = pd.date_range("2025-01-01", periods=48, freq="5min", tz="UTC")
    keep = np.r_[0:20, 20 + missing : 48]
    frame = pd.DataFrame({"unique_id": "a/nodes", "ds": ds[keep], "y": 1.0})
    frame.to_csv(path, index=False)
    return path


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "pipelines.dataset" and r.levelno == logging.WARNING
    ]


def _new_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process starts with: nothing said yet in it."""
    monkeypatch.setattr(data_warnings, "_said", set())


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv(RUN_ID_ENV, raising=False)
    _new_command(monkeypatch)
    return load_settings(root=tmp_path)


def test_one_command_says_a_warning_once(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)
        load_dataset(settings, path)
    said = _warnings(caplog)
    assert len(said) == 1
    assert "inserted 5 missing steps" in said[0]


def test_commands_without_a_run_id_each_say_it(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)
        _new_command(monkeypatch)
        load_dataset(settings, path)
    assert len(_warnings(caplog)) == 2
    assert not (settings.data_dir / STAMP_FILE).exists()


def test_the_commands_of_one_run_say_it_once_and_the_next_run_again(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv")
    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)  # train
        _new_command(monkeypatch)
        load_dataset(settings, path)  # serve, same run
        assert len(_warnings(caplog)) == 1
        monkeypatch.setenv(RUN_ID_ENV, "run-2")
        _new_command(monkeypatch)
        load_dataset(settings, path)
    assert len(_warnings(caplog)) == 2


def test_changed_data_is_said_again_in_the_same_run(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv", missing=5)
    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)
        _new_command(monkeypatch)
        _gappy_file(path, missing=3)
        load_dataset(settings, path)
    said = _warnings(caplog)
    assert len(said) == 2
    assert "inserted 3 missing steps" in said[1]


def test_a_corrupt_stamp_is_replaced(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / STAMP_FILE).write_text("{not json")
    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)
        _new_command(monkeypatch)
        load_dataset(settings, path)
    assert len(_warnings(caplog)) == 1


def test_a_stamp_that_cannot_be_written_never_hides_a_warning(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _gappy_file(tmp_path / "metrics.csv")
    (settings.data_dir / STAMP_FILE).mkdir(parents=True)  # in the way of the file
    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
        load_dataset(settings, path)
        _new_command(monkeypatch)
        load_dataset(settings, path)
    assert len(_warnings(caplog)) == 2
