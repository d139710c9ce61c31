"""``POST /signals/metrics``: push samples into the store."""

from __future__ import annotations

from typing import Annotated

import pandas as pd
from fastapi import APIRouter, Body
from pandas.errors import OutOfBoundsDatetime

from api.deps import ServiceDep
from api.ingest import samples_frame
from api.schemas import MAX_SAMPLES_PER_PUSH, IngestOut, MetricSampleIn
from forecaster.exceptions import DataValidationError

router = APIRouter(tags=["signals"])


_SAMPLES_BODY = Body(
    max_length=MAX_SAMPLES_PER_PUSH,
    description="samples {series_id, ts, value}; a repeated (series_id, ts) overwrites",
    examples=[[{"series_id": "a100-train/queue_gpus", "ts": "2025-03-30T23:55:00Z", "value": 16}]],
)


@router.post(
    "/signals/metrics",
    response_model=IngestOut,
    responses={
        400: {"description": "the body is not JSON (e.g. not UTF-8)"},
        413: {"description": "the body exceeds service.max_body_bytes"},
        422: {"description": "a malformed sample, an unknown pool or a negative count"},
    },
    summary="Push metric samples",
)
def push_metrics(
    service: ServiceDep,
    samples: Annotated[list[MetricSampleIn], _SAMPLES_BODY],
) -> IngestOut:
    """Store samples of ``<pool>/<signal>`` series and recompute the pools they touch.

    Pushing ``allocated_gpus`` and ``queue_gpus`` derives ``demand_gpus`` for their
    timestamps. Counts (GPUs, nodes) must be >= 0 and every pool must be configured;
    otherwise nothing is stored and the answer is a 422 naming the offenders.
    """
    try:
        frame = samples_frame((s.series_id, s.ts, s.value) for s in samples)
    except (OverflowError, OutOfBoundsDatetime) as exc:
        # Valid RFC 3339 (year 1 or 9999) but outside what a nanosecond timestamp holds;
        # the message names the sample and the rule, not pandas' words.
        low, high = pd.Timestamp.min.year + 1, pd.Timestamp.max.year - 1
        index = next((i for i, s in enumerate(samples) if not low <= s.ts.year <= high), 0)
        raise DataValidationError(
            f"samples[{index}].ts is outside the years {low}-{high}, which the store cannot "
            "hold; send the observation time in UTC"
        ) from exc
    done = service.ingest(frame)
    return IngestOut(accepted=len(samples), rows_written=done.rows, pools=list(done.pools))
