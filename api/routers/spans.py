"""``POST /v1/traces`` (OTLP/HTTP) and ``POST /signals/spans`` (the simple span list).

Details: docs/api.md, "Notes from the code", `api/routers/spans.py`."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from functools import partial
from typing import Any, Final

from fastapi import APIRouter, Request, Response, status
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped, unused-ignore]
from pydantic import BaseModel, ConfigDict, Field

from api.callchain.feed import SpanFeed
from api.callchain.otlp.export import decode_export, export_response
from api.callchain.otlp.media import JSON, PROTOBUF, media_type
from api.callchain.spanlist import SpanIn, decode_span_list_batch
from api.callchain.types import (
    Decoded,
    PayloadTooLargeError,
    Span,
    SpanQueueFullError,
    UnsupportedMediaTypeError,
)
from api.deps import ServiceDep, SpanFeedDep
from api.errors import error_body
from api.limits import BodyTooLargeError, body_limit, read_body
from api.sample_checks import TimeWindow
from api.service import RecommendationService
from forecaster.exceptions import DataValidationError

router = APIRouter(tags=["signals"])

_OTLP_TYPES: Final = frozenset({PROTOBUF, "application/protobuf", JSON})


class SpansOut(BaseModel):
    """What a span push did."""

    model_config = ConfigDict(extra="forbid")

    accepted: int = Field(description="valid spans stored (a span sent again replaces it)")
    evicted: int = Field(description="older spans dropped to keep the window bounded")
    window_spans: int = Field(description="spans in the window now")
    rejected: int = Field(default=0, description="invalid spans left out of the request")
    rejected_reasons: list[str] = Field(
        default_factory=list, description="why, per rejected span (the first 10)"
    )


_STATUS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
}

_TRACES_OPENAPI: Final[dict[str, Any]] = {
    "requestBody": {
        "required": True,
        "description": "an OTLP ExportTraceServiceRequest (gzip or deflate allowed)",
        "content": {
            PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
            JSON: {
                "schema": {
                    "type": "object",
                    "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
                }
            },
        },
    },
}


def _error_content(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {
            JSON: {"schema": _STATUS_SCHEMA},
            PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
        },
    }


_TRACES_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {
        "description": "accepted: an ExportTraceServiceResponse in the request's encoding, "
        "empty, or with partial_success {rejected_spans, error_message} when invalid spans "
        "were left out and the valid ones kept",
        "content": {
            JSON: {"schema": {"type": "object"}},
            PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
        },
    },
    400: _error_content(
        "a malformed export request, or one without a valid span (google.rpc.Status)"
    ),
    503: _error_content(
        "span ingestion is behind: nothing of the batch was taken; retry after Retry-After"
    ),
    413: _error_content("the body exceeds service.max_body_bytes, compressed or not"),
    415: _error_content("not application/x-protobuf or application/json, or an unknown encoding"),
}


def _otlp_error(code: int, rpc_code: int, message: str, content_type: str | None) -> Response:
    """Return an OTLP failure: a ``google.rpc.Status`` in the request's encoding."""
    if media_type(content_type) in (PROTOBUF, "application/protobuf"):
        body = status_pb2.Status(code=rpc_code, message=message).SerializeToString()
        return Response(body, status_code=code, media_type=PROTOBUF)
    return Response(
        json.dumps({"code": rpc_code, "message": message}).encode(),
        status_code=code,
        media_type=JSON,
    )


_RETRY_AFTER_S: Final = 1


def _span_times(service: RecommendationService) -> TimeWindow:
    """The times a span may carry: those of a pushed metric sample, on the wall clock."""
    services = service.services
    tolerance = timedelta(seconds=services.settings.service.max_sample_future_seconds)
    return TimeWindow.around(services.wall_clock(), tolerance)


def _decode_traces(
    body: bytes, content_type: str | None, encoding: str | None, limit: int, times: TimeWindow
) -> Decoded:
    """Decode an OTLP export and refuse the spans whose times are outside ``times``."""
    decoded = decode_export(body, content_type, encoding, max_decompressed_bytes=limit)
    return decoded.within(times.earliest, times.latest)


def _decode_span_list(body: bytes, times: TimeWindow) -> Decoded:
    """Decode a span list and refuse the spans whose times are outside ``times``.

    Raises:
        DataValidationError: no span of the list is valid (the route's 422).
    """
    return decode_span_list_batch(body).within(times.earliest, times.latest).require_some()


async def _add(service: RecommendationService, feed: SpanFeed, spans: list[Span]) -> SpansOut:
    """Add the spans through the feed; the event loop is free while they are added.

    Raises:
        SpanQueueFullError: ingestion is behind; nothing of the batch was taken.
    """
    fed = await asyncio.wrap_future(feed.submit(spans, service.services.span_clock()))
    return SpansOut(accepted=fed.added, evicted=fed.evicted, window_spans=fed.window_spans)


