"""Decode an ``ExportTraceServiceRequest`` in the OTLP JSON mapping (docs/api.md)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Final

from api.callchain.jsonload import load_json
from api.callchain.otlp.span import SPAN_ID_BYTES, TRACE_ID_BYTES, build_span, collect
from api.callchain.types import SPAN_KINDS, SPAN_STATUSES, UNKNOWN_SERVICE, Decoded, Span
from api.pacing import Pacer
from forecaster.exceptions import DataValidationError

_UINT64_MAX: Final = 2**64 - 1
_UINT64_DIGITS: Final = len(str(_UINT64_MAX))


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
                collect(decoded, _json_span, path, span, service)
    return decoded


def _json_span(path: str, span: Mapping[str, Any], service: str) -> Span:
    status = _get(span, "status") or {}
    _require(isinstance(status, Mapping), f"{path}.status", "an object")
    name = _get(span, "name") or ""
    _require(isinstance(name, str), f"{path}.name", "a string")
    return build_span(
        path,
        trace_id=_json_id(span, "traceId", TRACE_ID_BYTES, path),
        span_id=_json_id(span, "spanId", SPAN_ID_BYTES, path),
        parent_span_id=_json_id(span, "parentSpanId", SPAN_ID_BYTES, path),
        service=service,
        name=name,
        kind=_json_enum(span, "kind", "SPAN_KIND_", SPAN_KINDS, path),
        start_ns=_json_uint64(span, "startTimeUnixNano", path),
        end_ns=_json_uint64(span, "endTimeUnixNano", path),
        status=_json_enum(status, "code", "STATUS_CODE_", SPAN_STATUSES, f"{path}.status"),
    )


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
