"""Why something could not be made: a small typed value instead of a bare string.

Details: docs/forecasting.md, "Notes from the code", `forecaster/unavailable.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from forecaster.exceptions import DataValidationError, InsufficientHistoryError

Cause = Literal[
    "insufficient_history",
    "invalid_data",
    "failed",
    "invalid_samples",
    "no_live_samples",
    "no_forecast",
    "forecast_other_clock",
]
"""The known causes. Of a part a job could not make: ``insufficient_history`` (too
little history), ``invalid_data`` (data that breaks the contract), ``failed`` (anything
else that went wrong). Of a pool the service cannot answer for: ``invalid_samples``
(stored samples fail validation), ``no_live_samples`` (a signal has none yet),
``no_forecast`` (no model, too little history, no stored run), ``forecast_other_clock``
(the stored forecast was dated by another clock, see 'One clock' in docs/api.md)."""


@dataclass(frozen=True)
class Unavailable:
    """Something that could not be made now (a part of a job, a pool's answer), and why.

    Attributes:
        cause: the kind of problem, for code that branches on it.
        detail: the sentence people see (the ``reason`` of the HTTP answers); ``str()``
            is the detail.
    """

    cause: Cause
    detail: str

    @classmethod
    def of(cls, error: Exception, prefix: str = "") -> Unavailable:
        """The cause an error names, its message (after ``prefix``) as the detail."""
        cause: Cause = (
            "insufficient_history"
            if isinstance(error, InsufficientHistoryError)
            else "invalid_data"
            if isinstance(error, DataValidationError)
            else "failed"
        )
        return cls(cause, f"{prefix}{error}")

    def __str__(self) -> str:
        return self.detail


def details(missing: Mapping[str, Unavailable]) -> dict[str, str]:
    """Return each pool's sentence, as the wire and the reports carry it."""
    return {pool: why.detail for pool, why in missing.items()}
