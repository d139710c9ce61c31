"""Per-service call-chain statistics kept incrementally: their cost does not grow with the window.

Details: docs/api.md, "Notes from the code", `api/callchain/incremental.py`."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final

from api.callchain.bottleneck_settings import DEFAULT_MAX_SERVICES, DEFAULT_SETTLE
from api.callchain.buckets import Bucket, merge
from api.callchain.report import OVERFLOW_SERVICE
from api.callchain.stats import union_ns
from api.callchain.types import ServiceStats, Span, SpanKind, SpanStatus
from api.callchain.window import DEFAULT_MAX_AGE, DEFAULT_MAX_SPANS, AddResult
from api.pacing import Pacer
from policy.types import require_aware

DEFAULT_BUCKET: Final = timedelta(seconds=10)
"""The width of a time bucket of sketches; the window moves in these steps."""

MIN_RETAIN: Final = timedelta(seconds=10)
"""Spans are held for lookups and duplicate checks at least this long after arrival."""

_SETTLE_CHUNK: Final = 100
_ADD_CHUNK: Final = 128
_Key = tuple[str, str]

_Held = tuple[str, str, str | None, str, str, int, int, SpanKind, SpanStatus]
"""A held span: :class:`Span`'s fields in their order, as a plain tuple. The garbage
collector stops tracking a tuple of strings and integers, so the tens of thousands of
spans held for lookups add nothing to its collections (as ``Span`` objects, every
collection would walk them while a request waits)."""
_TRACE: Final = 0
_SPAN: Final = 1
_PARENT: Final = 2
_SERVICE: Final = 3
_START: Final = 5
_END: Final = 6
_STATUS: Final = 8


def _held(span: Span, service: str) -> _Held:
    return (
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        service,
        span.name,
        span.start_ns,
        span.end_ns,
        span.kind,
        span.status,
    )


class ChainWindow:
    """The recent per-service statistics of every service, safe to share between threads.

    Args:
        max_spans: the most spans held for lookups at once (the oldest are settled and
            dropped first), >= 1.
        max_age: how long a span counts after it arrives, > 0.
        settle: how long after arrival a span is folded into the statistics, >= 0.
        bucket: the width of a time bucket, > 0 and at most ``max_age``.
        max_services: the most distinct service names within the window, >= 1; spans
            of further names count as ``other``.
        reserved: service names always kept (the configured ones), not counted in
            ``max_services``.
    """

    def __init__(
        self,
        max_spans: int = DEFAULT_MAX_SPANS,
        max_age: timedelta = DEFAULT_MAX_AGE,
        *,
        settle: timedelta = DEFAULT_SETTLE,
        bucket: timedelta = DEFAULT_BUCKET,
        max_services: int = DEFAULT_MAX_SERVICES,
        reserved: Collection[str] = (),
    ) -> None:
        if max_spans < 1:
            raise ValueError(f"max_spans must be >= 1, got {max_spans}")
        if max_age <= timedelta(0):
            raise ValueError(f"max_age must be positive, got {max_age}")
        if settle < timedelta(0) or not timedelta(0) < bucket <= max_age:
            raise ValueError("settle must be >= 0 and bucket in (0, max_age]")
        if max_services < 1:
            raise ValueError(f"max_services must be >= 1, got {max_services}")
        self.max_spans = max_spans
        self.max_age = max_age
        self.settle = settle
        self.bucket = bucket
        self._lock = threading.Lock()
        # Spans held for lookups, in arrival order: (arrival, span, settled).
        self._recent: OrderedDict[_Key, tuple[datetime, _Held, bool]] = OrderedDict()
        self._children: dict[_Key, dict[_Key, _Held]] = {}
        self._pending: deque[tuple[datetime, _Key]] = deque()
        self._buckets: deque[Bucket] = deque()
        self._version = 0
        self._cache: tuple[int, datetime, Mapping[str, ServiceStats]] | None = None
        self._size = 0
        self.max_services = max_services
        self._reserved = frozenset(reserved)
        # Admitted names by last arrival, oldest first; a name is forgotten once no
        # bucket can hold it any more (window + settle + bucket after its last span).
        self._names: OrderedDict[str, datetime] = OrderedDict()
        self._name_ttl = max_age + settle + bucket
        self._overflow = 0

    @property
    def overflow_spans(self) -> int:
        """Spans counted as ``other`` since the start: their name was past the cap."""
        return self._overflow

    def __len__(self) -> int:
        """Spans counted in the window: settled in its buckets, or waiting to settle.

        As of the latest change, read without the lock: a request handler asking
        must not wait while the analysis settles a backlog.
        """
        return self._size

    def _count(self) -> None:
        """Recount the window's spans for :meth:`__len__`; the caller holds the lock."""
        settled = sum(s.spans for b in self._buckets for s in b.services.values())
        self._size = settled + len(self._pending)

    def add(self, spans: Iterable[Span], now: datetime) -> AddResult:
        """Take in a batch of spans that arrived at ``now``.

        Returns:
            ``added``: spans of the batch taken in (a copy of a settled span is not);
            ``evicted``: spans that left the lookup index to respect ``max_spans``.

        Raises:
            ValueError: ``now`` is naive.
        """
        require_aware(now, "now")
        batch = spans if isinstance(spans, Sequence) else list(spans)
        chunks = [batch[i : i + _ADD_CHUNK] for i in range(0, len(batch), _ADD_CHUNK)] or [[]]
        added = 0
        pacer = Pacer()
        # In chunks, the lock released and the GIL offered between them: a batch of
        # thousands of spans must hold up neither the analysis nor the event loop.
        # The batch joins the spans to settle, and evictions happen, only once all of
        # it is in: nothing of it is folded before its relatives in the batch are held.
        pending: list[tuple[datetime, _Key]] = []
        for chunk in chunks[:-1]:
            with self._lock:
                added += sum(self._add_one(span, now, pending) for span in chunk)
            pacer.tick()
        with self._lock:
            added += sum(self._add_one(span, now, pending) for span in chunks[-1])
            self._pending.extend(pending)
            evicted = 0
            while len(self._recent) > self.max_spans:
                evicted += self._drop_oldest()
            if evicted:
                self._version += 1
            self._count()
        return AddResult(added=added, evicted=evicted)

    def _add_one(self, span: Span, now: datetime, pending: list[tuple[datetime, _Key]]) -> int:
        """Hold one span; return 1, or 0 for a copy of a settled span (lock held)."""
        key = (span.trace_id, span.span_id)
        held = self._recent.get(key)
        if held is not None and held[2]:
            return 0
        if held is None:
            pending.append((now, key))
        else:
            self._unlink(key, held[1])
        record = _held(span, self._admit(span.service, now))
        self._recent[key] = (now, record, False)
        if span.parent_span_id is not None:
            parent = (span.trace_id, span.parent_span_id)
            self._children.setdefault(parent, {})[key] = record
        return 1

    def _admit(self, service: str, now: datetime) -> str:
        """Return the name a span of ``service`` is counted under (lock held)."""
        if service in self._reserved:
            return service
        names = self._names
        if service not in names:
            cutoff = now - self._name_ttl
            while names and next(iter(names.values())) <= cutoff:
                names.popitem(last=False)
            if len(names) >= self.max_services:
                self._overflow += 1
                return OVERFLOW_SERVICE
        names[service] = now
        names.move_to_end(service)
        return service

    def spans(self, now: datetime) -> list[Span]:
        """Return the spans still held for lookups (docs/api.md), oldest first."""
        require_aware(now, "now")
        with self._lock:
            return [Span(*held) for _, held, _ in self._recent.values()]

    def stats(
        self, now: datetime, max_staleness: timedelta = timedelta(0)
    ) -> Mapping[str, ServiceStats]:
        """Settle what is due and return per-service statistics of the window at ``now``.

        The cost is that of the spans settled since the last call plus a merge of
        ``max_age / bucket`` buckets per service. With ``max_staleness`` > 0 a result
        computed at most that long before ``now`` is returned as is.
        """
        require_aware(now, "now")
        cache = self._cache
        if cache is not None and max_staleness > timedelta(0) and now - cache[1] <= max_staleness:
            return cache[2]
        # Settle in chunks, releasing the lock between them: ingestion must not wait
        # for a backlog of thousands of spans, nor the event loop for the GIL.
        pacer = Pacer()
        while self._settle_some(now):
            pacer.tick()
        with self._lock:
            self._expire(now)
            self._count()
            cache = self._cache
            if cache is not None and cache[0] == self._version:
                return cache[2]
            buckets = list(self._buckets)
            version = self._version
        result: Mapping[str, ServiceStats] = MappingProxyType(merge(buckets))
        with self._lock:
            self._cache = (version, now, result)
        return result

    def recent_stats(self, now: datetime, span: timedelta) -> Mapping[str, ServiceStats]:
        """Return per-service statistics of the buckets overlapping the last ``span``.

        What has settled by the last :meth:`stats` call is counted (call that first).
        A p95 over the last half minute moves as soon as 5 % of *its* calls are slow,
        not 5 % of the whole window's: the analysis flags a slowdown from it sooner.
        """
        require_aware(now, "now")
        with self._lock:
            since = now - span
            buckets = [b for b in self._buckets if b.start + self.bucket > since]
        return MappingProxyType(merge(buckets))

    def clear(self) -> None:
        """Drop every span and statistic."""
        with self._lock:
            self._recent.clear()
            self._children.clear()
            self._pending.clear()
            self._buckets.clear()
            self._names.clear()
            self._version += 1
            self._count()

    def _settle_some(self, now: datetime) -> bool:
        """Fold up to a chunk of due spans in; return whether more may be due."""
        due = now - self.settle
        with self._lock:
            folded = 0
            while folded < _SETTLE_CHUNK:
                if not self._pending or self._pending[0][0] > due:
                    break
                arrived, key = self._pending.popleft()
                held = self._recent.get(key)
                if held is None or held[2]:
                    continue
                self._fold(held[1], arrived)
                self._recent[key] = (held[0], held[1], True)
                folded += 1
            if folded:
                self._version += 1
            return folded == _SETTLE_CHUNK

    def _fold(self, span: _Held, arrived: datetime) -> None:
        """Count one span in the bucket of its arrival; the caller holds the lock."""
        bucket = self._bucket_at(arrived)
        service = span[_SERVICE]
        stats = bucket.service(service)
        stats.spans += 1
        if span[_STATUS] == "error":
            stats.errors += 1
        parent = None
        if span[_PARENT] is not None:
            held = self._recent.get((span[_TRACE], span[_PARENT]))
            parent = held[1] if held is not None else None
        if parent is not None and parent[_SERVICE] == service:
            return  # part of a call of its own service, not a call
        if parent is not None:
            stats.callers.add(parent[_SERVICE])
            bucket.service(parent[_SERVICE]).callees.add(service)
        stats.durations.add((span[_END] - span[_START]) / 1e6)
        stats.self_times.add(self._self_time_ns(span) / 1e6)

    def _self_time_ns(self, call: _Held) -> int:
        waits: list[tuple[int, int]] = []
        stack = [call]
        while stack:
            span = stack.pop()
            for child in self._children.get((span[_TRACE], span[_SPAN]), {}).values():
                if child[_SERVICE] == call[_SERVICE]:
                    stack.append(child)
                    continue
                start, end = max(child[_START], call[_START]), min(child[_END], call[_END])
                if end > start:
                    waits.append((start, end))
        return max(0, call[_END] - call[_START] - union_ns(waits))

    def _bucket_at(self, arrived: datetime) -> Bucket:
        if self._buckets and arrived < self._buckets[-1].start + self.bucket:
            # A span settling late still lands in the newest bucket: buckets only grow
            # at the end, so expiry stays a pop from the front.
            return self._buckets[-1]
        bucket = Bucket(arrived)
        self._buckets.append(bucket)
        return bucket

    def _expire(self, now: datetime) -> None:
        """Drop buckets past the window and spans past their lookup time; lock held."""
        while self._buckets and self._buckets[0].start + self.bucket <= now - self.max_age:
            self._buckets.popleft()
            self._version += 1
        keep_after = now - max(2 * self.settle, MIN_RETAIN)
        while self._recent:
            arrived, _, settled = next(iter(self._recent.values()))
            if arrived > keep_after or not settled:
                break
            self._drop_oldest()

    def _drop_oldest(self) -> int:
        """Forget the oldest held span, folding it in first if it has not settled."""
        key, (arrived, span, settled) = next(iter(self._recent.items()))
        if not settled:
            self._fold(span, arrived)
        del self._recent[key]
        self._unlink(key, span)
        return 1

    def _unlink(self, key: _Key, span: _Held) -> None:
        if span[_PARENT] is None:
            return
        parent = (span[_TRACE], span[_PARENT])
        siblings = self._children.get(parent)
        if siblings is not None:
            siblings.pop(key, None)
            if not siblings:
                del self._children[parent]
