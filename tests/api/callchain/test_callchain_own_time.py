"""Issue #37: blame by a service's own (exclusive) time, and baselines that do not learn
from an incident."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from api.callchain.baseline import Baseline, BaselineState, update_baselines
from api.callchain.bottleneck import analyse
from api.callchain.report import OVERFLOW_SERVICE, LatencyAnalysis
from api.callchain.types import ServiceStats
from pipelines.config.pools import PoolConfig, ServiceConfig

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
POOLS = [PoolConfig(name="l4-infer", node_group_id="ng-l4", services=[ServiceConfig(name="llm")])]
NODES = {"l4-infer": 6}


def st(name: str, p95: float, own: float, callees: tuple[str, ...] = ()) -> ServiceStats:
    return ServiceStats(name, 100, 100, p95 * 0.6, p95, own * 0.6, own, (), callees)


def usual(total: dict[str, float], own: dict[str, float]) -> BaselineState:
    at = NOW - timedelta(seconds=10)
    return BaselineState(
        {n: Baseline(v, at, updates=10) for n, v in total.items()},
        {n: Baseline(v, at, updates=10) for n, v in own.items()},
    )


# The first run: gateway -> tokenizer (CPU, no pool) -> llm; usual totals and
# own times, then tokenizer's own time 5x while its total stays under 2x its usual.
USUAL = usual(
    {"gateway": 380.0, "tokenizer": 372.5, "llm": 350.0},
    {"gateway": 5.0, "tokenizer": 24.6, "llm": 350.0},
)
SLOW_TOKENIZER = {
    "gateway": st("gateway", 485, 5, ("tokenizer",)),
    "tokenizer": st("tokenizer", 479, 127.6, ("llm",)),
    "llm": st("llm", 350, 350),
}


def run(stats: dict[str, ServiceStats], util: float, baselines: BaselineState) -> LatencyAnalysis:
    return analyse(
        stats,
        POOLS,
        current_nodes=NODES,
        gpu_util={"l4-infer": util},
        baselines=baselines,
        now=NOW,
    )


def test_own_work_five_times_its_usual_is_flagged_though_the_total_is_under_threshold() -> None:
    result = run(SLOW_TOKENIZER, 90.0, USUAL)

    tok = result.services["tokenizer"]
    assert tok.status == "ok"  # 479 ms vs 2 x 372.5: the total alone never flagged it
    assert (tok.own_slow, tok.culprit, tok.verdict) == (True, True, "outside_gpu_pools")
    assert tok.own_limit_ms == pytest.approx(49.2)
    assert tok.slows_pools == ("l4-infer",)
    assert [n for n, r in result.services.items() if r.culprit] == ["tokenizer"]
    assert result.services["gateway"].verdict == "ok"
    adjustment = result.adjustments["l4-infer"]
    assert adjustment.extra_nodes == 0
    assert adjustment.outside == ("tokenizer",)
    assert "buying GPU nodes will not help" in adjustment.reason


def test_a_gpu_service_slow_in_its_own_work_within_its_slo() -> None:
    pools = [
        PoolConfig(
            name="l4-infer",
            node_group_id="ng-l4",
            services=[ServiceConfig(name="llm", slo_p95_ms=800)],
        )
    ]
    stats = {
        "tokenizer": st("tokenizer", 520, 20, ("llm",)),
        "llm": st("llm", 500, 500),
    }
    baselines = usual({"tokenizer": 120.0}, {"tokenizer": 20.0, "llm": 100.0})

    def at(util: float) -> LatencyAnalysis:
        return analyse(
            stats,
            pools,
            current_nodes=NODES,
            gpu_util={"l4-infer": util},
            baselines=baselines,
            now=NOW,
        )

    busy, idle = at(90.0), at(10.0)

    assert busy.services["llm"].verdict == "bottleneck"
    # ceil(6 x (500 / 200 - 1) x 0.5) = 5
    assert busy.adjustments["l4-infer"].extra_nodes == 5
    # tokenizer's total (520 ms) is 4x its usual but its own work is as usual.
    assert busy.services["tokenizer"].verdict == "waiting_on_callee"
    assert idle.services["llm"].verdict == "not_gpu_bound"
    reason = idle.adjustments["l4-infer"].reason
    assert (
        idle.adjustments["l4-infer"].extra_nodes,
        idle.adjustments["l4-infer"].not_gpu_bound,
    ) == (
        0,
        True,
    )
    assert "+5 nodes" not in reason
    assert "no nodes are added for it" in reason


def test_baselines_do_not_learn_from_windows_in_which_the_service_is_flagged() -> None:
    later = NOW + timedelta(minutes=30)
    result = analyse(
        SLOW_TOKENIZER,
        POOLS,
        current_nodes=NODES,
        gpu_util={"l4-infer": 90.0},
        baselines=USUAL,
        now=later,
    )

    # tokenizer is flagged and gateway is its caller: both keep their baselines.
    for name in ("tokenizer", "gateway"):
        assert result.baselines.get(name) == USUAL.get(name)
        assert result.baselines.get_exclusive(name) == USUAL.get_exclusive(name)
    # llm is healthy and still learns.
    assert result.baselines.get("llm") != USUAL.get("llm")


def test_baselines_of_services_gone_quiet_are_forgotten() -> None:
    old = usual({"gone": 100.0}, {"gone": 10.0})
    kept = update_baselines(old, {}, NOW + timedelta(hours=2))
    dropped = update_baselines(old, {}, NOW + timedelta(days=2))
    assert kept.get("gone") is not None
    assert dropped.get("gone") is None
    assert dropped.get_exclusive("gone") is None


def test_the_overflow_bucket_is_never_judged() -> None:
    stats = {OVERFLOW_SERVICE: st(OVERFLOW_SERVICE, 9000, 9000)}
    result = run(stats, 90.0, usual({OVERFLOW_SERVICE: 10.0}, {OVERFLOW_SERVICE: 10.0}))
    other = result.services[OVERFLOW_SERVICE]
    assert (other.status, other.culprit, other.own_slow) == ("unjudged", False, False)


def test_own_work_slow_in_the_recent_part_of_the_window_is_flagged() -> None:
    # The window's p95 still reads usual (under 5 % of its calls are slow); the last
    # 30 s say tokenizer's own work is 5x its usual.
    window = {**SLOW_TOKENIZER, "tokenizer": st("tokenizer", 380, 25, ("llm",))}
    recent = {"tokenizer": st("tokenizer", 479, 127.6, ("llm",))}

    quiet = run(window, 90.0, USUAL)
    result = analyse(
        window,
        POOLS,
        current_nodes=NODES,
        gpu_util={"l4-infer": 90.0},
        baselines=USUAL,
        now=NOW,
        recent=recent,
    )

    assert not quiet.services["tokenizer"].culprit
    tok = result.services["tokenizer"]
    assert (tok.own_slow, tok.verdict, tok.recent_own_p95_ms) == (True, "outside_gpu_pools", 127.6)
    assert "128 ms lately" in tok.note
    # 40 recent calls are too few for their p95 to blame anyone on.
    few = {"tokenizer": ServiceStats("tokenizer", 40, 40, 300, 479, 80, 127.6, (), ("llm",))}
    noisy = analyse(
        window,
        POOLS,
        current_nodes=NODES,
        gpu_util={"l4-infer": 90.0},
        baselines=USUAL,
        now=NOW,
        recent=few,
    )
    assert noisy.services["tokenizer"].recent_own_p95_ms is None
    assert not noisy.services["tokenizer"].culprit
