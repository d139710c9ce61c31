"""The forecast job's tasks, in a module light enough to import in every worker.

Details: docs/forecasting.md, "Notes from the code", `forecaster/series_tasks.py`."""

from __future__ import annotations

import pandas as pd

from forecaster.champion import ChampionForecaster
from forecaster.exceptions import ForesightError
from forecaster.peak.fleet import fleet_frame
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.types import Levels
from forecaster.unavailable import Unavailable


def update_predict(
    uid: str, champion: ChampionForecaster, series: pd.DataFrame, horizon: int, levels: Levels
) -> tuple[pd.DataFrame | Unavailable, str]:
    """Update one series' fitted model and forecast; why it was refitted instead, or ""."""
    try:
        fresh = champion.update(series)
        return fresh.predict(horizon, levels), fresh.refits_.get(uid, "")
    except ForesightError as exc:
        return Unavailable.of(exc), ""


def refit_predict(
    prototype: ChampionForecaster, series: pd.DataFrame, horizon: int, levels: Levels
) -> pd.DataFrame | Unavailable:
    """Refit the champion's choice on one series and forecast; why not when it fails."""
    try:
        return prototype.unfitted().fit(series).predict(horizon, levels)
    except ForesightError as exc:
        return Unavailable.of(exc)


def predict_peak(
    model: PeakQuantileForecaster, history: pd.DataFrame
) -> pd.DataFrame | Unavailable:
    """The peak model's pass over the fleet's history; why not when it fails."""
    try:
        return model.predict_peak(fleet_frame(history, model.targets))
    except (ForesightError, ValueError) as exc:
        return Unavailable.of(exc, "the peak forecast failed: ")
