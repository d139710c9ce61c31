"""Demand against each policy's capacity over time, and the work left waiting (docs/simulate.md)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from forecaster.exceptions import DataValidationError
from forecaster.plotting import PALETTE
from pipelines.simulate.result import SimResult


def plot_runs(demand: pd.Series, runs: Mapping[str, SimResult], *, title: str = "") -> Figure:
    """Plot demand against every run's ready capacity (top) and backlog (bottom).

    Capacity is drawn as steps: it holds for the whole step.

    Args:
        demand: the demand series the runs replayed, in GPUs.
        runs: policy name -> its replay of ``demand``.
        title: the figure title (e.g. the pool's name).

    Returns:
        A two-panel figure on an Agg canvas.

    Raises:
        DataValidationError: no runs, or a run replayed a different series.
    """
    if not runs:
        raise DataValidationError("no runs to plot; pass at least one policy's SimResult")
    for name, run in runs.items():
        if len(run.frame) != len(demand) or not run.frame.index.equals(demand.index):
            raise DataValidationError(
                f"run {name!r} replayed {len(run.frame)} steps from "
                f"{run.frame.index[0]}, not this demand series; plot runs of one series"
            )
    fig = Figure(figsize=(11.0, 6.0), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    _capacity_panel(top, demand, runs)
    _backlog_panel(bottom, runs)
    if title:
        fig.suptitle(title)
    return fig


def _capacity_panel(ax: Axes, demand: pd.Series, runs: Mapping[str, SimResult]) -> None:
    ax.plot(demand.index, demand.to_numpy(), color="black", linewidth=1.2, label="demand")
    for i, (name, run) in enumerate(runs.items()):
        summary = run.summary()
        label = (
            f"{name}: {summary['gpu_hours_provisioned']:,.0f} GPU-h, "
            f"{summary['waiting_gpu_hours']:,.0f} waiting GPU-h"
        )
        ax.step(
            run.frame.index,
            run.frame["capacity_gpus"].to_numpy(),
            where="post",
            color=PALETTE[i % len(PALETTE)],
            linewidth=0.9,
            label=label,
        )
    ax.set_ylabel("GPUs")
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(alpha=0.3)


def _backlog_panel(ax: Axes, runs: Mapping[str, SimResult]) -> None:
    for i, (name, run) in enumerate(runs.items()):
        ax.step(
            run.frame.index,
            run.frame["backlog_gpus"].to_numpy(),
            where="post",
            color=PALETTE[i % len(PALETTE)],
            linewidth=0.9,
            label=name,
        )
    ax.set_ylabel("waiting GPUs")
    ax.grid(alpha=0.3)
