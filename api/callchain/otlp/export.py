"""``POST /v1/traces``: its body decoded into spans, and the OTLP answer to it."""

from __future__ import annotations

from typing import Final

from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from api.callchain.otlp.json_mapping import decode_json_batch
from api.callchain.otlp.media import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    JSON,
    PROTOBUF,
    decompress,
    media_type,
)
from api.callchain.otlp.protobuf import decode_protobuf_batch
from api.callchain.types import Decoded, UnsupportedMediaTypeError

_PROTOBUF_TYPES: Final = frozenset({PROTOBUF, "application/protobuf"})


def decode_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None = None,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Decoded:
    """Decode the body of ``POST /v1/traces``: its valid spans and the rejected ones.

    Args:
        content_type: the ``Content-Type`` header; parameters such as ``charset`` are
            ignored.
        content_encoding: the ``Content-Encoding`` header: None, ``identity``, ``gzip``
            or ``deflate`` (the Collector's otlphttp exporter gzips by default).
        max_decompressed_bytes: the largest body accepted once decompressed.

    Returns:
        The valid spans in request order and a message per invalid span (a span that
        ends before it starts, is its own parent, has no start, a bad id ...): OTLP
        partial success, answered with :func:`export_response`.

    Raises:
        UnsupportedMediaTypeError: the content type or encoding is not one of those above.
        PayloadTooLargeError: the decompressed body exceeds ``max_decompressed_bytes``.
        DataValidationError: the body is not an export request at all (not JSON, too
            deeply nested, not protobuf, a resource without a string service name).
    """
    media = media_type(content_type)
    raw = decompress(body, content_encoding, max_decompressed_bytes)
    if media in _PROTOBUF_TYPES:
        return decode_protobuf_batch(raw)
    if media == JSON:
        return decode_json_batch(raw)
    raise UnsupportedMediaTypeError(
        f"content type {content_type!r} is not supported for traces; send OTLP as "
        f"{PROTOBUF!r} or {JSON!r}"
    )


def export_response(content_type: str | None, decoded: Decoded | None = None) -> tuple[bytes, str]:
    """Return the success body and its media type for an OTLP export in ``content_type``.

    OTLP/HTTP answers in the encoding of the request: an ``ExportTraceServiceResponse``
    as protobuf or in the OTLP JSON mapping. It is empty (``{}`` in JSON) when every
    span was accepted; otherwise its ``partial_success`` holds ``rejected_spans`` and
    an ``error_message`` naming the first rejected spans and why.
    """
    reply = ExportTraceServiceResponse()
    if decoded is not None and decoded.rejected:
        reply.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=len(decoded.rejected), error_message=decoded.summary()
            )
        )
    if media_type(content_type) == JSON:
        if not decoded or not decoded.rejected:
            return b"{}", JSON
        text = json_format.MessageToJson(reply, indent=None)
        return str(text).encode(), JSON
    return reply.SerializeToString(), PROTOBUF