@router.post(
    "/v1/traces",
    response_class=Response,
    responses=_TRACES_RESPONSES,
    openapi_extra=_TRACES_OPENAPI,
    summary="OTLP/HTTP trace export (protobuf or JSON)",
)
async def export_traces(request: Request, service: ServiceDep, feed: SpanFeedDep) -> Response:
    """Receive spans from an OpenTelemetry SDK's OTLP/HTTP exporter or a Collector.

    Point the exporter at ``http://<host>:<port>/v1/traces``. Spans count towards the
    call-chain analysis of the services the pools list.
    """
    content_type = request.headers.get("content-type")
    if media_type(content_type) not in _OTLP_TYPES:
        return _otlp_error(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            code_pb2.INVALID_ARGUMENT,
            f"content type {content_type!r} is not supported; send OTLP as {PROTOBUF!r} "
            f"or {JSON!r}",
            JSON,
        )
    limit = body_limit(request.app)
    try:
        body = await read_body(request, limit)
    except BodyTooLargeError as exc:
        return _otlp_error(exc.status_code, code_pb2.INVALID_ARGUMENT, exc.detail, content_type)
    encoding = request.headers.get("content-encoding")
    times = _span_times(service)
    work = partial(_decode_traces, body, content_type, encoding, limit, times)
    try:
        decoded = await asyncio.wrap_future(feed.decode(work))
        decoded.require_some()
        await _add(service, feed, decoded.spans)
    except PayloadTooLargeError as exc:
        return _otlp_error(413, code_pb2.INVALID_ARGUMENT, str(exc), content_type)
    except UnsupportedMediaTypeError as exc:
        return _otlp_error(415, code_pb2.INVALID_ARGUMENT, str(exc), content_type)
    except DataValidationError as exc:
        return _otlp_error(400, code_pb2.INVALID_ARGUMENT, str(exc), content_type)
    except SpanQueueFullError as exc:
        answer = _otlp_error(503, code_pb2.UNAVAILABLE, str(exc), content_type)
        answer.headers["Retry-After"] = str(_RETRY_AFTER_S)
        return answer
    reply, reply_type = export_response(content_type, decoded)
    return Response(reply, media_type=reply_type)


_SPAN_LIST_OPENAPI: Final[dict[str, Any]] = {
    "requestBody": {
        "required": True,
        "description": "a JSON array of spans (see docs/api.md, 'The span list')",
        "content": {JSON: {"schema": {"type": "array", "items": SpanIn.model_json_schema()}}},
    },
}


@router.post(
    "/signals/spans",
    response_model=SpansOut,
    responses={
        413: {"description": "the body exceeds service.max_body_bytes"},
        415: {"description": "the body is not application/json"},
        503: {
            "description": "span ingestion is behind: nothing of the list was taken; retry "
            "after Retry-After"
        },
        422: {
            "description": "not a JSON array, or no valid span in it; the message names "
            "the index and field"
        },
    },
    openapi_extra=_SPAN_LIST_OPENAPI,
    summary="Push spans as a simple JSON list",
)
async def push_spans(request: Request, service: ServiceDep, feed: SpanFeedDep) -> Response:
    """Add spans ``{trace_id, span_id, parent_span_id?, service, start, end | duration_ms}``.

    For senders without an OpenTelemetry exporter; the spans join those from
    ``/v1/traces`` in the call-chain analysis. Invalid spans are left out and counted
    in ``rejected`` (with the first reasons) while the valid ones are stored.
    """
    content_type = request.headers.get("content-type")
    if content_type is not None and media_type(content_type) != JSON:
        body = error_body(
            "unsupported_media_type",
            f"content type {content_type!r} is not supported; send the span list as {JSON!r}",
        )
        return Response(json.dumps(body), status_code=415, media_type=JSON)
    raw = await read_body(request, body_limit(request.app))
    times = _span_times(service)
    try:
        decoded = await asyncio.wrap_future(feed.decode(partial(_decode_span_list, raw, times)))
        done = await _add(service, feed, decoded.spans)
    except SpanQueueFullError as exc:
        body = error_body("ingestion_behind", str(exc))
        return Response(
            json.dumps(body),
            status_code=503,
            media_type=JSON,
            headers={"Retry-After": str(_RETRY_AFTER_S)},
        )
    done.rejected = len(decoded.rejected)
    done.rejected_reasons = decoded.rejected[:10]
    return Response(done.model_dump_json(), media_type=JSON)
