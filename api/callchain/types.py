"""The call-chain records: one span, and what a window of spans says about one service.

Details: docs/api.md, "Notes from the code", `api/callchain/types.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, NamedTuple

from forecaster.exceptions import DataValidationError, ForesightError

SpanKind = Literal["unspecified", "internal", "server", "client", "producer", "consumer"]
"""The OTLP span kind, lower case (``SPAN_KIND_SERVER`` is ``"server"``)."""

SpanStatus = Literal["unset", "ok", "error"]
"""The OTLP status code, lower case (``STATUS_CODE_ERROR`` is ``"error"``)."""

SPAN_KINDS: Final[tuple[SpanKind, ...]] = (
    "unspecified",
    "internal",
    "server",
    "client",
    "producer",
    "consumer",
)
"""Span kinds in OTLP enum order (index = the protobuf enum value)."""

SPAN_STATUSES: Final[tuple[SpanStatus, ...]] = ("unset", "ok", "error")
"""Status codes in OTLP enum order (index = the protobuf enum value)."""

UNKNOWN_SERVICE: Final = "unknown_service"
"""The service of spans whose resource has no ``service.name`` (the OpenTelemetry default)."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_REPORTED: Final = 10
_UINT64_MAX: Final = 2**64 - 1


class PayloadTooLargeError(DataValidationError):
    """A request body is larger than allowed once decompressed (the API answers 413)."""


class UnsupportedMediaTypeError(DataValidationError):
    """A request body's content type or encoding is not one we decode (the API answers 415)."""


class SpanQueueFullError(ForesightError):
    """Span ingestion is behind: a batch was refused whole, to send again (the API answers 503)."""


def finite_or_none(value: float) -> float | None:
    """Return ``value``, or None for NaN and infinities (JSON has no NaN)."""
    return value if math.isfinite(value) else None


