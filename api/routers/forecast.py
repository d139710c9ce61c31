"""``GET /forecast/{pool}``: the demand forecast behind a pool's recommendation.

``GET /forecast`` lists each pool's forecast path (a forecast is per pool).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter

from api.deps import PoolName, ServiceDep
from api.schemas import ForecastIndexOut, ForecastOut, ForecastRecord, PeakOut
from forecaster.loaders import DEMAND
from forecaster.types import quantile_column
from pipelines.store.forecasts import GENERATED_AT, MODEL_VERSION

router = APIRouter(tags=["forecasts"])


def _plain(value: Any) -> Any:
    # JSON has no NaN: a quantile a model could not produce is null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@router.get("/forecast", response_model=ForecastIndexOut, summary="Where each pool's forecast is")
def list_forecasts(service: ServiceDep) -> ForecastIndexOut:
    """Return the path of every pool's demand forecast, in the pools file's order."""
    return ForecastIndexOut(forecasts={name: f"/forecast/{name}" for name in service.names})


@router.get(
    "/forecast/{pool}",
    response_model=ForecastOut,
    responses={
        404: {"description": "an unknown pool"},
        503: {"description": "no forecast: no model is loaded or none is stored for the pool"},
    },
    summary="The demand forecast of one pool",
)
def get_forecast(service: ServiceDep, pool: PoolName) -> ForecastOut:
    """Return the stored ``<pool>/demand_gpus`` forecast as records, one per step ahead,
    and the stored quantiles of its peak over the pool's lead time."""
    made = service.forecast(pool)
    # service.forecast raises instead of returning a forecast-less result.
    assert made.frame is not None
    assert made.forecast is not None
    assert made.generated_at is not None
    rows = made.frame.drop(columns=[MODEL_VERSION, GENERATED_AT], errors="ignore")
    records = [
        ForecastRecord.model_validate({str(k): _plain(v) for k, v in row.items()})
        for row in rows.to_dict("records")
    ]
    peak = made.forecast.peak
    return ForecastOut(
        pool=pool,
        series_id=service.pool(pool).series_id(DEMAND),
        model_version=made.model_version,
        generated_at=made.generated_at,
        last_observed=made.last_observed,
        step_seconds=made.step.total_seconds(),
        quantile=made.forecast.level,
        levels=sorted(made.forecast.quantiles),
        records=records,
        peak=None
        if peak is None
        else PeakOut(
            origin=peak.origin,
            window_end=peak.end,
            lead_seconds=peak.lead.total_seconds(),
            last=peak.last,
            quantiles={quantile_column(q): v for q, v in sorted(peak.quantiles.items())},
            return_level=peak.returning,
        ),
        peak_missing=made.forecast.peak_missing,
    )
