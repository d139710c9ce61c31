"""Recommendation bodies as JSON bytes, each encoded once per decision (docs/api.md)."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, NamedTuple

from pydantic import TypeAdapter

from api.schemas import PoolRecommendation, RecommendationSet, UnavailablePool

_NO_POOLS: Final = b'"pools":[]'
"""The envelope's empty pools list, where the pools' bytes go."""

_TIME: Final = TypeAdapter(datetime)
"""Encodes ``generated_at`` as the schema does (its field is a plain ``datetime``)."""

JOINED_SETS: Final = 16
"""Joined pools arrays kept: the full set and a few selections (a single pool needs none)."""


class _Memo:
    """JSON bytes of live wire models, keyed by identity, dropped when the model goes."""

    def __init__(self) -> None:
        self._bytes: dict[int, tuple[weakref.ref[PoolRecommendation], bytes]] = {}
        self._lock = threading.Lock()

    def get(self, body: PoolRecommendation) -> bytes:
        """Return the model's JSON, encoding it on first use."""
        key = id(body)
        found = self._bytes.get(key)
        if found is not None and found[0]() is body:
            return found[1]
        encoded = body.model_dump_json().encode()
        ref = weakref.ref(body, lambda _: self._forget(key))
        with self._lock:
            self._bytes[key] = (ref, encoded)
        return encoded

    def _forget(self, key: int) -> None:
        with self._lock:
            found = self._bytes.get(key)
            # The id may already belong to a newer model: drop only a dead reference.
            if found is not None and found[0]() is None:
                del self._bytes[key]

    def __len__(self) -> int:
        return len(self._bytes)


class _Joined:
    """The joined pools of the last :data:`JOINED_SETS` sets of two pools or more."""

    def __init__(self, size: int = JOINED_SETS) -> None:
        self._sets: dict[tuple[int, ...], tuple[tuple[PoolRecommendation, ...], bytes]] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, pools: Sequence[PoolRecommendation]) -> bytes:
        """Return the pools' JSON objects joined by commas, joined once per set of models."""
        if len(pools) < 2:
            return b"".join(pool_json(body) for body in pools)
        key = tuple(map(id, pools))
        found = self._sets.get(key)
        if found is not None:
            return found[1]
        joined = b",".join(pool_json(body) for body in pools)
        with self._lock:
            while len(self._sets) >= self._size:
                del self._sets[next(iter(self._sets))]
            self._sets[key] = (tuple(pools), joined)
        return joined

    def __len__(self) -> int:
        return len(self._sets)


class _Envelope(NamedTuple):
    """A set's bytes without a pool unavailable, cut where ``generated_at`` and pools go."""

    head: bytes
    middle: bytes
    tail: bytes


@functools.cache
def _envelope() -> _Envelope:
    """The schema's envelope of a set with no unavailable pool, encoded once."""
    marker = datetime(2000, 1, 1, tzinfo=UTC)
    encoded = RecommendationSet(generated_at=marker, pools=[]).model_dump_json().encode()
    head, rest = encoded.split(_TIME.dump_json(marker), 1)
    middle, tail = rest.split(_NO_POOLS, 1)
    return _Envelope(head, middle + b'"pools":[', b"]" + tail)


_MEMO: Final = _Memo()
"""One memo for the process: its keys are the models themselves (a cache, not state)."""

_JOINED: Final = _Joined()
"""The joined pools of recent sets (a cache keyed by the models, like :data:`_MEMO`)."""


def pool_json(body: PoolRecommendation) -> bytes:
    """Return one pool's recommendation as JSON (``body.model_dump_json()``, encoded once)."""
    return _MEMO.get(body)


def set_json(
    generated_at: datetime,
    pools: Sequence[PoolRecommendation],
    unavailable: Sequence[UnavailablePool] = (),
) -> bytes:
    """Return ``RecommendationSet(...).model_dump_json()`` as bytes, the pools encoded once.

    Args:
        pools: the pools' wire models, in the order to list them.
        unavailable: the requested pools without a recommendation, and why.
    """
    joined = _JOINED.get(pools)
    if not unavailable:
        head, middle, tail = _envelope()
        return b"".join((head, _TIME.dump_json(generated_at), middle, joined, tail))
    envelope = RecommendationSet(
        generated_at=generated_at, pools=[], unavailable=list(unavailable)
    ).model_dump_json()
    head, tail = envelope.encode().split(_NO_POOLS, 1)
    return b"".join((head, b'"pools":[', joined, b"]", tail))
