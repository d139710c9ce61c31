"""What every span window shares: the bounds a window keeps, and what one ``add`` did.

Details: docs/api.md, "Notes from the code", `api/callchain/window.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Final, NamedTuple

DEFAULT_MAX_SPANS: Final = 100_000
"""The default span capacity (a few tens of MB of records)."""

DEFAULT_MAX_AGE: Final = timedelta(minutes=5)
"""The default window length."""


class AddResult(NamedTuple):
    """What one ``add`` of a span window did."""

    added: int
    """spans stored from the batch (new or replacing an earlier copy)."""
    evicted: int
    """older spans dropped to respect ``max_age`` and ``max_spans``."""
