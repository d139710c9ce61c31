"""serve_frame looks each series up once: the same frame as the row-by-row original."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.peak.online import WARMUP, anchor, day_rule, steps_per_day
from forecaster.peak.recovery import held_level
from forecaster.peak.reference import SEASON
from forecaster.peak.serving import RAW_PREFIX, RETURN_LEVEL
from forecaster.peak.types import LAST, LEAD, SCALE
from forecaster.types import DS, UID, Y, quantile_column
from tests.forecaster.peak.serving import serve_frame, served_bounds

STEP = pd.Timedelta(minutes=10)
LEVELS = (0.5, 0.9, 0.95)
COLUMNS = [quantile_column(q) for q in LEVELS]


def rowwise(
    fresh: pd.DataFrame, history: pd.DataFrame, earlier: pd.DataFrame, step: pd.Timedelta
) -> pd.DataFrame:
    """The former serve_frame, one row and one filter of ``earlier`` at a time."""
    out = fresh.copy()
    for column in COLUMNS:
        out[f"{RAW_PREFIX}{column}"] = fresh[column]
    out[RETURN_LEVEL] = math.nan
    rule = day_rule(steps_per_day(step))
    targets = history.set_index([UID, DS])[Y]
    for i, row in fresh.iterrows():
        uid, origin, lead = str(row[UID]), pd.Timestamp(row[DS]), int(row[LEAD])
        grid = pd.date_range(anchor(origin, WARMUP) - SEASON, origin, freq=step)
        try:
            series = targets.xs(uid, level=UID)
            series = series[~series.index.duplicated(keep="last")]
            y = series.reindex(grid).to_numpy(dtype=np.float64)
        except KeyError:
            y = np.full(len(grid), np.nan)
        past = earlier[(earlier[UID] == uid) & (earlier[LEAD] == lead)]
        past = past[[c for c in (DS, SCALE, *COLUMNS) if c in past.columns]]
        past = past.drop_duplicates(DS, keep="last").set_index(DS).reindex(grid)
        raw = past.reindex(columns=COLUMNS).to_numpy(dtype=np.float64)
        scale = past.reindex(columns=[SCALE]).to_numpy(dtype=np.float64)[:, 0]
        raw[-1] = row[COLUMNS].to_numpy(dtype=np.float64)
        scale[-1] = float(row[SCALE])
        bounds = served_bounds(grid, y, raw, scale, LEVELS, lead, step=step)
        out.loc[i, COLUMNS] = bounds
        out.loc[i, RETURN_LEVEL] = held_level(y, len(y) - 1, rule)
    return out


def random_case(seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Three pools (one without history), leads 1 and 2, repeated and missing forecasts."""
    rng = np.random.default_rng(seed)
    ds = pd.date_range("2024-05-01", periods=9 * 144, freq=STEP, tz="UTC")
    pools = ["a/demand_gpus", "b/demand_gpus"]
    history = pd.concat(
        pd.DataFrame({UID: uid, DS: ds, Y: rng.poisson(30.0, len(ds)).astype(float)})
        for uid in pools
    )
    history = history.drop(index=rng.choice(len(history), 200, replace=False), errors="ignore")
    history = history.sample(frac=1.0, random_state=seed)  # any order
    rows = []
    for uid in [*pools, "c/demand_gpus"]:
        for lead in (1, 2):
            for origin in ds[-3 * 144 :: 3]:
                base = 30.0 + rng.normal(0.0, 3.0)
                bounds = np.sort(base + rng.gamma(2.0, 3.0, len(LEVELS)))
                rows.append([uid, origin, lead, base, rng.uniform(1.0, 5.0), *bounds])
    frame = pd.DataFrame(rows, columns=[UID, DS, LEAD, LAST, SCALE, *COLUMNS])
    later = frame[DS] >= ds[-1] - 2 * STEP
    fresh = frame[later].sample(frac=1.0, random_state=seed).reset_index(drop=True)
    earlier = frame[~later].sample(frac=0.8, random_state=seed)
    repeated = earlier.sample(frac=0.1, random_state=seed + 1).assign(
        **{c: lambda f, c=c: f[c] + 1.0 for c in COLUMNS}
    )
    return fresh, history, pd.concat([earlier, repeated], ignore_index=True)


def test_serve_frame_equals_the_row_by_row_original_on_random_input() -> None:
    for seed in (1, 2):
        fresh, history, earlier = random_case(seed)
        got = serve_frame(fresh, history, earlier, STEP)
        pd.testing.assert_frame_equal(got, rowwise(fresh, history, earlier, STEP))
        assert np.isfinite(got[COLUMNS].to_numpy()).all()
