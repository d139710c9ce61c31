"""Metric keys of a training run: pure functions from score frames to MLflow metrics.

Details: docs/forecasting.md, "Notes from the code", `forecaster/run_metrics.py`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from forecaster.metrics import relative_mase, score_backtest
from forecaster.types import CUTOFF, MODEL, PERSISTENCE, UID, SeriesId, quantile_column

HORIZON_COLUMN = "horizon"
"""Column of score frames holding the horizon label (``10min``, ``1h``...)."""
SCORE_KEYS = (UID, MODEL, HORIZON_COLUMN)
_NOT_METRICS = frozenset({*SCORE_KEYS, "n_windows"})
_MAX_KEY_LENGTH = 250


def metric_key(*parts: str) -> str:
    """Join parts into a metric key MLflow accepts on every platform.

    MLflow keys allow alphanumerics, ``_ - . /`` and spaces and must be normalised
    paths; anything else in a part (a model alias, a horizon label) becomes ``_``.
    """
    clean = []
    for part in parts:
        safe = re.sub(r"[^\w.\- ]", "_", str(part)).strip() or "_"
        clean.append("_" if set(safe) == {"."} else safe)
    return "/".join(clean)[:_MAX_KEY_LENGTH]


def summary_metrics(
    scores: pd.DataFrame, champions: Mapping[str, str] | None = None
) -> dict[str, float]:
    """Aggregate a score frame into ``<metric>/<model>/<horizon>`` means over series.

    Args:
        scores: one row per ``unique_id, model, horizon`` with metric columns.
        champions: optional ``unique_id -> model`` routing; adds
            ``<metric>/champion/<horizon>`` over each series' own champion rows.

    Returns:
        Metric key to the mean of its finite values (keys with none are left out).
    """
    missing = [c for c in SCORE_KEYS if c not in scores.columns]
    if missing:
        raise ValueError(f"score frame lacks columns {missing}; it needs {list(SCORE_KEYS)}")
    value_cols = [
        c
        for c in scores.columns
        if c not in _NOT_METRICS and pd.api.types.is_numeric_dtype(scores[c])
    ]
    groups: list[tuple[str, pd.DataFrame]] = [
        (str(model), frame) for model, frame in scores.groupby(MODEL, sort=True)
    ]
    if champions:
        chosen = scores[scores[UID].map(champions).eq(scores[MODEL])]
        groups.append(("champion", chosen))
    out: dict[str, float] = {}
    for model, frame in groups:
        for horizon, rows in frame.groupby(HORIZON_COLUMN, sort=False):
            for col in value_cols:
                values = rows[col].to_numpy(dtype=np.float64)
                values = values[np.isfinite(values)]
                if values.size:
                    out[metric_key(col, model, str(horizon))] = float(values.mean())
    return out


def describe_pools(unique_ids: Iterable[str], max_chars: int | None = None) -> str:
    """Return the sorted, comma-separated pools of ``<pool>/<signal>`` series ids.

    With ``max_chars``, as many pools as fit, then how many more there are (e.g.
    ``a100,h100,... (+998 of 1000)``), so a tag stays within MLflow's length limit.
    """
    pools = sorted({SeriesId.of(uid).pool for uid in unique_ids})
    text = ",".join(pools)
    if max_chars is None or len(text) <= max_chars:
        return text

    def shortened(count: int) -> str:
        return ",".join([*pools[:count], f"... (+{len(pools) - count} of {len(pools)})"])

    count = 0
    while count < len(pools) and len(shortened(count + 1)) <= max_chars:
        count += 1
    return shortened(count)


WINDOW_PREFIX = "window"
"""Prefix of the per-window series; their ``step`` is the window's index."""
_WINDOW_SCORES = ("mase", "pinball")


