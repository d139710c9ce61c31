"""Per-service statistics on hand-built traces."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from api.callchain.stats import union_ns
from api.callchain.types import Span, SpanStatus
from tests.api.callchain.reference_stats import percentile, service_stats

T0_NS = 1_714_564_800_000_000_000
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def sp(
    trace: str,
    span_id: str,
    parent: str | None,
    service: str,
    start_ms: float,
    end_ms: float,
    status: SpanStatus = "unset",
) -> Span:
    return Span(
        trace,
        span_id,
        parent,
        service,
        f"{service} op",
        T0_NS + round(start_ms * 1e6),
        T0_NS + round(end_ms * 1e6),
        status=status,
    )


def chain() -> list[Span]:
    """gateway -> ranker -> (embedder, cache), with nested spans inside two services."""
    return [
        sp("t", "g1", None, "gateway", 0, 200),
        sp("t", "g2", "g1", "gateway", 10, 190),  # the client span of the outgoing call
        sp("t", "r1", "g2", "ranker", 20, 180, "error"),
        sp("t", "r2", "r1", "ranker", 30, 60),  # an internal step
        sp("t", "e1", "r2", "embedder", 60, 100),  # called from the internal step
        sp("t", "c1", "r1", "cache", 70, 120),  # overlaps the embedder call
    ]


def test_self_time_removes_downstream_calls_once_each() -> None:
    stats = service_stats(chain())

    # gateway waits on ranker 20-180: 200 - 160.
    assert stats["gateway"].self_p95_ms == pytest.approx(40.0)
    # ranker waits on embedder 60-100 and cache 70-120, union 60-120: 160 - 60.
    assert stats["ranker"].self_p95_ms == pytest.approx(100.0)
    assert stats["embedder"].self_p95_ms == pytest.approx(40.0)
    assert stats["cache"].self_p95_ms == pytest.approx(50.0)


def test_calls_edges_and_errors() -> None:
    stats = service_stats(chain())

    gateway, ranker = stats["gateway"], stats["ranker"]
    assert (gateway.span_count, gateway.call_count, gateway.p95_ms) == (2, 1, 200.0)
    assert (ranker.span_count, ranker.call_count, ranker.p95_ms) == (2, 1, 160.0)
    assert gateway.callers == ()
    assert gateway.callees == ("ranker",)
    assert ranker.callers == ("gateway",)
    assert ranker.callees == ("cache", "embedder")
    assert stats["embedder"].callers == ("ranker",)
    assert (ranker.error_count, gateway.error_count) == (1, 0)
    assert sorted(stats) == ["cache", "embedder", "gateway", "ranker"]


def test_parallel_calls_are_not_counted_twice() -> None:
    spans = [
        sp("t", "p", None, "api", 0, 110),
        sp("t", "a", "p", "db", 0, 100),
        sp("t", "b", "p", "db", 5, 105),
    ]

    stats = service_stats(spans)

    # A sum of the children (200 ms) would floor the self time at 0; the union leaves 5.
    assert stats["api"].self_p95_ms == pytest.approx(5.0)
    assert stats["db"].call_count == 2


def test_a_call_that_outlives_its_caller_counts_only_while_the_caller_runs() -> None:
    spans = [sp("t", "p", None, "api", 0, 100), sp("t", "q", "p", "queue", 50, 300)]

    assert service_stats(spans)["api"].self_p95_ms == pytest.approx(50.0)


def test_a_missing_parent_makes_a_call_without_caller() -> None:
    stats = service_stats([sp("t", "x", "gone", "ranker", 0, 10)])

    assert (stats["ranker"].call_count, stats["ranker"].callers) == (1, ())
    assert stats["ranker"].self_p95_ms == pytest.approx(10.0)


def test_percentiles_over_calls_match_numpy() -> None:
    rng = np.random.default_rng(7)
    durations = rng.lognormal(3.0, 0.8, size=257)
    spans = [sp(f"t{i}", "s", None, "svc", 0, d) for i, d in enumerate(durations)]

    stats = service_stats(spans)["svc"]

    assert stats.p50_ms == pytest.approx(np.percentile(durations, 50), rel=1e-6)
    assert stats.p95_ms == pytest.approx(np.percentile(durations, 95), rel=1e-6)
    assert stats.self_p95_ms == pytest.approx(stats.p95_ms)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert np.isnan(percentile([], 95))


def test_union_of_intervals() -> None:
    assert union_ns([(0, 10), (5, 15), (20, 30), (21, 22)]) == 25
    assert union_ns([]) == 0
