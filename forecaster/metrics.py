"""Forecast accuracy metrics: pure functions over backtest frames (docs/forecasting.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.types import (
    CUTOFF,
    MEAN,
    MODEL,
    PERSISTENCE,
    STEP,
    UID,
    Levels,
    Y,
    quantile_column,
    quantile_levels,
)

ArrayLike = npt.ArrayLike
HORIZON: Final = "horizon"
"""Column of score frames: the horizon label, e.g. ``1h`` or ``h36``."""
SCALE: Final = "scale"
"""Column of scale frames: the naive in-sample MAE of a window's training data."""
N_WINDOWS: Final = "n_windows"


def naive_scale(y_train: ArrayLike, period: int = 1) -> float:
    """Return the in-sample MAE of the naive forecast ``period`` steps back.

    Args:
        y_train: the training values of one window, oldest first.
        period: the lag of the naive forecast (1 = persistence, as MASE uses).

    Returns:
        The mean of ``|y[t] - y[t - period]|``; NaN when the window is constant (the
        scale would be 0) or shorter than ``period + 1``, so that the window is left
        out of MASE averages instead of producing infinities.
    """
    if period < 1:
        raise ValueError(f"period must be >= 1, got {period}")
    y = np.asarray(y_train, dtype=np.float64).ravel()
    if y.size <= period:
        return float("nan")
    diffs = np.abs(y[period:] - y[:-period])
    diffs = diffs[np.isfinite(diffs)]
    if diffs.size == 0:
        return float("nan")
    scale = float(diffs.mean())
    return scale if scale > 0.0 else float("nan")


def horizon_steps(labels: Mapping[str, str] | list[str], step: pd.Timedelta) -> dict[str, int]:
    """Map horizon labels such as ``10min``, ``1h``, ``3h`` to step counts.

    Args:
        labels: pandas offset strings (a list, or a mapping whose values are used and
            whose keys become the labels).
        step: the series' sampling step.

    Raises:
        ValueError: when a horizon is not a positive whole number of steps.
    """
    pairs = labels.items() if isinstance(labels, Mapping) else ((s, s) for s in labels)
    out: dict[str, int] = {}
    for label, text in pairs:
        span = pd.Timedelta(text)
        steps, rest = divmod(span, step)
        if rest != pd.Timedelta(0) or steps < 1:
            raise ValueError(f"horizon {text!r} is not a positive multiple of the step {step}")
        out[label] = int(steps)
    return out


