"""Bottleneck rules on hand-built statistics: culprit by self time, downstream, GPU check."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from api.callchain.baseline import Baseline, BaselineState, update_baselines
from api.callchain.bottleneck import analyse
from api.callchain.bottleneck_settings import BottleneckSettings
from api.callchain.graph import service_pools
from api.callchain.incremental import ChainWindow
from api.callchain.report import LatencyAnalysis
from api.callchain.types import ServiceStats, Span
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig, ServiceConfig
from policy.types import LatencyAdjustment

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def pool(name: str, *services: tuple[str, float]) -> PoolConfig:
    return PoolConfig(
        name=name,
        node_group_id=f"asg-{name}",
        services=[ServiceConfig(name=n, slo_p95_ms=slo) for n, slo in services],
    )


POOLS = [
    pool("cpu-gw", ("gateway", 190)),
    pool("a100-rank", ("ranker", 150)),
    pool("h100-embed", ("embedder", 100)),
    pool("cpu-tok", ("tokenizer", 50)),
]
NODES = {"cpu-gw": 4, "a100-rank": 6, "h100-embed": 10, "cpu-tok": 2}
BUSY = {"cpu-gw": 90.0, "a100-rank": 90.0, "h100-embed": 90.0, "cpu-tok": 90.0}


def st(
    name: str, p95: float, self_p95: float, callees: tuple[str, ...] = (), calls: int = 100
) -> ServiceStats:
    return ServiceStats(name, calls, calls, p95 * 0.6, p95, self_p95 * 0.6, self_p95, (), callees)


def run(
    stats: list[ServiceStats],
    *,
    current_nodes: Mapping[str, int] = NODES,
    gpu_util: Mapping[str, float | None] = BUSY,
    baselines: BaselineState | None = None,
) -> LatencyAnalysis:
    return analyse(
        {s.service: s for s in stats},
        POOLS,
        current_nodes=current_nodes,
        gpu_util=gpu_util,
        baselines=baselines or BaselineState(),
        now=NOW,
    )


def test_a_slow_leaf_is_the_culprit_and_its_callers_are_not_blamed() -> None:
    # embedder is slow on its own; ranker and gateway are slow only waiting on it.
    stats = [
        st("gateway", 200, 30, ("ranker",)),
        st("ranker", 170, 20, ("embedder",)),
        st("embedder", 150, 150),
    ]

    result = analyse(
        {s.service: s for s in stats},
        POOLS,
        current_nodes=NODES,
        gpu_util=BUSY,
        baselines=BaselineState(),
        now=NOW,
    )

    embedder, ranker, gateway = (result.services[n] for n in ("embedder", "ranker", "gateway"))
    assert (embedder.culprit, embedder.status, embedder.own_p95_ms) == (True, "slow", 150)
    assert embedder.verdict == "bottleneck"
    # ceil(10 nodes x (150 / 100 - 1) x gain 0.5) = 3
    assert result.adjustments["h100-embed"].extra_nodes == 3
    assert result.adjustments["h100-embed"].services == ("embedder",)
    assert "embedder p95 150 ms vs SLO 100 ms" in result.adjustments["h100-embed"].reason
    assert (ranker.status, ranker.culprit) == ("slow", False)
    assert ranker.residual_p95_ms == pytest.approx(120)  # 170 - embedder's 50 ms excess
    assert ranker.own_p95_ms == pytest.approx(20)  # exclusive time, not callee-inflated
    assert ranker.verdict == "waiting_on_callee"
    assert (gateway.status, gateway.culprit) == ("slow", False)
    assert result.adjustments["a100-rank"].extra_nodes == 0
    assert result.adjustments["cpu-gw"].extra_nodes == 0
    assert "not blamed" in result.adjustments["a100-rank"].reason
    assert result.adjustments["cpu-tok"] == LatencyAdjustment()


def test_a_slow_middle_service_scales_its_slow_downstream_with_it() -> None:
    stats = [
        st("gateway", 300, 30, ("ranker",)),
        st("ranker", 270, 160, ("embedder",)),  # slow itself: 160 ms of its own work
        st("embedder", 150, 150),
    ]

    result = run(stats)

    services = result.services
    adjustments = result.adjustments
    # Its own 160 ms break its 150 ms SLO alone: ranker is a culprit too, asking for
    # its residual max(160, 270 - 50) = 220 ms over 150.
    assert services["ranker"].culprit
    assert services["ranker"].residual_p95_ms == pytest.approx(220)
    # ceil(6 x (220 / 150 - 1) x 0.5) = ceil(1.4) = 2
    assert adjustments["a100-rank"].extra_nodes == 2
    # embedder: its own 0.5 excess beats ranker's 0.47: ceil(10 x 0.5 x 0.5) = 3
    assert adjustments["h100-embed"].extra_nodes == 3
    assert services["embedder"].scaled_with == ("ranker",)
    # The pool names its own service that asks, scaled with the culprit upstream.
    assert adjustments["h100-embed"].services == ("embedder",)
    assert "downstream of ranker" in adjustments["h100-embed"].reason
    assert not services["gateway"].culprit


def test_near_downstream_services_are_scaled_transitively_and_healthy_ones_are_not() -> None:
    stats = [
        st("ranker", 210, 150, ("embedder",)),  # 210 / 150: 40 % over, all its own
        st("embedder", 40, 30, ("tokenizer",)),  # far below its SLO: left alone
        st("tokenizer", 45, 45),  # 45 of 50 ms: near, two hops down
    ]

    result = run(stats)

    services = result.services
    adjustments = result.adjustments
    assert adjustments["a100-rank"].extra_nodes == 2  # ceil(6 x 0.4 x 0.5)
    assert services["embedder"].status == "ok"
    assert adjustments["h100-embed"].extra_nodes == 0
    assert (services["tokenizer"].status, services["tokenizer"].scaled_with) == (
        "near",
        ("ranker",),
    )
    assert adjustments["cpu-tok"].extra_nodes == 1  # ceil(2 x 0.4 x 0.5)


def test_an_idle_gpu_pool_is_not_gpu_bound_and_gets_no_nodes() -> None:
    stats = [st("ranker", 170, 20, ("embedder",)), st("embedder", 150, 150)]

    result = run(stats, gpu_util={**BUSY, "h100-embed": 22.0})

    embed = result.adjustments["h100-embed"]
    assert embed.not_gpu_bound
    assert embed.extra_nodes == 0
    assert embed.reason.endswith("; GPU utilisation 22% < 40%")
    # What embedder would ask of busy GPUs is not stated as if it were added.
    assert result.services["embedder"].extra_nodes == 3
    assert "+3 nodes" not in embed.reason
    assert "no nodes are added for it" in embed.reason


def test_unknown_gpu_utilisation_counts_as_gpu_bound() -> None:
    result = run([st("embedder", 150, 150)], gpu_util={})

    embed = result.adjustments["h100-embed"]
    assert (embed.extra_nodes, embed.not_gpu_bound) == (3, False)


def test_extra_nodes_are_capped_and_an_empty_pool_can_grow() -> None:
    result = run([st("embedder", 1000, 1000)], current_nodes={"h100-embed": 0})

    embed = result.adjustments["h100-embed"]
    # ceil(1 x 9 x 0.5) = 5 asked, capped at max(1, 1.0 x 1)
    assert embed.extra_nodes == 1
    assert "capped at 1 nodes" in embed.reason


def test_without_an_slo_a_service_is_judged_against_its_baseline() -> None:
    # search runs on no pool (so has no SLO); its baseline p95 is 100 ms.
    ready = BaselineState({"search": Baseline(100.0, NOW - timedelta(minutes=1), updates=10)})
    stats = [st("search", 250, 200, ("ranker",)), st("ranker", 130, 130)]

    result = run(stats, baselines=ready)

    search = result.services["search"]
    assert (search.threshold_source, search.threshold_ms, search.status) == (
        "baseline",
        200,
        "slow",
    )
    assert search.culprit
    assert search.pool is None
    assert search.verdict == "outside_gpu_pools"
    assert "bottleneck outside every GPU pool" in search.note
    assert search.slows_pools == ("a100-rank",)
    # ranker (130 of 150 ms, near) is downstream, but a CPU bottleneck never buys GPUs:
    # its pool is told why instead.
    rank = result.adjustments["a100-rank"]
    assert rank.extra_nodes == 0
    assert "search p95 250 ms" in rank.reason
    # The baseline is frozen while the service is slow against it.
    assert result.baselines.get("search") == ready.get("search")

    calm = run([st("search", 190, 190)], baselines=ready)
    assert calm.services["search"].status == "near"


def test_a_young_baseline_or_too_few_calls_is_not_judged() -> None:
    young = BaselineState({"search": Baseline(100.0, NOW, updates=2)})

    result = run([st("search", 900, 900), st("embedder", 900, 900, calls=5)], baselines=young)

    services = result.services
    assert services["search"].status == "unjudged"
    assert services["embedder"].status == "insufficient_data"
    assert services["tokenizer"].status == "insufficient_data"  # configured, never seen
    assert all(a.extra_nodes == 0 for a in result.adjustments.values())


def test_baselines_are_a_time_weighted_moving_average() -> None:
    stats = {"svc": st("svc", 200, 200)}
    start = update_baselines(BaselineState(), stats, NOW)
    assert start.get("svc") == Baseline(200.0, NOW, 1)

    later = update_baselines(
        start, {"svc": st("svc", 300, 300)}, NOW + timedelta(hours=1), half_life=timedelta(hours=1)
    )

    assert later.services["svc"].p95_ms == pytest.approx(250.0)
    assert BaselineState.from_dict(later.to_dict()) == later
    few = update_baselines(BaselineState(), {"svc": st("svc", 200, 200, calls=3)}, NOW)
    assert few.get("svc") is None


def _usual(**exclusive_ms: float) -> BaselineState:
    """Ready exclusive-time baselines (the usual own p95 of each service)."""
    at = NOW - timedelta(minutes=1)
    return BaselineState(
        exclusive={n: Baseline(v, at, updates=10) for n, v in exclusive_ms.items()}
    )


def test_a_caller_with_usual_own_work_is_not_blamed_for_its_slow_callee() -> None:
    # embedder's SLO (140 ms) leaves ranker's (150 ms) 10 ms for its usual 30 ms of own
    # work: fine while embedder is well under its SLO, as usual. embedder slows to 300 ms
    # and ranker lasts 330 ms, 30 of them its own. With embedder back at its SLO ranker
    # would still last 170 ms, which the residual blamed on ranker.
    pools = [
        pool("a100-rank", ("ranker", 150)),
        pool("h100-embed", ("embedder", 140)),
    ]
    stats = {
        "ranker": st("ranker", 330, 30, ("embedder",)),
        "embedder": st("embedder", 300, 300),
    }

    def blame(baselines: BaselineState) -> LatencyAnalysis:
        return analyse(
            stats, pools, current_nodes=NODES, gpu_util=BUSY, baselines=baselines, now=NOW
        )

    # Without a usual exclusive time the residual (330 - 160 = 170 > 150) blamed ranker
    # for embedder's breach; its own 30 ms are within its SLO, so it is waiting.
    unknown = blame(BaselineState())
    assert unknown.services["ranker"].residual_p95_ms == pytest.approx(170)
    assert unknown.services["ranker"].verdict == "waiting_on_callee"
    # With ranker's own work at its usual 30 ms it is only waiting on embedder.
    known = blame(_usual(ranker=30))
    ranker = known.services["ranker"]
    assert (ranker.culprit, ranker.verdict) == (False, "waiting_on_callee")
    assert ranker.own_baseline_p95_ms == 30
    assert "usual 30 ms), not blamed" in ranker.note
    assert known.adjustments["a100-rank"].extra_nodes == 0
    assert known.services["embedder"].culprit
    assert known.adjustments["h100-embed"].extra_nodes > 0
    # Own work past twice its usual is unhealthy: blamed as before.
    worse = blame(_usual(ranker=14))
    assert worse.services["ranker"].culprit
    assert "usual 14 ms" in worse.services["ranker"].note


def test_a_caller_of_a_slow_callee_several_times_per_call_is_not_blamed_for_it() -> None:
    # gateway (SLO 190) calls ranker (SLO 150) three times in a row and works 10 ms
    # itself: 160 ms while ranker takes its usual 50. ranker slows to 180 ms, gateway to
    # 550; the residual subtracts ranker's 30 ms excess once: 520 > 190.
    stats = [st("gateway", 550, 10, ("ranker",)), st("ranker", 180, 180)]

    unknown = run(stats)
    assert not unknown.services["gateway"].culprit  # the residual alone blamed it
    known = run(stats, baselines=_usual(gateway=10))
    assert not known.services["gateway"].culprit
    assert known.services["ranker"].culprit
    assert known.adjustments["cpu-gw"].extra_nodes == 0


def test_own_work_over_its_own_threshold_is_blamed_however_usual() -> None:
    # Usual or not, 200 ms of gateway's own work breaks its 190 ms SLO by itself.
    stats = [st("gateway", 400, 200, ("ranker",)), st("ranker", 180, 180)]
    result = run(stats, baselines=_usual(gateway=200))
    assert result.services["gateway"].culprit


def test_exclusive_baselines_are_kept_and_frozen_on_their_own() -> None:
    start = update_baselines(BaselineState(), {"svc": st("svc", 200, 20)}, NOW)
    assert start.get_exclusive("svc") == Baseline(20.0, NOW, 1)
    ready = BaselineState({"svc": Baseline(200.0, NOW, 10)}, {"svc": Baseline(20.0, NOW, 10)})
    # The call is slow (frozen), its own work as usual (still learnt).
    later = update_baselines(
        ready, {"svc": st("svc", 900, 22)}, NOW + timedelta(hours=1), half_life=timedelta(hours=1)
    )
    assert later.get("svc") == ready.get("svc")
    assert later.exclusive["svc"].p95_ms == pytest.approx(21.0)
    assert BaselineState.from_dict(later.to_dict()) == later


def test_a_service_on_two_pools_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'ranker' is listed by pools"):
        service_pools([pool("a", ("ranker", 1)), pool("b", ("ranker", 2))])


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="baseline_factor"):
        BottleneckSettings(baseline_factor=1.0)


def test_from_spans_to_adjustment_blames_the_slow_leaf() -> None:
    spans = []
    for i in range(40):
        t0 = 1_714_564_800_000_000_000 + i * 10**9
        ms = 1_000_000
        slow = 140 if i % 10 else 60  # the embedder's own work, mostly 140 ms
        spans += [
            Span(f"t{i}", "g", None, "gateway", "GET", t0, t0 + (20 + slow + 10) * ms),
            Span(f"t{i}", "r", "g", "ranker", "rank", t0 + 5 * ms, t0 + (15 + slow + 5) * ms),
            Span(f"t{i}", "e", "r", "embedder", "embed", t0 + 10 * ms, t0 + (10 + slow) * ms),
        ]
    window = ChainWindow(settle=timedelta(0))
    window.add(spans, NOW)

    result = analyse(
        window.stats(NOW),
        POOLS,
        current_nodes=NODES,
        gpu_util=BUSY,
        baselines=BaselineState(),
        now=NOW,
    )

    assert [n for n, r in result.services.items() if r.culprit] == ["embedder"]
    assert result.services["ranker"].status == "slow"
    assert result.adjustments["h100-embed"].extra_nodes == 2  # ceil(10 x 0.4 x 0.5)
    assert result.adjustments["a100-rank"].extra_nodes == 0
    assert json.loads(json.dumps(result.to_dict()))["pools"]["h100-embed"]["extra_nodes"] == 2


def test_an_idle_pool_slow_only_waiting_downstream_is_not_called_not_gpu_bound() -> None:
    # The case: embedder slow with busy GPUs, ranker's pool idle at 15 %.
    stats = [st("ranker", 170, 20, ("embedder",)), st("embedder", 150, 150)]

    result = run(stats, gpu_util={**BUSY, "a100-rank": 15.0})

    rank = result.adjustments["a100-rank"]
    assert not rank.not_gpu_bound
    assert rank.extra_nodes == 0
    assert "not blamed" in rank.reason
    assert "not GPU-bound" not in rank.reason
    assert result.services["ranker"].verdict == "waiting_on_callee"
    assert result.adjustments["h100-embed"].extra_nodes == 3
    assert result.services["embedder"].verdict == "bottleneck"


def test_a_blamed_service_on_idle_gpus_is_not_gpu_bound() -> None:
    result = run([st("embedder", 150, 150)], gpu_util={**BUSY, "h100-embed": 15.0})

    assert result.services["embedder"].verdict == "not_gpu_bound"
    assert result.adjustments["h100-embed"].not_gpu_bound


def test_a_cpu_service_with_its_own_slo_is_a_bottleneck_outside_gpu_pools() -> None:
    # gateway -> preprocess (CPU, no pool) -> ranker -> embedder; preprocess is slow.
    stats = [
        st("gateway", 900, 20, ("preprocess",)),
        st("preprocess", 800, 600, ("ranker",)),
        st("ranker", 120, 20, ("embedder",)),
        st("embedder", 90, 90),
    ]
    pools = [pool("a100-rank", ("ranker", 150)), pool("h100-embed", ("embedder", 100))]

    result = analyse(
        {s.service: s for s in stats},
        pools,
        current_nodes=NODES,
        gpu_util=BUSY,
        baselines=BaselineState(),
        now=NOW,
        services=[ServiceConfig(name="preprocess", slo_p95_ms=300)],
    )

    pre = result.services["preprocess"]
    assert (pre.pool, pre.threshold_source, pre.culprit) == (None, "slo", True)
    assert pre.verdict == "outside_gpu_pools"
    assert pre.own_p95_ms == 600
    assert pre.slows_pools == ("a100-rank", "h100-embed")
    for name in ("a100-rank", "h100-embed"):
        adjustment = result.adjustments[name]
        assert adjustment.extra_nodes == 0
        assert "preprocess p95 800 ms vs SLO 300 ms" in adjustment.reason
        assert "buying GPU nodes will not help" in adjustment.reason


def test_per_service_baseline_factor_and_per_pool_idle_threshold() -> None:
    ready = BaselineState({"embedder": Baseline(50.0, NOW - timedelta(minutes=1), updates=10)})
    pools = [
        PoolConfig(
            name="h100-embed",
            node_group_id="asg-embed",
            gpu_idle_below=10,
            services=[ServiceConfig(name="embedder", baseline_factor=4)],
        )
    ]
    # 170 ms is slow by the default factor 2 (> 100 ms), only near by this service's 4.
    calm = analyse(
        {"embedder": st("embedder", 170, 170)},
        pools,
        current_nodes=NODES,
        gpu_util={"h100-embed": 90.0},
        baselines=ready,
        now=NOW,
    )
    assert calm.services["embedder"].threshold_ms == 200
    assert calm.services["embedder"].status == "near"
    result = analyse(
        {"embedder": st("embedder", 1500, 1500)},
        pools,
        current_nodes=NODES,
        gpu_util={"h100-embed": 15.0},  # idle by the default 40 %, busy by this pool's 10 %
        baselines=ready,
        now=NOW,
    )
    assert result.adjustments["h100-embed"].extra_nodes > 0
    assert not result.adjustments["h100-embed"].not_gpu_bound
