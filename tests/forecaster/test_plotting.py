"""Tests of the forecast-vs-actual plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from forecaster.exceptions import DataValidationError
from forecaster.plotting import forecast_vs_actual, pool_figures, save_png


def _backtest(n_series: int = 3, models: tuple[str, ...] = ("persistence", "gbm")) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    start = pd.Timestamp("2024-01-01", tz="UTC")
    step = pd.Timedelta(minutes=10)
    for s in range(n_series):
        for cutoff_i in (20, 26):
            cutoff = start + step * cutoff_i
            for model in models:
                for k in range(1, 7):
                    mean = float(rng.normal(10, 1))
                    rows.append(
                        {
                            "unique_id": f"pool{s}/queue_gpus",
                            "ds": cutoff + step * k,
                            "cutoff": cutoff,
                            "step": k,
                            "model": model,
                            "mean": mean,
                            "q0.1": mean - 2,
                            "q0.9": mean + 2,
                            "y": float(10 + s + k % 3),
                        }
                    )
    return pd.DataFrame(rows)


def _names(fig: Figure) -> list[str]:
    """The series of a figure's rows (the first column's y labels)."""
    return [ax.get_ylabel() for ax in fig.get_axes() if ax.get_ylabel()]


def test_one_panel_per_series_and_window_with_actual_and_models() -> None:
    fig = forecast_vs_actual(_backtest(), max_series=2)
    axes = fig.get_axes()
    assert len(axes) == 2 * 2  # 2 series x 2 windows
    assert _names(fig) == ["pool0/queue_gpus", "pool1/queue_gpus"]
    assert axes[0].get_title() == "window from 2024-01-01 03:20"
    assert axes[1].get_title() == "window from 2024-01-01 04:20"
    labels = {line.get_label() for line in axes[0].get_lines()}
    assert {"actual", "persistence", "gbm"} <= labels
    # One interval band per model in each window's panel.
    assert len(axes[0].collections) == 2
    legend_texts = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "persistence q0.1-q0.9" in legend_texts


def test_champion_mapping_draws_only_each_series_champion() -> None:
    champions = {"pool0/queue_gpus": "gbm", "pool1/queue_gpus": "persistence"}
    fig = forecast_vs_actual(_backtest(), series=list(champions), models=champions)
    first, _, second, _ = fig.get_axes()
    assert "persistence" not in {line.get_label() for line in first.get_lines()}
    assert "gbm" not in {line.get_label() for line in second.get_lines()}


def test_band_falls_back_to_mean_without_lower_quantile() -> None:
    frame = _backtest(n_series=1).drop(columns=["q0.1"])
    fig = forecast_vs_actual(frame, level=0.9)
    legend_texts = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "gbm mean-q0.9" in legend_texts


def test_unknown_series_and_missing_columns_are_named() -> None:
    with pytest.raises(DataValidationError, match="nope/queue_gpus"):
        forecast_vs_actual(_backtest(), series=["nope/queue_gpus"])
    with pytest.raises(DataValidationError, match="cutoff"):
        forecast_vs_actual(_backtest().drop(columns=["cutoff"]))


def test_save_png_writes_a_png_without_touching_pyplot(tmp_path: Path) -> None:
    fig = forecast_vs_actual(_backtest(n_series=1))
    assert isinstance(fig, Figure)
    path = save_png(fig, tmp_path / "plots" / "fva.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # No figure was registered with pyplot's global state (if pyplot is loaded at all).
    pyplot = matplotlib.__dict__.get("pyplot")
    assert pyplot is None or not pyplot.get_fignums()


def _fleet_backtest() -> pd.DataFrame:
    """3 pools x 5 signals (15 series, as in the sample), 3 windows a day apart."""
    rng = np.random.default_rng(1)
    step = pd.Timedelta(minutes=5)
    start = pd.Timestamp("2025-03-01", tz="UTC")
    rows = []
    for pool in ("a100-train", "h100-train", "l4-infer"):
        for signal in ("allocated_gpus", "demand_gpus", "gpu_util", "nodes", "queue_gpus"):
            for day in range(3):
                cutoff = start + pd.Timedelta(days=day)
                for k in range(1, 13):
                    mean = float(rng.normal(10, 1))
                    rows.append(
                        {
                            "unique_id": f"{pool}/{signal}",
                            "ds": cutoff + step * k,
                            "cutoff": cutoff,
                            "model": "champion",
                            "mean": mean,
                            "q0.9": mean + 2,
                            "y": mean + float(rng.normal()),
                        }
                    )
    return pd.DataFrame(rows)


def test_pool_figures_draw_every_series_of_every_pool() -> None:
    frame = _fleet_backtest()
    figures = pool_figures(frame, level=0.9)
    assert list(figures) == ["a100-train", "h100-train", "l4-infer"]
    drawn = {name for fig in figures.values() for name in _names(fig)}
    assert drawn == set(frame["unique_id"])
    for pool, fig in figures.items():
        assert all(name.startswith(f"{pool}/") for name in _names(fig))


def test_pool_figures_can_stop_at_a_number_of_pools() -> None:
    assert list(pool_figures(_fleet_backtest(), max_pools=2)) == ["a100-train", "h100-train"]


def test_windows_a_day_apart_each_get_a_panel_on_their_own_time_axis() -> None:
    frame = _fleet_backtest()
    fig = forecast_vs_actual(frame, series=["l4-infer/demand_gpus"])
    axes = fig.get_axes()
    assert len(axes) == 3  # one per window, side by side
    for ax, day in zip(axes, range(3), strict=True):
        (actual,) = [line for line in ax.get_lines() if line.get_label() == "actual"]
        assert np.isfinite(np.asarray(actual.get_ydata(), dtype=float)).sum() == 12
        # The axis spans its window (an hour), not the three days: no blank between.
        low, high = (mdates.num2date(x) for x in ax.get_xlim())
        first = pd.Timestamp("2025-03-01", tz="UTC") + pd.Timedelta(days=day, minutes=5)
        assert low <= first < first + pd.Timedelta(hours=1) <= high + pd.Timedelta(minutes=5)
        assert high - low < pd.Timedelta(hours=2)


def test_at_most_max_windows_columns_the_latest() -> None:
    fig = forecast_vs_actual(_fleet_backtest(), series=["l4-infer/demand_gpus"], max_windows=2)
    assert [ax.get_title() for ax in fig.get_axes()] == [
        "window from 2025-03-02 00:00",
        "window from 2025-03-03 00:00",
    ]
