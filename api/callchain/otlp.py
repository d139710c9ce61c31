"""Decode OTLP/HTTP trace exports (protobuf and JSON) into :class:`Span` records.

``POST /v1/traces`` receives an ``ExportTraceServiceRequest``: as protobuf
(``application/x-protobuf``, what the OpenTelemetry SDKs and the Collector send by
default) or in the OTLP JSON mapping (``application/json``: lowerCamelCase keys, trace
and span ids as hex strings, 64-bit times as decimal strings or numbers, enums as
integers). Both paths end in the same span builder, so one trace decodes to equal
records whichever way it came. Anything malformed raises
:class:`~forecaster.exceptions.DataValidationError` naming the field and where it is
(``resourceSpans[0].scopeSpans[0].spans[2].traceId``).

Leniency where real senders differ from the letter of the spec: snake_case keys are
accepted next to camelCase (protobuf's JSON parsers do the same), enum names
(``SPAN_KIND_SERVER``) next to integers, and base64 ids (protobuf's generic JSON
mapping, which some exporters use) next to hex; the lengths tell them apart. A resource
without ``service.name`` is ``unknown_service``, as the OpenTelemetry SDKs name it.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from google.protobuf import json_format  # type: ignore[import-untyped, unused-ignore]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped, unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from api.callchain.jsonload import load_json
from api.callchain.types import (
    SPAN_KINDS,
    SPAN_STATUSES,
    UNKNOWN_SERVICE,
    Decoded,
    PayloadTooLargeError,
    Span,
    UnsupportedMediaTypeError,
)
from api.pacing import Pacer
from forecaster.exceptions import DataValidationError

PROTOBUF: Final = "application/x-protobuf"
"""The OTLP/HTTP protobuf media type."""

JSON: Final = "application/json"
"""The OTLP/HTTP JSON media type."""

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 16 * 1024 * 1024
"""The largest body accepted after decompression (guards against compression bombs)."""

_PROTOBUF_TYPES: Final = frozenset({PROTOBUF, "application/protobuf"})
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8
_UINT64_MAX: Final = 2**64 - 1
_UINT64_DIGITS: Final = len(str(_UINT64_MAX))


def decode_export_request(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None = None,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Span]:
    """Decode the body of ``POST /v1/traces`` into spans, refusing any invalid span.

    The strict form of :func:`decode_export` (same arguments and errors, and a
    :class:`~forecaster.exceptions.DataValidationError` for the first invalid span).
    """
    return decode_export(
        body, content_type, content_encoding, max_decompressed_bytes=max_decompressed_bytes
    ).require_all()


def decode_export(
    body: bytes,
    content_type: str | None,
    content_encoding: str | None = None,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Decoded:
    """Decode the body of ``POST /v1/traces``: its valid spans and the rejected ones.

    Args:
        body: the raw request body.
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


def media_type(content_type: str | None) -> str:
    """Return the bare, lower-case media type of a ``Content-Type`` header ('' if None)."""
    if content_type is None:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Undo a ``Content-Encoding`` of gzip or deflate, never producing more than ``max_bytes``.

    Raises:
        UnsupportedMediaTypeError: the encoding is not identity, gzip or deflate.
        PayloadTooLargeError: the body, decompressed, exceeds ``max_bytes``.
        DataValidationError: the compressed stream is corrupt or truncated.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        raw = body
    elif encoding in {"gzip", "x-gzip", "deflate"}:
        # wbits 32 + 15 accepts both the gzip and the zlib header; decompressing with a cap
        # stops a small bomb from inflating to gigabytes before the size check.
        inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32)
        try:
            raw = inflater.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            raise DataValidationError(
                f"the body is not a valid {encoding} stream (Content-Encoding: {encoding}); "
                "send it compressed whole, or uncompressed without the header"
            ) from exc
        if len(raw) <= max_bytes and not inflater.eof:
            raise DataValidationError(f"the {encoding} body is truncated")
    else:
        raise UnsupportedMediaTypeError(
            f"content encoding {content_encoding!r} is not supported; use gzip, deflate or none"
        )
    if len(raw) > max_bytes:
        raise PayloadTooLargeError(
            f"the trace export is larger than {max_bytes} bytes once decompressed; "
            "send smaller batches"
        )
    return raw


