"""Why something could not be made: a small typed value instead of a bare string.

A job that carries on past a failed part (one series of a fleet, the peak forecast of
a run) keeps the part's :class:`Unavailable` beside the parts it made, so callers
branch on ``isinstance(x, Unavailable)`` and its :data:`Cause`, never on the words.
The fields are those of ``api.unavailable.Unavailable`` (``cause``, ``detail``), so
the two can become one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from forecaster.exceptions import DataValidationError, InsufficientHistoryError

Cause = Literal["insufficient_history", "invalid_data", "failed"]
"""Too little history; data that breaks the contract; anything else that went wrong."""


@dataclass(frozen=True)
class Unavailable:
    """A part that could not be made, and why; ``str()`` is the ``detail``."""

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
