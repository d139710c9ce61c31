"""Forecast-vs-actual plots of backtest frames, for MLflow runs and reports.

Figures are built on matplotlib's object API with an Agg canvas: no pyplot, so no
global figure registry that grows in a long-running process and no GUI backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from forecaster.exceptions import DataValidationError
from forecaster.types import CUTOFF, DS, MEAN, MODEL, UID, SeriesId, Y, quantile_column

_REQUIRED = (UID, DS, CUTOFF, MODEL, MEAN, Y)
_PANEL_HEIGHT = 2.6
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def forecast_vs_actual(
    backtest: pd.DataFrame,
    *,
    series: Sequence[str] | None = None,
    max_series: int = 6,
    level: float = 0.9,
    models: Sequence[str] | Mapping[str, str] | None = None,
) -> Figure:
    """Plot actuals against each model's backtest forecasts, one panel per series.

    Each panel shows the actual values, every model's mean forecast per cutoff window
    with its interval band, and the cutoffs as dashed vertical lines. The band runs
    from ``q<1-level>`` (or the mean when that quantile was not predicted) up to
    ``q<level>``: autoscaling acts on the upper quantile.

    Args:
        backtest: frame ``unique_id, ds, cutoff, model, mean, q<level>..., y``.
        series: series to show (default: the first ``max_series`` ids in sort order).
        max_series: most panels to draw.
        level: the quantile level of the band's upper edge.
        models: models to draw: a list, or ``unique_id -> model`` to draw only each
            series' champion; default all.

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
    upper, lower = quantile_column(level), quantile_column(round(1.0 - level, 10))
    palette = {
        str(m): _COLORS[i % len(_COLORS)] for i, m in enumerate(sorted(backtest[MODEL].unique()))
    }
    fig = Figure(figsize=(10.0, _PANEL_HEIGHT * max(1, len(chosen))), layout="constrained")
    FigureCanvasAgg(fig)
    axes: list[Axes] = list(fig.subplots(len(chosen), 1, squeeze=False)[:, 0])
    for ax, uid in zip(axes, chosen, strict=True):
        rows = backtest[backtest[UID] == uid]
        wanted = _models_for(uid, rows, models)
        _draw_panel(ax, uid, rows, models=wanted, palette=palette, band=(lower, upper))
    _legend(fig, axes)
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
    uid: str,
    rows: pd.DataFrame,
    *,
    models: list[str],
    palette: Mapping[str, str],
    band: tuple[str, str],
) -> None:
    lower, upper = band
    actual = _broken_between_windows(rows[[DS, Y]].drop_duplicates(DS).sort_values(DS))
    ax.plot(actual[DS], actual[Y], color="black", linewidth=1.2, label="actual")
    for model in models:
        color = palette[model]
        label: str | None = model
        for _, unsorted in rows[rows[MODEL] == model].groupby(CUTOFF, sort=True):
            window = unsorted.sort_values(DS)
            ax.plot(window[DS], window[MEAN], color=color, linewidth=1.0, label=label)
            if upper in window.columns:
                low = window[lower] if lower in window.columns else window[MEAN]
                band_label = f"{model} {low.name}-{upper}" if label else None
                ax.fill_between(
                    window[DS], low, window[upper], color=color, alpha=0.18, label=band_label
                )
            label = None  # one legend entry per model, not per window
    for cutoff in sorted(rows[CUTOFF].unique()):
        # matplotlib's date units accept timestamps where its stubs say float.
        ax.axvline(pd.Timestamp(cutoff), color="grey", linestyle="--", lw=0.7)  # type: ignore[arg-type]
    ax.set_title(uid, fontsize="medium", loc="left")
    ax.grid(alpha=0.3)


def _broken_between_windows(actual: pd.DataFrame) -> pd.DataFrame:
    """Insert a missing value after each point followed by a gap wider than the step.

    Backtest windows lie apart (a day between cutoffs, say); a line drawn straight
    across the gap would look like data, and matplotlib breaks a line at NaN.
    """
    if len(actual) < 3:
        return actual
    gaps = actual[DS].diff()
    step = gaps.min()
    before_gap = actual.loc[gaps.shift(-1) > step * 1.5]
    if before_gap.empty:
        return actual
    breaks = pd.DataFrame({DS: before_gap[DS] + step, Y: float("nan")})
    return pd.concat([actual, breaks]).sort_values(DS, kind="stable", ignore_index=True)
