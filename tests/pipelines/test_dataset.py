"""Loading a data file reports what cleaning did once, as readable lines, not a warning."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.config.settings import load_settings
from pipelines.dataset import load_dataset


def test_cleaning_is_logged_once_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ds = pd.date_range("2025-01-01", periods=48, freq="5min", tz="UTC")
    keep = np.r_[0:20, 25:48]  # 5 missing steps in both series of pool a
    frame = pd.concat(
        pd.DataFrame({"unique_id": f"a/{signal}", "ds": ds[keep], "y": 1.0})
        for signal in ("nodes", "allocated_gpus")
    )
    path = tmp_path / "metrics.csv"
    frame.to_csv(path, index=False)
    settings = load_settings(root=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        with caplog.at_level(logging.WARNING, logger="pipelines.dataset"):
            load_dataset(settings, path)
    records = [r for r in caplog.records if r.name == "pipelines.dataset"]
    assert len(records) == 1
    text = records[0].getMessage()
    assert "a/{allocated_gpus, nodes}: inserted 5 missing steps" in text
    assert "0 days" not in text
