"""What a reviewer sees per pool in the MLflow UI: a child run and a backtest figure.

Details: docs/forecasting.md, "Notes from the code", `forecaster/pool_review.py`."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.plotting import pool_figures
from forecaster.tracking import HORIZON_COLUMN, SCORE_KEYS, TrainingRun, metric_key
from forecaster.types import MODEL, UID, SeriesId

MAX_POOL_RUNS = 100
"""Most child runs per training (the first pools in sort order)."""
MAX_POOL_FIGURES = 24
"""Most pool figures per training: rendering one costs about half a second."""
POOL_TAG = "foresight.pool"


def pool_scores(scores: pd.DataFrame, selection: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Each pool's metrics: its series' champion scores and their mean over the pool.

    Args:
        scores: one row per ``unique_id, model, horizon`` with metric columns.
        selection: each series' champion model.

    Returns:
        Pool name to ``<metric>/<horizon>/<signal>`` (and ``.../mean``) values;
        non-finite scores are left out.
    """
    chosen = scores[scores[UID].map(selection).eq(scores[MODEL])]
    value_cols = [
        c
        for c in chosen.columns
        if c not in {*SCORE_KEYS, "n_windows"} and pd.api.types.is_numeric_dtype(chosen[c])
    ]
    out: dict[str, dict[str, float]] = {}
    for record in chosen.to_dict("records"):
        pool, signal = SeriesId.of(str(record[UID]))
        metrics = out.setdefault(pool, {})
        for col in value_cols:
            value = float(record[col])
            if np.isfinite(value):
                metrics[metric_key(col, str(record[HORIZON_COLUMN]), signal or "series")] = value
    for pool, metrics in out.items():
        means: dict[str, list[float]] = {}
        for key, value in metrics.items():
            means.setdefault(key.rsplit("/", 1)[0], []).append(value)
        metrics.update({f"{prefix}/mean": float(np.mean(v)) for prefix, v in means.items()})
        out[pool] = metrics
    return out


def log_pool_review(
    run: TrainingRun,
    champion_rows: pd.DataFrame,
    scores: pd.DataFrame,
    selection: Mapping[str, str],
    *,
    level: float,
) -> None:
    """Log per pool a child run of ``run`` (scores, champions, figure), and the figures.

    Args:
        champion_rows: the backtest rows of each series' champion (model ``champion``).
        selection: each series' champion model.
        level: the quantile level of the figures' bands.
    """
    figures = pool_figures(champion_rows, level=level, max_pools=MAX_POOL_FIGURES)
    by_pool = pool_scores(scores, selection)
    pools = sorted(by_pool)
    run.set_tags(
        {
            "foresight.pool_runs": f"{min(len(pools), MAX_POOL_RUNS)} of {len(pools)} pools",
            "foresight.pool_figures": f"{len(figures)} of {len(pools)} pools",
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        # Rendering is the cost (about half a second a figure): once per pool, the
        # same PNG logged to the training run and to the pool's child run.
        rendered: dict[str, Path] = {}
        for pool, figure in figures.items():
            rendered[pool] = Path(tmp) / f"{len(rendered)}.png"
            figure.savefig(rendered[pool])
            run.log_file(rendered[pool], f"backtest_plots/{pool}.png")
        for pool in pools[:MAX_POOL_RUNS]:
            champions = {
                SeriesId.of(uid).signal or uid: model
                for uid, model in selection.items()
                if SeriesId.of(uid).pool == pool
            }
            with run.child_run(pool, tags={POOL_TAG: pool, "foresight.kind": "pool"}) as child:
                child.log_params(
                    {f"champion.{signal}": model for signal, model in champions.items()}
                )
                child.log_metrics(by_pool[pool])
                if pool in rendered:
                    child.log_file(rendered[pool], f"backtest_{pool}.png")
