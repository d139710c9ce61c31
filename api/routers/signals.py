"""``POST /signals/metrics``: push samples into the store, off the event loop (docs/api.md)."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError, WithJsonSchema

from api.deps import ServiceDep
from api.ingest import pushed_rows
from api.schemas import MAX_SAMPLES_PER_PUSH, IngestOut, MetricSampleIn
from api.service import RecommendationService

router = APIRouter(tags=["signals"])

_SAMPLES: Final = TypeAdapter(list[MetricSampleIn])


_SAMPLES_BODY = Body(max_length=MAX_SAMPLES_PER_PUSH)

_SAMPLES_SCHEMA: Final = WithJsonSchema(
    {
        "type": "array",
        "title": "Samples",
        "items": _SAMPLES.json_schema()["$defs"]["MetricSampleIn"],
        "maxItems": MAX_SAMPLES_PER_PUSH,
        "description": "samples {series_id, ts, value}; a repeated (series_id, ts) overwrites",
        "examples": [
            [{"series_id": "a100-train/queue_gpus", "ts": "2025-03-30T23:55:00Z", "value": 16}]
        ],
    }
)
"""The body as the worker thread validates it (the framework only checks it is a list)."""


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
    samples: Annotated[list[Any], _SAMPLES_SCHEMA, _SAMPLES_BODY],
) -> Response:
    """Store samples of ``<pool>/<signal>`` series and recompute the pools they touch.

    Pushing ``allocated_gpus`` and ``queue_gpus`` derives ``demand_gpus`` for their
    timestamps. Counts (GPUs, nodes) must be >= 0 and every pool must be configured;
    otherwise nothing is stored and the answer is a 422 naming the offenders.
    """
    try:
        # As the framework validates a body (hence its words for an item that is no object).
        checked = _SAMPLES.validate_python(samples, from_attributes=True)
    except ValidationError as exc:
        # The framework's own shape for a body it validated: each location under "body".
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        ) from exc
    done = _store(service, checked)
    return Response(done.model_dump_json(), media_type="application/json")


def _store(service: RecommendationService, samples: list[MetricSampleIn]) -> IngestOut:
    """Store validated samples and recompute the pools they touch."""
    rows = pushed_rows((s.series_id, s.ts, s.value) for s in samples)
    done = service.ingest(rows)
    return IngestOut(accepted=len(samples), rows_written=done.rows, pools=list(done.pools))