def decode_protobuf(body: bytes) -> list[Span]:
    """Decode a protobuf ``ExportTraceServiceRequest``, refusing any invalid span.

    Raises:
        DataValidationError: the bytes are not an export request, or a span is invalid.
    """
    return decode_protobuf_batch(body).require_all()


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
                    _collect(decoded, _protobuf_span, path, span, service)
    return decoded


def decode_json(body: bytes | str) -> list[Span]:
    """Decode an ``ExportTraceServiceRequest`` in the OTLP JSON mapping, strictly.

    Raises:
        DataValidationError: the body is not JSON, not an export request, or a span is
            invalid; the message gives the path of the offending field.
    """
    return decode_json_batch(body).require_all()


def decode_json_batch(body: bytes | str) -> Decoded:
    """Decode an OTLP JSON ``ExportTraceServiceRequest`` into valid and rejected spans.

    Raises:
        DataValidationError: the body is not JSON or not an export request (its
            structure down to each span being an object); the message gives the path.
    """
    document = load_json(body)
    _require(isinstance(document, Mapping), "the body", "a JSON object with resourceSpans")
    decoded = Decoded([], [])
    pacer = Pacer()
    for r, resource_spans in _items(document, "resourceSpans", ""):
        where = f"resourceSpans[{r}]"
        resource = _get(resource_spans, "resource") or {}
        _require(isinstance(resource, Mapping), f"{where}.resource", "an object")
        service = _service_name(resource, where)
        for s, scope_spans in _items(resource_spans, "scopeSpans", where):
            for i, span in _items(scope_spans, "spans", f"{where}.scopeSpans[{s}]"):
                pacer.tick()
                path = f"{where}.scopeSpans[{s}].spans[{i}]"
                _collect(decoded, _json_span, path, span, service)
    return decoded


def _collect(
    decoded: Decoded,
    build: Callable[[str, Any, str], Span],
    path: str,
    span: Any,
    service: str,
) -> None:
    """Add the span ``build`` makes of ``span``, or why it is invalid, to ``decoded``."""
    try:
        decoded.spans.append(build(path, span, service))
    except DataValidationError as exc:
        decoded.rejected.append(str(exc))