def ns_to_datetime(ns: int) -> datetime:
    """Return the UTC datetime of a Unix time in nanoseconds (microsecond precision)."""
    return _EPOCH + timedelta(microseconds=ns // 1000)


def datetime_to_ns(value: datetime) -> int:
    """Return the Unix time in nanoseconds of a timezone-aware datetime.

    Raises:
        DataValidationError: ``value`` is naive, so its instant is unknown.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise DataValidationError(
            f"time {value.isoformat()} has no timezone; give RFC 3339 with 'Z' or an offset"
        )
    # Integer arithmetic on timedelta keeps every microsecond exact.
    return (value - _EPOCH) // timedelta(microseconds=1) * 1000


@dataclass(frozen=True)
class Span:
    """One finished span of a trace.

    Attributes:
        trace_id: the trace id (lower-case hex for OTLP input).
        span_id: the span id, unique within the trace.
        parent_span_id: the parent's span id, None for a root span.
        service: the service that emitted the span (OTLP resource ``service.name``).
        start_ns: start, Unix time in nanoseconds.
        end_ns: end, Unix time in nanoseconds, >= ``start_ns``.
        status: the status code; ``"error"`` counts as an error.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    service: str
    name: str
    start_ns: int
    end_ns: int
    kind: SpanKind = "unspecified"
    status: SpanStatus = "unset"

    def __post_init__(self) -> None:
        # The messages are formatted only on failure: a batch builds thousands of spans.
        if not self.trace_id or not self.span_id:
            raise DataValidationError(f"{self._where()}: trace_id and span_id must not be empty")
        if self.parent_span_id == self.span_id:
            raise DataValidationError(f"{self._where()} names itself as its parent")
        if not self.service:
            raise DataValidationError(f"{self._where()}: service must not be empty")
        if self.start_ns <= 0:
            raise DataValidationError(f"{self._where()}: start time is missing or not after 1970")
        if self.end_ns > _UINT64_MAX:
            raise DataValidationError(
                f"{self._where()}: end time is past what OTLP can carry (2**64 - 1 ns after 1970)"
            )
        if self.end_ns < self.start_ns:
            raise DataValidationError(
                f"{self._where()} ({self.service}) ends "
                f"{(self.start_ns - self.end_ns) / 1e6:g} ms before it starts; send finished "
                "spans with end >= start"
            )

    def _where(self) -> str:
        return f"span {self.span_id!r} of trace {self.trace_id!r}"

    @property
    def duration_ns(self) -> int:
        """End minus start, in nanoseconds."""
        return self.end_ns - self.start_ns

    @property
    def duration_ms(self) -> float:
        """End minus start, in milliseconds."""
        return self.duration_ns / 1e6

    @property
    def start(self) -> datetime:
        """The start as a UTC datetime."""
        return ns_to_datetime(self.start_ns)

    @property
    def end(self) -> datetime:
        """The end as a UTC datetime."""
        return ns_to_datetime(self.end_ns)


@dataclass(frozen=True)
class ServiceStats:
    """What the spans of one service in the window say about it.

    A *call* of a service is one of its local-root spans: a span whose parent is absent
    from the window or belongs to another service. Durations are per call (the latency
    a caller sees); several spans of the same service nested in one call count once.

    Attributes:
        span_count: spans of the service in the window.
        call_count: calls of the service in the window (what the percentiles are over).
        p50_ms: median call duration in milliseconds (NaN, like every percentile here,
            when ``call_count`` is 0, which only a cyclic parent chain can cause).
        p95_ms: 95th percentile call duration in milliseconds.
        self_p50_ms: median self time in milliseconds.
        self_p95_ms: 95th percentile self time: per call, its duration minus the union of
            the intervals of the calls it made to other services (clipped to the call, so
            parallel calls are not counted twice and fire-and-forget calls that outlive it
            count only while it runs), floored at 0.
        callers: services with a span that is the parent of one of this service's spans.
        callees: services with a span whose parent is one of this service's spans.
        error_count: spans of the service with status ``"error"``.
    """

    service: str
    span_count: int
    call_count: int
    p50_ms: float
    p95_ms: float
    self_p50_ms: float
    self_p95_ms: float
    callers: tuple[str, ...] = ()
    callees: tuple[str, ...] = ()
    error_count: int = 0

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form for the API and a dashboard."""
        return {
            "service": self.service,
            "span_count": self.span_count,
            "call_count": self.call_count,
            "p50_ms": finite_or_none(self.p50_ms),
            "p95_ms": finite_or_none(self.p95_ms),
            "self_p50_ms": finite_or_none(self.self_p50_ms),
            "self_p95_ms": finite_or_none(self.self_p95_ms),
            "callers": list(self.callers),
            "callees": list(self.callees),
            "error_count": self.error_count,
        }


class Decoded(NamedTuple):
    """The spans of one export, and why the others were rejected (OTLP partial success)."""

    spans: list[Span]
    """the valid spans, in request order."""
    rejected: list[str]
    """one message per rejected span, naming its position and the problem."""

    @property
    def total(self) -> int:
        """Spans in the request, valid or not."""
        return len(self.spans) + len(self.rejected)

    def summary(self) -> str:
        """Say how many spans were rejected and why (the first few reasons), '' if none."""
        if not self.rejected:
            return ""
        shown = "; ".join(self.rejected[:_MAX_REPORTED])
        more = len(self.rejected) - _MAX_REPORTED
        suffix = f" (and {more} more)" if more > 0 else ""
        return f"{len(self.rejected)} of {self.total} spans rejected: {shown}{suffix}"

    def within(self, earliest: datetime, latest: datetime) -> Decoded:
        """Return the spans whose times lie in ``[earliest, latest]``, the rest rejected.

        The limits are those of pushed metric samples (:mod:`api.sample_checks`): a
        span from 2262 or 1970 is a sender's clock or unit mistake, not an observation.
        """
        low, high = datetime_to_ns(earliest), datetime_to_ns(latest)
        kept: list[Span] = []
        rejected = list(self.rejected)
        for span in self.spans:
            problem = _time_problem(span, low, high)
            if problem is None:
                kept.append(span)
            else:
                rejected.append(f"span {span.span_id!r} of trace {span.trace_id!r}: {problem}")
        return Decoded(kept, rejected)

    def require_some(self) -> Decoded:
        """Return self unless spans were sent and none is valid.

        Raises:
            DataValidationError: every span was rejected, so the request is malformed.
        """
        if self.rejected and not self.spans:
            raise DataValidationError(self.summary())
        return self


def _time_problem(span: Span, low: int, high: int) -> str | None:
    """Say which time of ``span`` breaks which limit, None when both are within."""
    if span.start_ns < low:
        return (
            f"start time {iso(span.start_ns)} is before the earliest accepted "
            f"{iso(low)}; send Unix nanoseconds (not seconds) of the real start"
        )
    for field, value in (("start", span.start_ns), ("end", span.end_ns)):
        if value > high:
            return (
                f"{field} time {iso(value)} is later than now + the tolerance ({iso(high)}, "
                "service.max_sample_future_seconds); send finished spans and check the "
                "sender's clock"
            )
    return None


def iso(ns: int) -> str:
    """Return a Unix time in nanoseconds as ISO 8601 UTC to the second (``...Z``)."""
    return ns_to_datetime(ns).strftime("%Y-%m-%dT%H:%M:%SZ")
