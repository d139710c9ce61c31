"""Tests of the forecast-vs-actual plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib
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


def test_one_panel_per_series_with_actual_models_and_cutoffs() -> None:
    fig = forecast_vs_actual(_backtest(), max_series=2)
    axes = fig.get_axes()
    assert len(axes) == 2
    assert axes[0].get_title(loc="left") == "pool0/queue_gpus"
    labels = {line.get_label() for line in axes[0].get_lines()}
    assert {"actual", "persistence", "gbm"} <= labels
    # 2 cutoffs per model drawn as windows, 2 dashed cutoff markers.
    dashed = [line for line in axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 2
    # One interval band per model and window.
    assert len(axes[0].collections) == 4
    legend_texts = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "persistence q0.1-q0.9" in legend_texts


def test_champion_mapping_draws_only_each_series_champion() -> None:
    champions = {"pool0/queue_gpus": "gbm", "pool1/queue_gpus": "persistence"}
    fig = forecast_vs_actual(_backtest(), series=list(champions), models=champions)
    first, second = fig.get_axes()
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
    drawn = {ax.get_title(loc="left") for fig in figures.values() for ax in fig.get_axes()}
    assert drawn == set(frame["unique_id"])
    for pool, fig in figures.items():
        assert all(ax.get_title(loc="left").startswith(f"{pool}/") for ax in fig.get_axes())


def test_pool_figures_can_stop_at_a_number_of_pools() -> None:
    assert list(pool_figures(_fleet_backtest(), max_pools=2)) == ["a100-train", "h100-train"]


def test_windows_a_day_apart_are_not_joined_by_the_actual_line() -> None:
    frame = _fleet_backtest()
    fig = forecast_vs_actual(frame, series=["l4-infer/demand_gpus"])
    (actual,) = [line for line in fig.get_axes()[0].get_lines() if line.get_label() == "actual"]
    y = np.asarray(actual.get_ydata(), dtype=float)
    # Three windows: their 36 actuals, broken by one missing value between neighbours.
    assert np.isfinite(y).sum() == 36
    runs = np.split(y, np.flatnonzero(np.isnan(y)))
    assert [int(np.isfinite(run).sum()) for run in runs] == [12, 12, 12]


def test_contiguous_windows_stay_one_line() -> None:
    fig = forecast_vs_actual(_backtest(n_series=1))
    (actual,) = [line for line in fig.get_axes()[0].get_lines() if line.get_label() == "actual"]
    assert not np.isnan(np.asarray(actual.get_ydata(), dtype=float)).any()
