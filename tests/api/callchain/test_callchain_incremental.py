"""ChainWindow: incremental sketches agree with the exact statistics of the same spans."""

from __future__ import annotations

import gc
import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from api.callchain.incremental import ChainWindow
from api.callchain.types import Span
from tests.api.callchain.reference_stats import service_stats

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
T0 = 1_714_564_800_000_000_000
MS = 1_000_000


def _trace(i: int, rng: random.Random) -> list[Span]:
    """gateway -> ranker -> llm, with random durations; ranker also calls cache twice."""
    start = T0 + i * 50 * MS
    llm = rng.randint(100, 400) * MS
    rank_own = rng.randint(5, 30) * MS
    return [
        Span(f"t{i}", "g", None, "gateway", "GET", start, start + rank_own + llm + 40 * MS),
        Span(f"t{i}", "r", "g", "ranker", "rank", start + 10 * MS, start + 10 * MS + rank_own + llm),  # noqa: E501
        Span(f"t{i}", "c1", "r", "cache", "get", start + 11 * MS, start + 12 * MS),
        Span(f"t{i}", "l", "r", "llm", "gen", start + 12 * MS, start + 12 * MS + llm,
             status="error" if i % 10 == 0 else "unset"),
    ]  # fmt: skip


def test_sketched_statistics_match_the_exact_ones_within_the_sketch_accuracy() -> None:
    rng = random.Random(7)
    spans = [s for i in range(2000) for s in _trace(i, rng)]
    window = ChainWindow(settle=timedelta(seconds=1))
    # Children and parents arrive in separate batches, children first, as an SDK sends.
    for n in range(0, len(spans), 64):
        batch = spans[n : n + 64]
        window.add([s for s in batch if s.parent_span_id], NOW)
        window.add([s for s in batch if not s.parent_span_id], NOW + timedelta(milliseconds=500))

    before = window.stats(NOW + timedelta(milliseconds=900))
    got = window.stats(NOW + timedelta(seconds=2))
    want = service_stats(spans)

    assert before == {}  # nothing has settled yet
    assert set(got) == set(want)
    for name, exact in want.items():
        sketched = got[name]
        assert (sketched.span_count, sketched.call_count, sketched.error_count) == (
            exact.span_count,
            exact.call_count,
            exact.error_count,
        )
        assert (sketched.callers, sketched.callees) == (exact.callers, exact.callees)
        for attr in ("p50_ms", "p95_ms", "self_p50_ms", "self_p95_ms"):
            # 0.1 % sketch accuracy plus the gap between neighbouring order statistics.
            assert getattr(sketched, attr) == pytest.approx(getattr(exact, attr), rel=0.01), (
                name,
                attr,
            )
    assert len(window) == len(spans)


def test_window_expires_by_arrival_and_counts_a_resent_span_once() -> None:
    window = ChainWindow(max_age=timedelta(minutes=1), settle=timedelta(0))
    span = Span("t", "a", None, "svc", "op", T0, T0 + 100 * MS)
    window.add([span], NOW)
    window.stats(NOW)
    window.add([span], NOW + timedelta(seconds=1))  # a retry after it settled

    assert window.stats(NOW + timedelta(seconds=2))["svc"].call_count == 1
    assert window.stats(NOW + timedelta(seconds=71)) == {}
    assert len(window) == 0


def test_self_time_is_exclusive_of_parallel_callees() -> None:
    window = ChainWindow(settle=timedelta(0))
    window.add(
        [
            Span("t", "p", None, "api", "op", T0, T0 + 110 * MS),
            Span("t", "a", "p", "db", "q", T0 + 5 * MS, T0 + 105 * MS),
            Span("t", "b", "p", "db2", "q", T0 + 5 * MS, T0 + 105 * MS),
        ],
        NOW,
    )
    api = window.stats(NOW)["api"]
    assert api.self_p95_ms == pytest.approx(10, rel=0.002)
    assert api.p95_ms == pytest.approx(110, rel=0.002)
    assert math.isnan(window.stats(NOW)["db"].self_p50_ms) is False


def test_one_batch_of_many_chunks_counts_every_span_with_its_relatives() -> None:
    # Children before their parents, the trace's spans far apart in one large batch:
    # added in chunks, still settled only once all of it is held.
    rng = random.Random(3)
    traces = [_trace(i, rng) for i in range(600)]
    batch = [s for t in traces for s in t if s.parent_span_id] + [t[0] for t in traces]
    window = ChainWindow(settle=timedelta(0))

    done = window.add(batch, NOW)
    got = window.stats(NOW)
    want = service_stats(batch)

    assert (done.added, done.evicted, len(window)) == (len(batch), 0, len(batch))
    for name, exact in want.items():
        assert (got[name].call_count, got[name].callers, got[name].callees) == (
            exact.call_count,
            exact.callers,
            exact.callees,
        )
        assert got[name].self_p95_ms == pytest.approx(exact.self_p95_ms, rel=0.01)


def test_a_batch_over_the_capacity_evicts_only_once_it_is_in() -> None:
    spans = [Span("t", f"s{i}", None, "svc", "op", T0, T0 + MS) for i in range(300)]
    window = ChainWindow(max_spans=100, settle=timedelta(0))

    done = window.add(spans, NOW)

    assert (done.added, done.evicted) == (300, 200)
    assert window.stats(NOW)["svc"].span_count == 300  # the evicted ones were counted


def test_held_spans_give_the_garbage_collector_nothing_to_walk() -> None:
    # Tens of thousands of spans are held for lookups; tracked, each collection walks them.
    window = ChainWindow()
    spans = [s for i in range(1000) for s in _trace(i, random.Random(i))]
    gc.collect()
    before = len(gc.get_objects())

    window.add(spans, NOW)
    del spans
    gc.collect()

    assert len(gc.get_objects()) - before < 100
    assert len(window.spans(NOW)) == 4000


def _root(i: int, service: str) -> Span:
    start = 1_714_564_800_000_000_000 + i * 1_000_000
    return Span(f"t{i}", "s", None, service, "op", start, start + 50_000_000)


def test_distinct_services_are_capped_and_the_overflow_counted_as_other() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    window = ChainWindow(
        max_age=timedelta(seconds=60),
        settle=timedelta(0),
        bucket=timedelta(seconds=10),
        max_services=3,
        reserved=["llm"],
    )
    window.add([_root(i, f"svc-{i}") for i in range(10)], now)
    window.add([_root(100, "llm"), _root(101, "svc-0")], now)

    stats = window.stats(now)
    assert sorted(stats) == ["llm", "other", "svc-0", "svc-1", "svc-2"]
    assert stats["other"].span_count == 7
    assert window.overflow_spans == 7
    # Once the admitted names have left the window, new names get a place again.
    later = now + timedelta(seconds=90)
    window.add([_root(200, "fresh")], later)
    assert "fresh" in window.stats(later)
    assert window.overflow_spans == 7


def test_recent_stats_merge_only_the_latest_buckets() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    window = ChainWindow(settle=timedelta(0), bucket=timedelta(seconds=10))
    window.add([_root(i, "old") for i in range(5)], now)
    later = now + timedelta(seconds=60)
    window.add([_root(10 + i, "new") for i in range(3)], later)
    assert set(window.stats(later)) == {"old", "new"}

    recent = window.recent_stats(later, timedelta(seconds=30))

    assert set(recent) == {"new"}
    assert recent["new"].call_count == 3
