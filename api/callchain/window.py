"""What every span window shares: the bounds a window keeps, and what one ``add`` did.

The window itself is :class:`api.callchain.incremental.ChainWindow`. Memory is bounded
twice: at most ``max_spans`` spans (the oldest arrivals go first) and none older than
``max_age``, counted from *arrival* (the ``now`` passed to ``add``), not from the
span's own timestamps: a sender with a skewed clock must neither fill the window with
spans that never expire nor have its spans dropped on arrival.
"""

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
