"""The simple span list of ``POST /signals/spans``, for senders without an OTLP exporter.

Details: docs/api.md, "Notes from the code", `api/callchain/spanlist.py`."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from api.callchain.jsonload import load_json
from api.callchain.types import Decoded, Span, SpanKind, SpanStatus, datetime_to_ns
from forecaster.exceptions import DataValidationError

_ID_PATTERN: Final = r"^[0-9A-Za-z._:-]{1,64}$"

SpanId = Annotated[str, Field(pattern=_ID_PATTERN)]
"""A trace or span id of the simple format."""

SpanTime = Annotated[
    int | AwareDatetime,
    Field(description="RFC 3339 with a timezone, or Unix time in integer nanoseconds"),
]
"""A point in time: RFC 3339 or Unix nanoseconds."""


def _unix_nanos_or_text(value: Any) -> Any:
    # A float would be ambiguous (seconds? milliseconds?) and lossy; a bool is a mistake.
    if isinstance(value, bool | float):
        raise ValueError("give Unix nanoseconds as an integer, or an RFC 3339 string")
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value)
    return value


class SpanIn(BaseModel):
    """One span of the simple span list (its fields: docs/api.md, ``POST /signals/spans``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trace_id: SpanId
    span_id: SpanId
    parent_span_id: SpanId | None = None
    service: str = Field(min_length=1, max_length=255)
    name: str = Field(default="", max_length=1024)
    start: SpanTime
    end: SpanTime | None = None
    # At most a day: 1e308 ms would overflow the nanosecond arithmetic (a 500).
    duration_ms: float | None = Field(default=None, ge=0, le=86_400_000, allow_inf_nan=False)
    kind: SpanKind = "unspecified"
    status: SpanStatus = "unset"

    @field_validator("parent_span_id", mode="before")
    @classmethod
    def _empty_parent_is_root(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("start", "end", mode="before")
    @classmethod
    def _check_time(cls, value: Any) -> Any:
        return _unix_nanos_or_text(value)

    @model_validator(mode="after")
    def _end_or_duration(self) -> SpanIn:
        if (self.end is None) == (self.duration_ms is None):
            raise ValueError("give exactly one of end and duration_ms")
        return self

    def to_span(self) -> Span:
        """Return the span record.

        Raises:
            DataValidationError: the span ends before it starts or starts before 1970.
        """
        start_ns = _to_ns(self.start)
        if self.end is not None:
            end_ns = _to_ns(self.end)
        else:
            # round(), not int(): 0.1 ms must be 100000 ns, not 99999.
            nanos = (self.duration_ms or 0.0) * 1e6
            if not math.isfinite(nanos):
                raise DataValidationError(f"duration_ms {self.duration_ms} is too large")
            end_ns = start_ns + round(nanos)
        return Span(
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            service=self.service,
            name=self.name,
            start_ns=start_ns,
            end_ns=end_ns,
            kind=self.kind,
            status=self.status,
        )


def _to_ns(value: int | datetime) -> int:
    return value if isinstance(value, int) else datetime_to_ns(value)


def decode_span_list_batch(body: bytes | str) -> Decoded:
    """Decode the JSON body of ``POST /signals/spans`` into valid and rejected spans.

    Returns:
        The valid spans in list order, and one message per invalid span naming its
        index and field (``span [3]: duration: Extra inputs are not permitted``).

    Raises:
        DataValidationError: the body is not a JSON array (or is nested too deeply),
            or no span in it is valid.
    """
    items = load_json(body)
    if not isinstance(items, list):
        raise DataValidationError("the span list is invalid: body: give a JSON array of spans")
    decoded = Decoded([], [])
    for index, item in enumerate(items):
        try:
            decoded.spans.append(SpanIn.model_validate(item).to_span())
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'span'}: {error['msg']}"
                for error in exc.errors()[:3]
            )
            decoded.rejected.append(f"span [{index}]: {problems}")
        except DataValidationError as exc:
            decoded.rejected.append(f"span [{index}]: {exc}")
    return decoded.require_some()