def score_backtest(
    frame: pd.DataFrame,
    scales: pd.DataFrame,
    levels: Levels | None = None,
    horizons: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Score a backtest frame per series, model and horizon.

    Args:
        frame: backtest frame ``unique_id, ds, cutoff, step, model, mean, q<level>..., y``.
        scales: frame ``unique_id, cutoff, scale`` (naive scale of each window).
        levels: quantile levels to score; ``None`` takes every ``q<level>`` column.
        horizons: horizon label -> number of steps (steps ``1..n`` are scored);
            ``None`` scores all steps under the one label ``h<max step>``.

    Returns:
        One row per ``unique_id, model, horizon`` with ``mase`` (mean over windows of
        the window's MAE / scale, windows with NaN scale left out), ``smape``,
        ``mae``, ``pinball_q<l>`` and ``coverage_q<l>`` per level (means over all
        scored rows), ``pinball`` (mean over levels) and ``n_windows`` (cutoffs scored).
    """
    if levels is None:
        levels = quantile_levels(frame.columns)
    missing = {UID, CUTOFF, STEP, MODEL, MEAN, Y} - set(frame.columns)
    missing |= {quantile_column(lv) for lv in levels} - set(frame.columns)
    if missing:
        raise ValueError(f"backtest frame lacks columns {sorted(missing)}")
    if horizons is None:
        max_step = int(frame[STEP].max()) if len(frame) else 0
        horizons = {f"h{max_step}": max_step}
    keys = [UID, MODEL, CUTOFF]
    base = frame.merge(scales[[UID, CUTOFF, SCALE]], on=[UID, CUTOFF], how="left")
    y = base[Y].to_numpy(dtype=np.float64)
    mean = base[MEAN].to_numpy(dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(mean)
    err = np.where(ok, np.abs(y - mean), np.nan)
    den = np.abs(y) + np.abs(mean)
    sm = np.where(den > 0.0, 200.0 * err / np.where(den > 0.0, den, 1.0), 0.0)
    cols: dict[str, npt.NDArray[np.float64]] = {"_err": err, "_smape": np.where(ok, sm, np.nan)}
    for lv in levels:
        q = base[quantile_column(lv)].to_numpy(dtype=np.float64)
        okq = np.isfinite(y) & np.isfinite(q)
        d = y - q
        cols[f"pinball_{quantile_column(lv)}"] = np.where(
            okq, np.maximum(lv * d, (lv - 1.0) * d), np.nan
        )
        cols[f"coverage_{quantile_column(lv)}"] = np.where(okq, (y <= q).astype(float), np.nan)
    rows = pd.concat([base[[*keys, STEP, SCALE]], pd.DataFrame(cols, index=base.index)], axis=1)
    pin_cols = [f"pinball_{quantile_column(lv)}" for lv in levels]
    cov_cols = [f"coverage_{quantile_column(lv)}" for lv in levels]
    out = []
    for label, n_steps in horizons.items():
        part = rows[rows[STEP] <= n_steps]
        per_window = part.groupby(keys, sort=True, observed=True).agg(
            _mae=("_err", "mean"), _scale=(SCALE, "first")
        )
        scale = per_window["_scale"].where(per_window["_scale"] > 0.0)
        per_window["_mase"] = per_window["_mae"] / scale
        by_model = per_window.groupby([UID, MODEL], sort=True, observed=True)
        scored = pd.DataFrame(
            {
                "mase": by_model["_mase"].mean(),
                N_WINDOWS: by_model.size(),
            }
        )
        means = part.groupby([UID, MODEL], sort=True, observed=True)[
            ["_smape", "_err", *pin_cols, *cov_cols]
        ].mean()
        scored = scored.join(means.rename(columns={"_smape": "smape", "_err": "mae"}))
        scored["pinball"] = scored[pin_cols].mean(axis=1) if pin_cols else np.nan
        scored.insert(0, HORIZON, label)
        out.append(scored.reset_index())
    columns = [UID, MODEL, HORIZON, "mase", "smape", "mae", "pinball", *pin_cols, *cov_cols]
    if not out:
        return pd.DataFrame(columns=[*columns, N_WINDOWS])
    result = pd.concat(out, ignore_index=True)
    return result[[*columns, N_WINDOWS]]


@dataclass(frozen=True)
class RelativeMase:
    """The champion's MASE relative to a reference's, over series x horizon cells.

    Attributes:
        geomean: geometric mean of the per-cell ratios (the M-competitions' relative
            measure: one cell's 10x cannot outweigh ten cells' 0.9x, and a ratio and
            its inverse cancel); NaN when no cell counts.
        ratio_of_means: mean champion MASE over mean reference MASE, on the same cells.
        worst: the highest per-cell ratio; NaN when no cell counts.
        worst_cell: ``(unique_id, horizon)`` of ``worst``; None when no cell counts.
        left_out: cells left out: the reference's MASE is 0 or undefined there (a flat
            window), or the champion's is undefined or 0 (no ratio has a logarithm).
    """

    geomean: float
    ratio_of_means: float
    worst: float
    worst_cell: tuple[str, str] | None
    cells: int
    left_out: int


def relative_mase(
    scores: pd.DataFrame, champions: Mapping[str, str], reference: str = PERSISTENCE
) -> RelativeMase | None:
    """Compare each series' champion with ``reference`` cell by cell on a score frame.

    Args:
        scores: ``score_backtest``'s frame (``unique_id, model, horizon, mase``).
        champions: ``unique_id -> model`` of the champion's rows.
        reference: the model every cell is divided by.

    Returns:
        The summary; None when ``scores`` has no ``reference`` rows to compare with.
    """
    if scores.empty or not scores[MODEL].eq(reference).any():
        return None
    keys = [UID, HORIZON]
    chosen = scores[scores[UID].astype(str).map(champions).eq(scores[MODEL])]
    base = scores[scores[MODEL].eq(reference)]
    cells = chosen[[*keys, "mase"]].merge(
        base[[*keys, "mase"]], on=keys, suffixes=("_champion", "_reference")
    )
    new = cells["mase_champion"].to_numpy(dtype=np.float64)
    old = cells["mase_reference"].to_numpy(dtype=np.float64)
    ok = np.isfinite(new) & np.isfinite(old) & (old > 0.0) & (new > 0.0)
    if not ok.any():
        return RelativeMase(np.nan, np.nan, np.nan, None, 0, len(cells))
    ratio = new[ok] / old[ok]
    worst = int(np.argmax(ratio))
    where = cells[ok].iloc[worst]
    return RelativeMase(
        geomean=float(np.exp(np.mean(np.log(ratio)))),
        ratio_of_means=float(new[ok].mean() / old[ok].mean()),
        worst=float(ratio[worst]),
        worst_cell=(str(where[UID]), str(where[HORIZON])),
        cells=int(ok.sum()),
        left_out=int((~ok).sum()),
    )
