"""Forecast-vs-actual plots of backtest frames, for MLflow runs and reports.

Details: docs/forecasting.md, "Notes from the code", `forecaster/plotting.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from forecaster.exceptions import DataValidationError
from forecaster.types import CUTOFF, DS, MEAN, MODEL, UID, SeriesId, Y, quantile_column

_REQUIRED = (UID, DS, CUTOFF, MODEL, MEAN, Y)
_PANEL_HEIGHT = 2.4
_PANEL_WIDTH = 3.6
MAX_WINDOWS = 4
"""Most windows (columns) a figure shows: the latest; the held-out ones by default."""
PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
"""Line colours, one per model or policy in turn (the figures of every package)."""


def forecast_vs_actual(
    backtest: pd.DataFrame,
    *,
    series: Sequence[str] | None = None,
    max_series: int = 6,
    level: float = 0.9,
    models: Sequence[str] | Mapping[str, str] | None = None,
    max_windows: int = MAX_WINDOWS,
) -> Figure:
    """Plot actuals against each model's backtest forecasts, a panel per series and window.

    Each row is a series, each column a backtest window (the latest ``max_windows``
    cutoffs), each panel on its own time axis: the actual values and every model's
    mean forecast with its interval band. The band runs from ``q<1-level>`` (or the
    mean when that quantile was not predicted) up to ``q<level>``: autoscaling acts
    on the upper quantile. Rows share their y axis, so windows of a series compare.

    Args:
        backtest: frame ``unique_id, ds, cutoff, model, mean, q<level>..., y``.
        series: series to show (default: the first ``max_series`` ids in sort order).
        max_series: most rows to draw.
        level: the quantile level of the band's upper edge.
        models: models to draw: a list, or ``unique_id -> model`` to draw only each
            series' champion; default all.
        max_windows: most windows (columns) to draw, the latest ones.

    Returns:
        A matplotlib figure on an Agg canvas.

    Raises:
        DataValidationError: columns are missing or a requested series is absent.
    """
    missing = [c for c in _REQUIRED if c not in backtest.columns]
    if missing:
        raise DataValidationError(
            f"backtest frame lacks columns {missing}; it needs {list(_REQUIRED)}."
        )
    chosen = _choose_series(backtest, series, max_series)
    cutoffs = sorted(pd.Timestamp(c) for c in backtest[CUTOFF].unique())[-max(1, max_windows) :]
    upper, lower = quantile_column(level), quantile_column(round(1.0 - level, 10))
    palette = {
        str(m): PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(backtest[MODEL].unique()))
    }
    fig = Figure(
        figsize=(max(6.0, _PANEL_WIDTH * len(cutoffs)), _PANEL_HEIGHT * max(1, len(chosen))),
        layout="constrained",
    )
    FigureCanvasAgg(fig)
    grid = fig.subplots(len(chosen), len(cutoffs), squeeze=False, sharey="row")
    for line, (row, uid) in enumerate(zip(grid, chosen, strict=True)):
        rows = backtest[backtest[UID] == uid]
        wanted = _models_for(uid, rows, models)
        for col, (ax, cutoff) in enumerate(zip(row, cutoffs, strict=True)):
            window = rows[pd.to_datetime(rows[CUTOFF]) == cutoff]
            _draw_panel(ax, window, models=wanted, palette=palette, band=(lower, upper))
            if line == 0:  # windows head the columns once
                ax.set_title(f"window from {cutoff:%Y-%m-%d %H:%M}", fontsize="medium")
            if col == 0:
                ax.set_ylabel(uid, fontsize="small")
    _legend(fig, list(grid.flat))
    return fig


def pool_figures(
    backtest: pd.DataFrame,
    *,
    level: float = 0.9,
    models: Sequence[str] | Mapping[str, str] | None = None,
    max_pools: int | None = None,
) -> dict[str, Figure]:
    """One figure per pool (``<pool>/<signal>`` ids) with a panel for every series of it.

    Args:
        backtest: frame as for :func:`forecast_vs_actual`.
        level: the quantile level of the band's upper edge.
        models: as for :func:`forecast_vs_actual`.
        max_pools: draw only the first pools in sort order (rendering costs about half
            a second per figure); default all.

    Returns:
        Pool name to its figure, in sort order.
    """
    ids = sorted(str(uid) for uid in backtest[UID].unique())
    by_pool: dict[str, list[str]] = {}
    for uid in ids:
        by_pool.setdefault(SeriesId.of(uid).pool, []).append(uid)
    chosen = list(by_pool)[:max_pools] if max_pools is not None else list(by_pool)
    return {
        pool: forecast_vs_actual(
            backtest[backtest[UID].isin(by_pool[pool])],
            series=by_pool[pool],
            max_series=len(by_pool[pool]),
            level=level,
            models=models,
        )
        for pool in chosen
    }


def save_png(fig: Figure, path: Path, dpi: int = 100) -> Path:
    """Write a figure as PNG (creating parent directories) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)  # a figure from elsewhere: render it with Agg too
    fig.savefig(path, format="png", dpi=dpi)
    return path


def _legend(fig: Figure, axes: Sequence[Axes]) -> None:
    # Panels may show different models (champion per series): merge their entries.
    entries: dict[str, Artist] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels, strict=True):
            entries.setdefault(label, handle)
    fig.legend(
        list(entries.values()),
        list(entries),
        loc="outside upper center",
        ncols=min(4, len(entries)),
        fontsize="small",
    )


def _choose_series(backtest: pd.DataFrame, series: Sequence[str] | None, limit: int) -> list[str]:
    available = sorted(str(uid) for uid in backtest[UID].unique())
    if not available:
        raise DataValidationError("backtest frame has no rows to plot.")
    if series is None:
        return available[: max(1, limit)]
    absent = [uid for uid in series if uid not in set(available)]
    if absent:
        raise DataValidationError(
            f"series {absent[:5]} are not in the backtest frame; it holds {len(available)} "
            f"series, e.g. {available[:3]}."
        )
    return list(series)[: max(1, limit)]


def _models_for(
    uid: str, rows: pd.DataFrame, models: Sequence[str] | Mapping[str, str] | None
) -> list[str]:
    present = sorted(str(m) for m in rows[MODEL].unique())
    if models is None:
        return present
    if isinstance(models, Mapping):
        champion = models.get(uid)
        return [champion] if champion in present else present
    return [m for m in present if m in set(models)]


def _draw_panel(
    ax: Axes,
    rows: pd.DataFrame,
    *,
    models: list[str],
    palette: Mapping[str, str],
    band: tuple[str, str],
) -> None:
    """Draw one series' window: actuals, each model's mean and band."""
    lower, upper = band
    actual = rows[[DS, Y]].drop_duplicates(DS).sort_values(DS)
    ax.plot(actual[DS], actual[Y], color="black", linewidth=1.2, label="actual")
    for model in models:
        color = palette[model]
        window = rows[rows[MODEL] == model].sort_values(DS)
        if window.empty:
            continue
        ax.plot(window[DS], window[MEAN], color=color, linewidth=1.0, label=model)
        if upper in window.columns:
            low = window[lower] if lower in window.columns else window[MEAN]
            ax.fill_between(
                window[DS],
                low,
                window[upper],
                color=color,
                alpha=0.18,
                label=f"{model} {low.name}-{upper}",
            )
    # Hours of one window: concise ticks (the day once, then times) stay legible.
    locator = AutoDateLocator(minticks=3, maxticks=6)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.tick_params(labelsize="small")
    ax.grid(alpha=0.3)