def _protobuf_span(path: str, span: Any, service: str) -> Span:
    return _build_span(
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


def _json_span(path: str, span: Mapping[str, Any], service: str) -> Span:
    status = _get(span, "status") or {}
    _require(isinstance(status, Mapping), f"{path}.status", "an object")
    name = _get(span, "name") or ""
    _require(isinstance(name, str), f"{path}.name", "a string")
    return _build_span(
        path,
        trace_id=_json_id(span, "traceId", _TRACE_ID_BYTES, path),
        span_id=_json_id(span, "spanId", _SPAN_ID_BYTES, path),
        parent_span_id=_json_id(span, "parentSpanId", _SPAN_ID_BYTES, path),
        service=service,
        name=name,
        kind=_json_enum(span, "kind", "SPAN_KIND_", SPAN_KINDS, path),
        start_ns=_json_uint64(span, "startTimeUnixNano", path),
        end_ns=_json_uint64(span, "endTimeUnixNano", path),
        status=_json_enum(status, "code", "STATUS_CODE_", SPAN_STATUSES, f"{path}.status"),
    )


def _build_span(
    path: str,
    *,
    trace_id: bytes,
    span_id: bytes,
    parent_span_id: bytes,
    service: str,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    status: int,
) -> Span:
    """The one place both encodings become a :class:`Span`, so they cannot drift apart."""
    _check_id(trace_id, _TRACE_ID_BYTES, f"{path}.traceId")
    _check_id(span_id, _SPAN_ID_BYTES, f"{path}.spanId")
    if parent_span_id:
        _check_id(parent_span_id, _SPAN_ID_BYTES, f"{path}.parentSpanId")
    # Enum values from a newer OTLP are allowed by the spec; they map to the neutral value.
    kind_name = SPAN_KINDS[kind] if 0 <= kind < len(SPAN_KINDS) else "unspecified"
    status_name = SPAN_STATUSES[status] if 0 <= status < len(SPAN_STATUSES) else "unset"
    if end_ns == 0:
        raise DataValidationError(f"{path}.endTimeUnixNano is missing; export finished spans")
    try:
        return Span(
            trace_id=trace_id.hex(),
            span_id=span_id.hex(),
            parent_span_id=parent_span_id.hex() if parent_span_id else None,
            service=service,
            name=name,
            start_ns=start_ns,
            end_ns=end_ns,
            kind=kind_name,
            status=status_name,
        )
    except DataValidationError as exc:
        raise DataValidationError(f"{path}: {exc}") from exc


def _check_id(value: bytes, size: int, path: str) -> None:
    if len(value) != size:
        raise DataValidationError(f"{path} must be {size} bytes, got {len(value)}")
    if not any(value):
        raise DataValidationError(f"{path} is all zeros, which OTLP defines as invalid")


def _require(condition: bool, path: str, expected: str) -> None:
    if not condition:
        raise DataValidationError(f"{path} must be {expected}")


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    """Return a field by its camelCase name or, failing that, its snake_case name."""
    if camel in obj:
        return obj[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return obj.get(snake)


def _items(obj: Mapping[str, Any], key: str, where: str) -> list[tuple[int, Mapping[str, Any]]]:
    """Return the enumerated objects of a repeated field, checking each is an object."""
    path = f"{where}.{key}" if where else key
    values = _get(obj, key)
    if values is None:
        return []
    _require(isinstance(values, Sequence) and not isinstance(values, str), path, "a list")
    for index, value in enumerate(values):
        _require(isinstance(value, Mapping), f"{path}[{index}]", "an object")
    return list(enumerate(values))


def _service_name(resource: Mapping[str, Any], where: str) -> str:
    for index, attribute in _items(resource, "attributes", f"{where}.resource"):
        if attribute.get("key") != "service.name":
            continue
        value = attribute.get("value")
        text = _get(value, "stringValue") if isinstance(value, Mapping) else None
        _require(
            isinstance(text, str),
            f"{where}.resource.attributes[{index}] (service.name)",
            'a {"stringValue": ...} value',
        )
        return str(text)
    return UNKNOWN_SERVICE


def _json_id(span: Mapping[str, Any], key: str, size: int, path: str) -> bytes:
    value = _get(span, key)
    if value is None or value == "":
        return b""
    _require(isinstance(value, str), f"{path}.{key}", f"a hex string of {2 * size} digits")
    text = str(value)
    try:
        if len(text) == 2 * size:
            return bytes.fromhex(text)
        # base64 of 16 or 8 bytes is 24 or 12 characters, never the hex length.
        if len(text) == 4 * ((size + 2) // 3):
            return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        pass
    raise DataValidationError(
        f"{path}.{key} must be a hex string of {2 * size} digits, got {text!r}"
    )


def _json_uint64(span: Mapping[str, Any], key: str, path: str) -> int:
    value = _get(span, key)
    if value is None:
        raise DataValidationError(f"{path}.{key} is missing; give Unix nanoseconds")
    # JSON numbers arrive as int; 64-bit values are usually decimal strings (OTLP JSON).
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DataValidationError(f"{path}.{key} must be an integer or a decimal string")
    text = str(value).strip()
    # The length check comes first: int() of thousands of digits is slow or refused.
    if (
        len(text) > _UINT64_DIGITS
        or not (text.isascii() and text.isdigit())
        or int(text) > _UINT64_MAX
    ):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise DataValidationError(
            f"{path}.{key} must be Unix nanoseconds as an unsigned 64-bit integer, got {shown!r}"
        )
    return int(text)


def _json_enum(
    obj: Mapping[str, Any], key: str, prefix: str, names: Sequence[str], path: str
) -> int:
    value = _get(obj, key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        wanted = value.upper().removeprefix(prefix).lower()
        if wanted in names:
            return list(names).index(wanted)
    allowed = ", ".join(f"{i} or {prefix}{n.upper()}" for i, n in enumerate(names))
    raise DataValidationError(f"{path}.{key} must be one of {allowed}; got {value!r}")
