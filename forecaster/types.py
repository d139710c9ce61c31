"""Shared names and type aliases of the series contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import pandas as pd

UID: Final = "unique_id"
DS: Final = "ds"
Y: Final = "y"
MODEL: Final = "model"
MEAN: Final = "mean"
CUTOFF: Final = "cutoff"
STEP: Final = "step"
"""Column of forecast frames: 1-based steps ahead of the last observation."""

SERIES_COLUMNS: Final = (UID, DS, Y)

DEFAULT_LEVELS: Final[tuple[float, ...]] = (0.5, 0.9, 0.95)
"""Quantile levels every model predicts unless told otherwise."""

SeriesFrame = pd.DataFrame
"""Long frame with columns ``unique_id`` (str), ``ds`` (UTC), ``y`` (float)."""

ForecastFrame = pd.DataFrame
"""Frame ``unique_id, ds, model, mean, q<level>...`` (plus ``step``)."""

Levels = Sequence[float]

Progress = Callable[[str, int, int], None]
"""Progress callback: ``(stage, done, total)``, as ``pipelines.reporting.progress_bar``."""


def quantile_column(level: float) -> str:
    """Return the forecast-frame column name of a quantile level, e.g. ``q0.9``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {level}")
    return f"q{level:g}"
