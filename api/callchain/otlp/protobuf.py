"""Decode a protobuf ``ExportTraceServiceRequest`` (what the OpenTelemetry SDKs send)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from api.callchain.otlp.media import JSON
from api.callchain.otlp.span import build_span, collect
from api.callchain.types import UNKNOWN_SERVICE, Decoded, Span
from api.pacing import Pacer
from forecaster.exceptions import DataValidationError


def decode_protobuf_batch(body: bytes) -> Decoded:
    """Decode a protobuf ``ExportTraceServiceRequest`` into valid and rejected spans.

    Raises:
        DataValidationError: the bytes are not an export request.
    """
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        raise DataValidationError(
            "the body is not a protobuf ExportTraceServiceRequest (it does not parse, or "
            "nests too deeply); send OTLP/HTTP protobuf or use Content-Type: "
            f"{JSON!r} for OTLP JSON"
        ) from exc
    # Protobuf parses stray bytes as unknown fields; a non-empty request always has
    # resource_spans (its only field), so none means it was some other message.
    if body and not request.resource_spans:
        raise DataValidationError(
            "the protobuf body holds no resource_spans; is it an ExportTraceServiceRequest?"
        )
    decoded = Decoded([], [])
    pacer = Pacer()  # decoding runs in a worker thread: the event loop gets turns
    for r, resource_spans in enumerate(request.resource_spans):
        service = UNKNOWN_SERVICE
        for attribute in resource_spans.resource.attributes:
            if attribute.key == "service.name":
                if attribute.value.WhichOneof("value") != "string_value":
                    raise DataValidationError(
                        f"resourceSpans[{r}].resource service.name must be a string value"
                    )
                service = str(attribute.value.string_value)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                pacer.tick()
                try:
                    # Most spans are valid: their path is formatted only for a message.
                    decoded.spans.append(_protobuf_span("", span, service))
                except DataValidationError:
                    path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                    collect(decoded, _protobuf_span, path, span, service)
    return decoded


def _protobuf_span(path: str, span: Any, service: str) -> Span:
    return build_span(
        path,
        trace_id=bytes(span.trace_id),
        span_id=bytes(span.span_id),
        parent_span_id=bytes(span.parent_span_id),
        service=service,
        name=str(span.name),
        kind=int(span.kind),
        start_ns=int(span.start_time_unix_nano),
        end_ns=int(span.end_time_unix_nano),
        status=int(span.status.code),
    )
