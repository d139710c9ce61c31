"""The encoded ``pools`` array of ``GET /recommendation``, kept until any pool changes.

Each pool's JSON is encoded once when it is decided, but answering from it still
checks every pool for freshness and joins every pool's bytes: work that grows with
the number of pools on every request. This cache keeps the joined array per pool
selection, tagged with the service's version (which every change to a pool's entry,
or to what needs recomputing, bumps) and valid until the earliest ``valid_until`` of
its pools. A request that finds it costs a lookup and two comparisons; a change
anywhere makes the next request rebuild it from the per-pool bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

Selection = tuple[str, ...]
"""The ``?pool=`` filter as requested; empty for every pool."""

MAX_SELECTIONS: Final = 32
"""How many distinct selections are kept; the oldest is dropped first."""


@dataclass(frozen=True)
class CachedPools:
    """One selection's encoded ``pools`` array and when it stops being valid.

    Attributes:
        version: the service version the array was built at.
        expires: the earliest ``valid_until`` of its pools.
        array: the JSON array of the pools' recommendations, in the pools file's order.
    """

    version: int
    expires: datetime
    array: bytes


class PoolsArrayCache:
    """The encoded ``pools`` arrays of recent selections.

    Args:
        max_selections: how many selections to keep (a client can ask for any
            combination of pools, so the cache is bounded).
    """

    def __init__(self, max_selections: int = MAX_SELECTIONS) -> None:
        if max_selections < 1:
            raise ValueError(f"max_selections must be at least 1, got {max_selections}")
        self._max = max_selections
        self._arrays: dict[Selection, CachedPools] = {}
        self._lock = threading.Lock()

    def get(self, selection: Selection, version: int, now: datetime) -> bytes | None:
        """Return the array of ``selection`` if built at ``version`` and valid at ``now``."""
        found = self._arrays.get(selection)
        if found is None or found.version != version or now >= found.expires:
            return None
        return found.array

    def put(
        self, selection: Selection, version: int, parts: Sequence[bytes], expires: datetime
    ) -> bytes:
        """Join the pools' encoded JSON into an array, keep it, and return it.

        Args:
            selection: the selection the parts answer.
            version: the service version read *before* the parts were taken, so a
                change in between leaves the array stale rather than wrongly fresh.
            parts: each pool's encoded JSON object, in order.
            expires: the earliest ``valid_until`` of those pools.
        """
        array = b"[" + b",".join(parts) + b"]"
        with self._lock:
            self._arrays.pop(selection, None)
            while len(self._arrays) >= self._max:
                del self._arrays[next(iter(self._arrays))]
            self._arrays[selection] = CachedPools(version, expires, array)
        return array

    def __len__(self) -> int:
        return len(self._arrays)
