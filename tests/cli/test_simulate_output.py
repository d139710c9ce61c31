"""``foresight simulate`` without ``--output-dir`` writes under the data directory.

The working tree is a git checkout: generated files go where the other generated
files are (``data/``, git-ignored), not into the directory the command ran in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_default_output_goes_under_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FORESIGHT_POOLS_FILE", str(ROOT / "data" / "sample" / "pools.yaml"))
    monkeypatch.setenv("FORESIGHT_DATA_DIR", str(tmp_path / "generated"))
    rng = np.random.default_rng(3)
    ds = pd.date_range("2024-01-01", periods=3 * 144, freq="10min", tz="UTC")
    pd.DataFrame(
        {
            "timestamp": ds.tz_localize(None),
            "allocated_gpus": rng.integers(40, 80, len(ds)),
            "pending_gpus": rng.integers(0, 20, len(ds)),
        }
    ).to_csv(tmp_path / "cluster.csv", index=False)
    args = ["simulate", "--data", "cluster.csv", "--pool", "cluster", "--model", "persistence"]
    result = CliRunner().invoke(app, [*args, "--policies", "reactive,oracle", "--warmup", "1d"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "generated" / "simulate" / "cluster.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.csv", "generated"]


def test_an_empty_equal_cost_row_says_why() -> None:
    from rich.console import Console

    from cli.simulate_run import equal_cost_table
    from pipelines.simulate.equal_cost import compare_policies

    points = {
        "foresight": [(1.20, 0.6), (1.40, 0.9)],  # every replay costs more than 1.10x
        "reference": [(1.01, 0.1), (1.08, 0.4)],
    }
    console = Console(width=200, record=True)
    console.print(equal_cost_table(compare_policies("foresight", points), points))
    text = " ".join(console.export_text().split())

    assert "│ foresight │ - │ - │ - │" in text
    assert "cheapest replay: foresight 1.20x the oracle's GPU-hours" in text
    assert "reference 1.08x" not in text  # its row has figures: nothing to explain
