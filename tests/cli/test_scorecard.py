"""``foresight scorecard``: the table and the JSON from the store, and bad options refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app
from cli.support import console
from pipelines.store.store import open_store

END = datetime(2025, 6, 2, tzinfo=UTC)
STEP = timedelta(minutes=10)
POOLS = """
pools:
  - name: a100
    node_group_id: ng-a100
    gpus_per_node: 8
    lead_time: 10m
    cost_per_node_hour: 30
  - name: h100
    node_group_id: ng-h100
"""


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 200)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A deployment whose store holds a day of a100: 20 GPUs demanded on 2 nodes."""
    (tmp_path / "pools.yaml").write_text(POOLS)
    path = tmp_path / "foresight.yaml"
    path.write_text(f"root: {tmp_path}\npools_file: {tmp_path / 'pools.yaml'}\n")
    ds = pd.date_range(end=END, periods=145, freq=STEP, tz="UTC")
    frame = pd.concat(
        [
            pd.DataFrame({"unique_id": "a100/demand_gpus", "ds": ds, "y": 20.0}),
            pd.DataFrame({"unique_id": "a100/nodes", "ds": ds, "y": 2.0}),
        ]
    )
    with open_store(f"sqlite:///{tmp_path / 'data' / 'foresight.db'}") as store:
        store.samples.upsert(frame)
        # Three nodes asked for from before the day on: 24 GPUs, nothing waits.
        store.recommendations.append("a100", END - timedelta(days=2), 3, "scale_up", {})
    return path


def test_json_gives_both_sides_of_each_window(config: Path) -> None:
    result = CliRunner().invoke(
        app, ["scorecard", "--config", str(config), "--clock", "replay", "--json"]
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["generated_at"] == "2025-06-02T00:00:00Z"
    a100, h100 = body["pools"]
    day = a100["windows"]["day"]
    # 144 samples of 10 min before END: 4 GPUs waiting for 24 h; the plan adds a node.
    assert day["samples"] == 144
    assert day["waiting_gpu_hours"] == {"actual": 96.0, "plan": 0.0, "difference": -96.0}
    assert day["node_hours_added"] == pytest.approx(24.0)
    assert day["added_cost"] == pytest.approx(720.0)
    assert a100["windows"]["week"]["coverage"] == pytest.approx(1 / 7)
    assert h100["windows"]["day"]["samples"] == 0


def test_the_table_names_each_pool_and_window(config: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["scorecard", "--config", str(config), "--clock", "replay", "--pool", "a100",
         "--window", "day"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [
        [cell.strip() for cell in line.split("│") if cell.strip()]
        for line in result.output.splitlines()
        if "a100" in line
    ]
    # pool, window, waiting actual / plan / avoided, node-h actual / plan / added, cost, ...
    assert rows == [["a100", "day", "96.0", "0.0", "96.0", "48.0", "72.0", "24.0", "720.00",
                     "100%", "144"]]  # fmt: skip
    assert "h100" not in result.output
    assert "t - lead_time" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--window", "month"], ["'month' is not one of", "'day'", "'week'"]),
        (["--clock", "yesterday"], ["'yesterday' is not one of", "'system'", "'replay'"]),
        (["--pool", "v100"], ["no pool named 'v100'", "known pools: a100, h100"]),
    ],
)
def test_bad_options_are_refused_with_what_is_allowed(
    config: Path, args: list[str], said: list[str]
) -> None:
    result = CliRunner().invoke(app, ["scorecard", "--config", str(config), *args])
    assert result.exit_code == 2
    for words in said:
        assert words in result.output
