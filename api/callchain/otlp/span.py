"""The span builder both OTLP encodings end in: ids checked, enums named, a :class:`Span` made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from api.callchain.types import SPAN_KINDS, SPAN_STATUSES, Decoded, Span
from forecaster.exceptions import DataValidationError

TRACE_ID_BYTES: Final = 16
"""The length of an OTLP trace id."""
SPAN_ID_BYTES: Final = 8
"""The length of an OTLP span id."""


def collect(
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


def build_span(
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
    _check_id(trace_id, TRACE_ID_BYTES, f"{path}.traceId")
    _check_id(span_id, SPAN_ID_BYTES, f"{path}.spanId")
    if parent_span_id:
        _check_id(parent_span_id, SPAN_ID_BYTES, f"{path}.parentSpanId")
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
