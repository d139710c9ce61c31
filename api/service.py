"""The recommendation service: gathers each pool's inputs, asks the policy, remembers.

Details: docs/api.md, "Notes from the code", `api/service.py`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

from api.audit import AuditTrail
from api.clock import ReplayClock
from api.decision import DecisionInputs, clock_skew, decide_pool, forecast_unusable
from api.errors import PoolUnavailableError, UnknownPoolError
from api.forecasts import DEFAULT_STEP, ForecastCache, PoolForecast
from api.ingest import Ingested, ingest
from api.live import LiveIndex
from api.pool_entry import PoolEntry
from api.pool_states import PoolLocks, update_states
from api.sample_checks import TimeWindow
from api.services import Services
from api.store_probe import StoreWriteProbe
from forecaster.registry import LoadedModel
from forecaster.unavailable import Unavailable
from pipelines.config.pools import PoolConfig
from pipelines.store.samples import SampleRow
from policy.recommendation import Recommendation
from policy.state import StabilisationState

logger = logging.getLogger(__name__)


REFRESH_BATCH: Final = 8
"""Pools a refresh decides per batch (one state read and one commit each): a push of a
pool in the batch waits for the batch, so batches stay small."""


Made = Recommendation | Unavailable
"""A decision: the recommendation, or why the pool has none."""


class RecommendationService:
    """Recommendations per pool from live readings, forecasts and stored state.

    Args:
        live: the live readings' index (default: a new one over ``services``).
    """

    def __init__(self, services: Services, *, live: LiveIndex | None = None) -> None:
        self.services = services
        self.live = live if live is not None else LiveIndex(services.store, services.pools.pools)
        self.forecasts = ForecastCache(
            services.store,
            services.model,
            missing_model_reason=services.model_problem or "no champion model is loaded",
            until=self._forecasts_until,
        )
        self._pools = {pool.name: pool for pool in services.pools.pools}
        self._entries: dict[str, PoolEntry] = {}
        self._dirty: set[str] = set(self._pools)
        # Bumped with every dirty mark: a decision clears the mark only if none came
        # while it was being made (a model swapped in meanwhile must still be used).
        self._marks: dict[str, int] = dict.fromkeys(self._pools, 0)
        self._audit = AuditTrail(services.store)
        # Held in this order: pool locks (a pool's decisions take turns, state read to
        # state write), then the service lock (entries, dirty marks, the audit).
        self._pool_locks = PoolLocks(self._pools)
        self._lock = threading.RLock()
        # Inputs dated by another clock already logged: (pool, input, its time).
        self._warned: set[tuple[str, str, datetime]] = set()
        # ``/readyz`` checks that the store takes writes, not only reads.
        self.store_probe = StoreWriteProbe(services.store)

    # -- pools -----------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The pool names in the pools file's order."""
        return list(self._pools)

    def pool(self, name: str) -> PoolConfig:
        """Return the pool called ``name``.

        Raises:
            UnknownPoolError: no pool has that name (404).
        """
        found = self._pools.get(name)
        if found is None:
            raise UnknownPoolError([name], self.names)
        return found

    def select(self, names: Sequence[str] | None) -> list[PoolConfig]:
        """Return the named pools (all when ``names`` is empty), in the file's order.

        Raises:
            UnknownPoolError: a name is not a configured pool.
        """
        if not names:
            return list(self._pools.values())
        unknown = [name for name in dict.fromkeys(names) if name not in self._pools]
        if unknown:
            raise UnknownPoolError(unknown, self.names)
        wanted = set(names)
        return [pool for name, pool in self._pools.items() if name in wanted]

    def now(self) -> datetime:
        """Return the decision clock's time."""
        return self.services.clock()

    # -- data ------------------------------------------------------------------

    def start(self) -> None:
        """Read every pool's newest samples and stored forecast (at startup).

        Raises:
            StoreError: the store failed.
        """
        self.invalidate(self.live.poll())
        self.forecasts.reload(self._pools.values())

    def ingest(self, rows: Sequence[SampleRow]) -> Ingested:
        """Store pushed samples and recompute the pools they touch.

        Cheap: the decision is recomputed with the pool's stored forecast (the policy
        carries its peak headroom over to the newest demand); the forecast job makes
        the next one. Only pools whose newest readings the samples may have moved are
        read back and decided again: a backfill older than a pool's readings changes
        no input of its decision.

        Raises:
            DataValidationError: the samples are invalid (nothing is stored).
            StoreError: the store failed.
        """
        done = ingest(self.services.store, self.services.pools, rows, self.sample_window())
        moved = self.live.moved_by((row["series_id"], row["ts"]) for row in rows)
        changed = self.live.poll(moved) if moved else set()
        self.invalidate(changed)
        self._decide([self._pools[name] for name in done.pools if name in changed])
        return done

    def sample_window(self) -> TimeWindow:
        """Return the times a pushed sample may carry now (see :mod:`api.sample_checks`).

        Every clock bounds them by the wall clock plus ``max_sample_future_seconds``;
        the replay clock also by its window (:class:`~api.clock.ReplayWindow`), in
        steps of the data: the largest of the pools' series steps.
        """
        services = self.services
        replay = None
        if isinstance(services.clock, ReplayClock):
            step = max((self.forecasts.step(name) for name in self._pools), default=DEFAULT_STEP)
            replay = services.clock.window(step)
        return TimeWindow.around(services.wall_clock(), self._skew(), replay)

    def invalidate(self, pools: Iterable[str] | None = None) -> None:
        """Recompute these pools (all when None) on the next request, e.g. after new latency."""
        with self._lock:
            self._mark_dirty(self._pools if pools is None else pools)

    def refresh(self, ahead: timedelta = timedelta(0)) -> set[str]:
        """Poll the store for samples and forecasts, recompute what changed or expires soon.

        Newer stored forecasts (the forecast job's) are read outside every lock, and
        the pools are recomputed in small batches (:data:`REFRESH_BATCH`), so a refresh
        never holds up a push or a read for long.

        Args:
            ahead: also recompute entries that expire within this margin.
        """
        self.invalidate(self.live.poll())
        self.forecasts.reload(self._pools.values(), publish=self._stale_then)
        now = self.now()
        with self._lock:
            due = [pool for name, pool in self._pools.items() if self._due(name, now + ahead)]
        for start in range(0, len(due), REFRESH_BATCH):
            self._decide(due[start : start + REFRESH_BATCH])
        return {pool.name for pool in due}

    def use_model(self, loaded: LoadedModel) -> None:
        """Serve ``loaded`` from now on, without a pause in serving.

        The stored forecasts of the new version are read for every pool first (in the
        caller's thread, outside the lock, while requests are answered with the old
        ones); then they are swapped in at once and every pool is recomputed. A pool
        whose forecast the job has not stored yet for the new version decides
        reactively, saying so, until it has. The same version from another source (the
        registry back after an outage) only changes what is reported.
        """
        current = self.services.model
        if current is not None and current.version == loaded.version:
            self.services.model = loaded
            self.services.model_problem = ""
            return
        cache = ForecastCache(self.services.store, loaded, until=self._forecasts_until)
        cache.reload(self._pools.values())
        with self._lock:
            self.forecasts = cache
            self.services.model = loaded
            self.services.model_problem = ""
            self._mark_dirty(self._pools)

    def _stale_then(self, pools: set[str], swap: Callable[[], None]) -> None:
        """Mark ``pools`` stale, then ``swap`` in their new forecasts, inside the lock."""
        with self._lock:
            self._mark_dirty(pools)
            swap()

    def _mark_dirty(self, pools: Iterable[str]) -> None:
        """Have ``pools`` recomputed on their next request; the caller holds the lock."""
        for name in pools:
            self._dirty.add(name)
            self._marks[name] = self._marks.get(name, 0) + 1

    def _due(self, name: str, at: datetime) -> bool:
        entry = self._entries.get(name)
        return name in self._dirty or entry is None or at >= entry.recommendation.valid_until

    # -- answers ---------------------------------------------------------------

    def recommendations(
        self, pools: Sequence[PoolConfig]
    ) -> tuple[list[PoolEntry], dict[str, Unavailable]]:
        """Return the current entries of ``pools`` and why the others have none.

        Raises:
            StoreError: the store failed while recomputing.
        """
        now = self.now()
        entries: list[PoolEntry] = []
        missing: dict[str, Unavailable] = {}
        for pool in pools:
            entry = self._current(pool, now)
            if isinstance(entry, PoolEntry):
                entries.append(entry)
            else:
                missing[pool.name] = entry
        return entries, missing

    def peek(self, pools: Sequence[PoolConfig]) -> list[PoolEntry] | None:
        """Return the entries of ``pools`` if all are fresh, else None (no I/O, no lock).

        Lets an async route answer from memory and go to a thread only to recompute.
        """
        now = self.now()
        entries = [self._fresh(pool.name, now) for pool in pools]
        if any(entry is None for entry in entries):
            return None
        return [entry for entry in entries if entry is not None]

    def recommendation(self, name: str) -> PoolEntry:
        """Return one pool's current entry.

        Raises:
            UnknownPoolError: no such pool.
            PoolUnavailableError: the pool has no live data yet.
        """
        pool = self.pool(name)
        entry = self._current(pool, self.now())
        if not isinstance(entry, PoolEntry):
            raise PoolUnavailableError(name, entry)
        return entry

    def forecast(self, name: str) -> PoolForecast:
        """Return the demand forecast the pool's recommendation uses.

        Raises:
            UnknownPoolError: no such pool.
            PoolUnavailableError: no forecast can be made (no model, too little history),
                or the stored one was dated by another clock (recommendations ignore it).
        """
        made = self.forecasts.get(self.pool(name))
        why = forecast_unusable(made, self.now(), self._skew())
        if why is not None:
            raise PoolUnavailableError(name, why)
        return made

    def _current(self, pool: PoolConfig, now: datetime) -> PoolEntry | Unavailable:
        # Fast path without the lock: a fresh entry is immutable and replaced whole.
        entry = self._fresh(pool.name, now)
        if entry is not None:
            return entry
        previous = self._entries.get(pool.name)
        unexpired = previous is not None and now < previous.recommendation.valid_until
        decided = self._decide([pool], wait=not unexpired, unless_fresh=True)
        if decided is None:
            # A push or the refresh is recomputing: the unexpired answer stands until
            # it is done, rather than the read waiting for the writer.
            assert previous is not None
            return previous
        return decided[pool.name]

    def _fresh(self, name: str, now: datetime) -> PoolEntry | None:
        entry = self._entries.get(name)
        if entry is None or name in self._dirty or now >= entry.recommendation.valid_until:
            return None
        return entry

    def _decide(
        self, pools: Sequence[PoolConfig], *, wait: bool = True, unless_fresh: bool = False
    ) -> dict[str, PoolEntry | Unavailable] | None:
        """Decide for ``pools`` at the clock's time and publish the answers.

        Holds the pools' locks from reading their stabilisation states to publishing,
        so two decisions of a pool never interleave; one state read and one commit for
        the batch (see :func:`~api.pool_states.update_states`).

        Args:
            wait: False (a read of one pool) to return None at once rather than wait
                for a decision in progress: of this pool, or of another one holding
                the service lock.
            unless_fresh: keep an entry that became fresh while waiting (a read).

        Returns:
            Each pool's entry, or why it has none; None when ``wait`` is False and the
            pool was busy.
        """
        if not wait and len(pools) != 1:
            # A busy pool in a batch would leave the others' new states stored unpublished.
            raise ValueError(f"wait=False decides one pool, got {len(pools)}")
        with self._pool_locks.hold([pool.name for pool in pools], wait=wait) as held:
            if not held:
                return None
            # Read the clock inside the locks: a decision that waited for another one
            # of the same pool comes after it in time too.
            now = self.now()
            fresh = {
                pool.name: entry
                for pool in pools
                if unless_fresh and (entry := self._fresh(pool.name, now)) is not None
            }
            todo = [pool.name for pool in pools if pool.name not in fresh]
            marks: dict[str, int] = {}

            def decide_one(
                name: str, state: StabilisationState
            ) -> tuple[Made | None, StabilisationState | None]:
                if not self._lock.acquire(blocking=wait):
                    # Busy (None), and nothing stored: a state is written once decided.
                    return None, None
                try:
                    marks[name] = self._marks.get(name, 0)
                    made = decide_pool(self._inputs(), self._pools[name], now, state)
                finally:
                    self._lock.release()
                return made, made.state if isinstance(made, Recommendation) else None

            decided = update_states(self.services.store.state, todo, decide_one, updated_at=now)
            published: dict[str, PoolEntry | Unavailable] = {}
            for name, made in decided.items():
                if made is None:
                    return None
                # Pool by pool: a read waits for one audit write at most, not a batch's.
                with self._lock:
                    published[name] = self._publish(name, made, marks[name])
            return {**fresh, **published}

    def _inputs(self) -> DecisionInputs:
        """The inputs of a decision now (the forecasts change when a model is swapped in)."""
        return DecisionInputs(self.services, self.live, self.forecasts, self._warned)

    def _forecasts_until(self) -> datetime:
        """The latest generation time of a forecast run this clock can have made."""
        return self.now() + self._skew()

    def _skew(self) -> timedelta:
        """How far past now a stored time may lie and still be this clock's."""
        return clock_skew(self.services.settings.service)

    def _publish(self, pool: str, made: Made, mark: int) -> PoolEntry | Unavailable:
        """Make a decision the pool's answer (audited); the caller holds the lock.

        ``mark``: the pool's dirty mark when the decision was made; a later one keeps
        the pool dirty.
        """
        if self._marks.get(pool, 0) == mark:
            self._dirty.discard(pool)
        if isinstance(made, Unavailable):
            self._entries.pop(pool, None)
            return made
        entry = PoolEntry.of(made)
        self._audit.record(made, entry.body)
        self._entries[pool] = entry
        return entry
