"""Why a pool has no answer: a small typed value instead of a bare string.

A pool that cannot be decided (no live samples yet, invalid samples) or has no
forecast to show is a normal state of the service, not an error: it travels as an
:class:`Unavailable` value beside the answers of the other pools, and becomes a 503
(:class:`~api.errors.PoolUnavailableError`) only when a request asked for that pool
alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

UnavailableCause = Literal[
    "invalid_samples",
    "no_live_samples",
    "no_forecast",
    "forecast_other_clock",
]
"""The known causes: ``invalid_samples`` (stored samples fail validation),
``no_live_samples`` (a signal has none yet), ``no_forecast`` (no model, too little
history, no stored run), ``forecast_other_clock`` (the stored forecast was dated by
another clock, see 'One clock' in docs/api.md)."""


@dataclass(frozen=True)
class Unavailable:
    """Why a pool has no recommendation (or no forecast) now.

    Attributes:
        cause: the kind of problem, for code that branches on it.
        detail: the sentence clients see (the ``reason`` of the HTTP answers).
    """

    cause: UnavailableCause
    detail: str

    def __str__(self) -> str:
        return self.detail


def details(missing: Mapping[str, Unavailable]) -> dict[str, str]:
    """Return each pool's sentence, as the wire and the reports carry it."""
    return {pool: why.detail for pool, why in missing.items()}
