"""The strict decode the tests compare with: every span valid, or the first problem raised."""

from __future__ import annotations

from api.callchain.types import Decoded, Span
from forecaster.exceptions import DataValidationError


def require_all(decoded: Decoded) -> list[Span]:
    """Return the spans, or raise the first rejected span's problem."""
    if decoded.rejected:
        raise DataValidationError(decoded.rejected[0])
    return decoded.spans