def window_steps(
    frame: pd.DataFrame, heldout_from: Mapping[str, pd.Timestamp], n_selection: int
) -> pd.Series:
    """Each backtest row's window index, the same for every series.

    Selection windows are ``0 .. n_selection - 1`` and held-out ones follow
    (``n_selection``, ``n_selection + 1``...), each series' cutoffs in time order; when
    only the held-out windows were backtested they keep their place after the
    (unfitted) selection windows, so a step means the same window in every run of a plan.

    Args:
        frame: backtest frame with ``unique_id`` and ``cutoff``.
        heldout_from: ``{unique_id: first held-out cutoff}``; a series absent from it
            has selection windows only.
        n_selection: the plan's number of selection windows.
    """
    cuts = frame[[UID, CUTOFF]].drop_duplicates()
    # The same rule as forecaster.backtest.split_heldout, so steps and scores agree.
    first = cuts[UID].astype(str).map(heldout_from)
    held = cuts[CUTOFF].ge(first).fillna(False).astype(bool)
    rank = cuts.groupby([cuts[UID], held], observed=True)[CUTOFF].rank(method="dense") - 1
    before = (~held).groupby(cuts[UID], observed=True).transform("sum")
    step = np.where(held, n_selection + rank, n_selection - before + rank).astype(int)
    index = pd.MultiIndex.from_frame(cuts)
    looked_up = pd.Series(step, index=index).reindex(pd.MultiIndex.from_frame(frame[[UID, CUTOFF]]))
    return pd.Series(looked_up.to_numpy(dtype=int), index=frame.index, name="window")


def window_metrics(
    frame: pd.DataFrame,
    scales: pd.DataFrame,
    selection: Mapping[str, str],
    steps: pd.Series,
    *,
    levels: Sequence[float],
    horizons: Mapping[str, int],
) -> list[tuple[str, int, float]]:
    """The champion's and persistence's scores per backtest window, for stepped metrics.

    Per window and horizon, means over series of ``mase``, ``pinball`` and the
    coverage of the top quantile: ``window/champion/<metric>_<horizon>`` and
    ``window/persistence/<metric>_<horizon>``, and the geometric mean over series of
    the champion's MASE relative to persistence's, ``window/mase_vs_persistence/<horizon>``
    (:func:`forecaster.metrics.relative_mase`, the gate's measure, on one window).

    Args:
        frame: backtest frame (``forecaster.backtest``'s), every model's rows.
        scales: its ``unique_id, cutoff, scale``.
        selection: each series' champion model.
        steps: each row's window index (:func:`window_steps`).
        levels: quantile levels scored; the top one's coverage is logged.
        horizons: horizon label to steps.

    Returns:
        ``(key, step, value)`` triples; non-finite values are left out.
    """
    top = quantile_column(max(levels)) if levels else None
    names = [*_WINDOW_SCORES, *([f"coverage_{top}"] if top else [])]
    out: list[tuple[str, int, float]] = []
    for window in sorted(set(steps.to_numpy(dtype=int).tolist())):
        rows = frame[steps.to_numpy(dtype=int) == window]
        scores = score_backtest(rows, scales, levels, horizons)
        chosen = scores[scores[UID].astype(str).map(selection).eq(scores[MODEL])]
        for role, part in (
            ("champion", chosen),
            (PERSISTENCE, scores[scores[MODEL].eq(PERSISTENCE)]),
        ):
            means = part.groupby(HORIZON_COLUMN, sort=False)[names].mean()
            for horizon, values in means.iterrows():
                for name in names:
                    key = metric_key(WINDOW_PREFIX, role, f"{name}_{horizon}")
                    out.append((key, window, float(values[name])))
        for horizon, cells in scores.groupby(HORIZON_COLUMN, sort=False):
            relative = relative_mase(cells, selection, PERSISTENCE)
            if relative is not None:
                key = metric_key(WINDOW_PREFIX, "mase_vs_persistence", str(horizon))
                out.append((key, window, relative.geomean))
    return [(k, s, v) for k, s, v in out if np.isfinite(v)]
