"""The demand-vs-capacity figure."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from forecaster.exceptions import DataValidationError
from forecaster.plotting import save_png
from pipelines.simulate.engine import simulate
from pipelines.simulate.oracle import OraclePolicy
from pipelines.simulate.plot import plot_runs
from pipelines.simulate.reactive import ReactivePolicy


def test_plot_runs_draws_demand_and_each_policy(series, pool, tmp_path):
    demand = series([8, 24, 24, 8, 8, 40, 8, 8])
    runs = {
        "reactive": simulate(demand, pool(), ReactivePolicy()),
        "oracle": simulate(demand, pool(), OraclePolicy(demand)),
    }
    fig = plot_runs(demand, runs, title="toy")
    assert isinstance(fig.canvas, FigureCanvasAgg)
    top, bottom = fig.axes
    labels = [line.get_label() for line in top.get_lines()]
    assert labels[0] == "demand"
    assert [label.split(":")[0] for label in labels[1:]] == ["reactive", "oracle"]
    assert len(bottom.get_lines()) == 2
    path = save_png(fig, tmp_path / "runs.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_runs_refuses_runs_of_another_series(series, pool):
    demand = series([8, 8, 8])
    other = simulate(series([8, 8]), pool(), ReactivePolicy())
    with pytest.raises(DataValidationError, match="plot runs of one series"):
        plot_runs(demand, {"reactive": other})
    with pytest.raises(DataValidationError, match="no runs"):
        plot_runs(demand, {})
