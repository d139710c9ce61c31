"""Live scores: stored forecasts against the actuals that arrived since (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from forecaster.contract.regularise import mode_step
from forecaster.metrics import SCALE, naive_scale, score_backtest
from forecaster.types import CUTOFF, DS, MEAN, MODEL, STEP, UID, Levels, Y, quantile_column
from pipelines.store.forecasts import GENERATED_AT, MODEL_VERSION


def live_frame(forecasts: pd.DataFrame, actuals: pd.DataFrame) -> pd.DataFrame:
    """Join forecast rows with the actuals of their target times (rows without one dropped).

    Returns:
        The forecast columns plus ``y``, and ``cutoff`` = ``generated_at`` so that each
        stored forecast is one window to :func:`score_backtest`.
    """
    joined = forecasts.merge(actuals[[UID, DS, Y]], on=[UID, DS], how="inner")
    joined = joined[np.isfinite(joined[Y].to_numpy(dtype=np.float64))]
    out: pd.DataFrame = joined.assign(**{CUTOFF: joined[GENERATED_AT]})
    return out.reset_index(drop=True)


def live_scales(frame: pd.DataFrame, history: pd.DataFrame, max_train: int) -> pd.DataFrame:
    """The naive scale of each window: its series' last ``max_train`` values before step 1.

    Returns:
        ``unique_id, cutoff, scale`` (NaN when the history is too short or constant).
    """
    first = frame[frame[STEP] == frame.groupby([UID, CUTOFF])[STEP].transform("min")]
    rows = []
    by_series = {str(uid): part for uid, part in history.groupby(UID)}
    for uid, cutoff, ds, step in first[[UID, CUTOFF, DS, STEP]].itertuples(index=False):
        part = by_series.get(str(uid))
        if part is None:
            rows.append((uid, cutoff, np.nan))
            continue
        step_len = mode_step(part[DS]) or pd.Timedelta(0)
        known_until = ds - int(step) * step_len
        values = part.loc[part[DS] <= known_until, Y].to_numpy(dtype=np.float64)[-max_train:]
        rows.append((uid, cutoff, naive_scale(values)))
    return pd.DataFrame(rows, columns=[UID, CUTOFF, SCALE])


def live_scores(
    frame: pd.DataFrame,
    scales: pd.DataFrame,
    levels: Levels,
    horizons: Mapping[str, int],
) -> pd.DataFrame:
    """Score live windows per series, model version and horizon.

    The ``model`` column of the scores is the model version that made the forecasts,
    so a retrained champion is scored apart from its predecessor.
    """
    present = [level for level in levels if quantile_column(level) in frame.columns]
    scored = frame.assign(**{MODEL: frame[MODEL_VERSION].astype(str)})
    columns = [UID, DS, CUTOFF, STEP, MODEL, MEAN, Y, *map(quantile_column, present)]
    return score_backtest(scored[columns], scales, present, horizons)
