"""``GET /forecast/{pool}``: the demand forecast behind a pool's recommendation.

``GET /forecast`` lists each pool's forecast path (a forecast is per pool).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter

from api.deps import PoolName, ServiceDep
from api.schemas import ForecastIndexOut, ForecastOut, ForecastRecord
from forecaster.loaders import DEMAND

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
        503: {"description": "no forecast: no model is loaded or the history is too short"},
    },
    summary="The demand forecast of one pool",
)
def get_forecast(service: ServiceDep, pool: PoolName) -> ForecastOut:
    """Return the ``<pool>/demand_gpus`` forecast frame as records, one per step ahead."""
    made = service.forecast(pool)
    # service.forecast raises instead of returning a forecast-less result.
    assert made.frame is not None
    assert made.forecast is not None
    records = [
        ForecastRecord.model_validate({str(k): _plain(v) for k, v in row.items()})
        for row in made.frame.to_dict("records")
    ]
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
    )
