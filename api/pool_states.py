"""The pools' stabilisation states: read, decided on and written back one decision at a time.

Details: docs/api.md, "Notes from the code", `api/pool_states.py`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Final, TypeVar

from forecaster.exceptions import DataValidationError
from pipelines.store.state import PoolStateRepository, StoredState
from policy.state import StabilisationState

logger = logging.getLogger(__name__)

T = TypeVar("T")

Decide = Callable[[str, StabilisationState], tuple[T, StabilisationState | None]]
"""Decides for a pool from its stored state: the result, and the state to store (None
when the decision keeps nothing, e.g. a pool without live data)."""

ATTEMPTS: Final = 3
"""How many times a pool is decided when other replicas keep writing its state meanwhile."""


class PoolLocks:
    """One lock per pool; a batch of pools is taken in name order, so batches never deadlock."""

    def __init__(self, pools: Iterable[str]) -> None:
        self._locks = {name: threading.Lock() for name in pools}

    @contextmanager
    def hold(self, pools: Iterable[str], *, wait: bool = True) -> Iterator[bool]:
        """Hold the locks of ``pools`` inside the block; yields whether they were taken.

        Args:
            pools: pool names (repeats are ignored).
            wait: False to give up at once when a pool is busy: the block then sees
                False and holds nothing.
        """
        names = sorted(set(pools))
        held: list[threading.Lock] = []
        for name in names:
            lock = self._locks[name]
            if not lock.acquire(blocking=wait):
                break
            held.append(lock)
        taken = len(held) == len(names)
        if not taken:
            for lock in reversed(held):
                lock.release()
            held = []
        try:
            yield taken
        finally:
            for lock in reversed(held):
                lock.release()


def update_states(
    repository: PoolStateRepository,
    pools: Sequence[str],
    decide: Decide[T],
    *,
    updated_at: datetime,
) -> dict[str, T]:
    """Decide for ``pools`` from their stored states and store the new states.

    One read and one write (one commit) for the batch. A pool whose state another
    replica wrote between the two is read again and decided again, up to
    :data:`ATTEMPTS` times; after that its newest decision stands but its state is not
    stored (logged), which only makes a later scale-down wait more, never less.
    The caller holds the pools' :class:`PoolLocks`.

    Args:
        decide: the decision of one pool from its state.
        updated_at: the decision time, stored with the states.

    Returns:
        The result of each pool's latest decision.

    Raises:
        StoreError: the store failed.
    """
    read = repository.read(pools)
    results: dict[str, T] = {}
    pending = list(pools)
    for _ in range(ATTEMPTS):
        states: dict[str, Mapping[str, object]] = {}
        for name in pending:
            result, state = decide(name, parse_state(name, read.get(name)))
            results[name] = result
            if state is not None:
                states[name] = state.to_dict()
        pending = sorted(repository.replace_if_unchanged(states, read, updated_at=updated_at))
        if not pending:
            return results
        read = _reread(repository, read, pending)
    logger.warning(
        "pools %s: other replicas kept writing the stabilisation state; this decision's "
        "state is not stored",
        ", ".join(pending),
    )
    return results


def parse_state(pool: str, stored: StoredState | None) -> StabilisationState:
    """Return the state a pool's decision starts from (empty when none is usable)."""
    if stored is None:
        return StabilisationState()
    try:
        return StabilisationState.from_dict(stored.state)
    except DataValidationError as exc:
        # A state written by an incompatible version: start over (scale-down then
        # waits a whole window, which is the safe direction).
        logger.warning("pool %s: ignoring stored stabilisation state: %s", pool, exc)
        return StabilisationState()


def _reread(
    repository: PoolStateRepository, read: Mapping[str, StoredState], pools: Sequence[str]
) -> dict[str, StoredState]:
    again = {name: seen for name, seen in read.items() if name not in pools}
    again.update(repository.read(pools))
    return again
