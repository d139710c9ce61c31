"""``foresight backtest --champion``: the train-time champion scored beside the families."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app


def test_backtest_scores_the_walk_forward_champion_on_the_families_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in {
        "MODEL_SET": "fast",
        "HORIZON": "6",
        "HORIZONS": '["10min", "1h"]',
        "SELECTION_HORIZON": "1h",
        "BACKTEST_WINDOWS": "4",
        "HELDOUT_WINDOWS": "2",
        "MAX_TRAIN_DAYS": "2",
    }.items():
        monkeypatch.setenv(f"FORESIGHT_{key}", value)
    rng = np.random.default_rng(2)
    n = 6 * 144
    ds = pd.date_range("2024-03-01", periods=n, freq="10min")
    t = np.arange(n)
    pd.DataFrame(
        {
            "timestamp": ds,
            "cycle": 40 + 20 * np.sin(2 * np.pi * t / 144) + rng.normal(0, 1, n),
            "walk": 60 + np.cumsum(rng.normal(0, 1, n)),
        }
    ).to_csv(tmp_path / "wide.csv", index=False)
    result = CliRunner().invoke(
        app,
        ["backtest", "--data", "wide.csv", "--champion", "--workers", "1", "--output", "s.csv"],
    )
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(tmp_path / "s.csv")
    champion = scores[scores["model"] == "champion"]
    assert set(champion["horizon"]) == {"10min", "1h"}
    assert len(champion["unique_id"].unique()) == 2
    # Scored on exactly the families' windows, so the rows compare.
    persistence = scores[scores["model"] == "persistence"]
    assert champion["n_windows"].tolist() == persistence["n_windows"].tolist()
    assert (champion["n_windows"] == 4).all()
