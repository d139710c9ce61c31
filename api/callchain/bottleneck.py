"""Find the services that make the call chains slow, and the nodes their pools need.

The numbered rules the functions below apply (1-7) are listed in the doc.
Details: docs/api.md, "Notes from the code", `api/callchain/bottleneck.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Final

from api.callchain.baseline import BaselineState, is_ready, update_baselines
from api.callchain.bottleneck_settings import BottleneckSettings
from api.callchain.graph import downstream, flagged, pools_on_chain, service_pools
from api.callchain.report import (
    OVERFLOW_SERVICE,
    LatencyAnalysis,
    ServiceReport,
    ServiceStatus,
    ThresholdSource,
    note_of,
    verdict_of,
)
from api.callchain.types import ServiceStats, finite_or_none
from pipelines.config.pools import PoolConfig, ServiceConfig
from policy.need import ceil_nodes
from policy.types import LatencyAdjustment

_RECENT_CALLS: Final = 5
"""The recent window judges own work only with this many times ``min_calls`` calls in
it: the p95 of a few dozen calls is too noisy to blame a service on."""


def analyse(
    stats: Mapping[str, ServiceStats],
    pools: Sequence[PoolConfig],
    *,
    current_nodes: Mapping[str, int],
    gpu_util: Mapping[str, float | None],
    baselines: BaselineState,
    now: datetime,
    settings: BottleneckSettings | None = None,
    services: Sequence[ServiceConfig] = (),
    recent: Mapping[str, ServiceStats] | None = None,
) -> LatencyAnalysis:
    """Find the bottlenecks in the window's stats and the extra nodes per pool.

    Args:
        pools: the configured pools; their ``services`` give the pool and SLO of each.
        services: services on no GPU pool (the pools file's top-level ``services``)
            with their SLOs.
        current_nodes: pool name -> ready nodes now (missing counts as 0).
        gpu_util: pool name -> mean GPU utilisation 0-100, None or missing when unknown.
        baselines: the baselines so far (``BaselineState()`` to start).
        now: the time of the analysis (for the baselines).
        settings: the knobs; defaults when None.
        recent: per-service statistics of the last ``settings.recent_window`` of the
            window, None when not kept: own work past its limit there is own-slow too.

    Raises:
        ConfigError: a service is listed by more than one pool.
    """
    cfg = settings or BottleneckSettings()
    owner = service_pools(pools)
    reports = _judge_all(stats, recent or {}, pools, services, owner, baselines, cfg)
    blame = _spread(_blame(reports, stats), reports, stats)
    idle_below = {
        pool.name: cfg.gpu_idle_below if pool.gpu_idle_below is None else pool.gpu_idle_below
        for pool in pools
    }
    base = {pool.name: max(1, current_nodes.get(pool.name, 0)) for pool in pools}
    idle = {
        name: (util := gpu_util.get(name)) is not None and util < below
        for name, below in idle_below.items()
    }
    reports = {
        name: _sized(report, blame, stats, owner, base, idle, cfg)
        for name, report in reports.items()
    }
    adjustments = {
        pool.name: _pool_adjustment(
            pool.name, base[pool.name], gpu_util.get(pool.name), reports, cfg, idle_below[pool.name]
        )
        for pool in pools
    }
    return LatencyAnalysis(
        adjustments=MappingProxyType(adjustments),
        services=MappingProxyType(reports),
        baselines=update_baselines(
            baselines,
            stats,
            now,
            half_life=cfg.baseline_half_life,
            min_calls=cfg.min_calls,
            freeze_above=cfg.baseline_factor,
            min_updates=cfg.baseline_min_updates,
            skip=flagged(reports, stats),
        ),
    )


def _judge_all(
    stats: Mapping[str, ServiceStats],
    recent: Mapping[str, ServiceStats],
    pools: Sequence[PoolConfig],
    services: Sequence[ServiceConfig],
    owner: Mapping[str, str],
    baselines: BaselineState,
    cfg: BottleneckSettings,
) -> dict[str, ServiceReport]:
    """Rules 1 and 2 for every service seen in the window or named in the pools file."""
    configured = {s.name: s for pool in pools for s in pool.services}
    configured.update({s.name: s for s in services})
    return {
        name: _judge(
            name,
            (stats.get(name), recent.get(name)),
            owner.get(name),
            configured.get(name),
            baselines,
            cfg,
        )
        for name in sorted(set(stats) | set(configured))
    }


@dataclass(frozen=True)
class _Blame:
    """Who is blamed and who is scaled with whom (rules 3 and 5).

    Attributes:
        culprits: each blamed service -> its ratio.
        ratios: each service to scale -> its ratio (a culprit's own, or the largest of
            the culprits upstream of it).
        scaled_with: each downstream service -> the culprits it is scaled with.
    """

    culprits: Mapping[str, float]
    ratios: Mapping[str, float]
    scaled_with: Mapping[str, list[str]]


def _spread(
    culprit_ratio: Mapping[str, float],
    reports: Mapping[str, ServiceReport],
    stats: Mapping[str, ServiceStats],
) -> _Blame:
    """Rule 5: scale a culprit's slow or near downstream services with it."""
    ratios: dict[str, float] = dict(culprit_ratio)
    scaled_with: dict[str, list[str]] = {}
    for culprit, ratio in culprit_ratio.items():
        if reports[culprit].pool is None:
            continue  # nothing to buy for it, so nothing downstream to scale with it
        for below in downstream(culprit, stats):
            checked = reports.get(below)
            if checked is None or checked.status not in ("slow", "near"):
                continue
            scaled_with.setdefault(below, []).append(culprit)
            ratios[below] = max(ratios.get(below, 0.0), ratio)
    return _Blame(culprit_ratio, ratios, scaled_with)


def _sized(
    report: ServiceReport,
    blame: _Blame,
    stats: Mapping[str, ServiceStats],
    owner: Mapping[str, str],
    base: Mapping[str, int],
    idle: Mapping[str, bool],
    cfg: BottleneckSettings,
) -> ServiceReport:
    """Rule 4 and the verdict: one service's extra nodes, blame, note (``idle``: rule 7)."""
    name = report.service
    ratio = blame.ratios.get(name, 0.0)
    extra = ceil_nodes(base[report.pool] * ratio * cfg.gain) if report.pool else 0
    blamed = name in blame.culprits
    slows = pools_on_chain(name, stats, owner) if blamed and report.pool is None else ()
    judged = replace(
        report,
        culprit=blamed,
        scaled_with=tuple(sorted(blame.scaled_with.get(name, ()))),
        slows_pools=slows,
        extra_nodes=extra,
    )
    on_idle = judged.pool is not None and idle[judged.pool]
    return replace(judged, note=note_of(judged, on_idle), verdict=verdict_of(judged, on_idle))


def _judge(
    name: str,
    stats: tuple[ServiceStats | None, ServiceStats | None],
    pool: str | None,
    config: ServiceConfig | None,
    baselines: BaselineState,
    cfg: BottleneckSettings,
) -> ServiceReport:
    """Apply rules 1 and 2: the threshold and status of one service, and its own work."""
    stat, latest = stats
    baseline, usual = baselines.get(name), baselines.get_exclusive(name)
    threshold: float | None = None
    source: ThresholdSource = "none"
    overflow = name == OVERFLOW_SERVICE  # a mix of many services: no one to judge
    if not overflow and config is not None and config.slo_p95_ms is not None:
        threshold, source = config.slo_p95_ms, "slo"
    elif not overflow and baseline is not None and is_ready(baseline, cfg.baseline_min_updates):
        threshold, source = _factor(config, cfg) * baseline.p95_ms, "baseline"
    calls = stat.call_count if stat is not None else 0
    p95 = stat.p95_ms if stat is not None else math.nan
    own = finite_or_none(stat.self_p95_ms) if stat is not None else None
    recent_own = (
        finite_or_none(latest.self_p95_ms)
        if latest is not None and latest.call_count >= _RECENT_CALLS * cfg.min_calls
        else None
    )
    usual_p95 = (
        usual.p95_ms if usual is not None and is_ready(usual, cfg.baseline_min_updates) else None
    )
    limits = [] if threshold is None else [threshold]
    if usual_p95 is not None and not overflow:
        limits.append(_factor(config, cfg) * max(usual_p95, cfg.own_floor_ms))
    own_limit = min(limits) if limits else None
    status: ServiceStatus
    if calls < cfg.min_calls or not math.isfinite(p95):
        status = "insufficient_data"
    elif threshold is None:
        status = "unjudged"
    elif p95 > threshold:
        status = "slow"
    elif p95 >= cfg.near_fraction * threshold:
        status = "near"
    else:
        status = "ok"
    judged = status != "insufficient_data"
    return ServiceReport(
        service=name,
        pool=pool,
        status=status,
        call_count=calls,
        p95_ms=p95,
        self_p95_ms=stat.self_p95_ms if stat is not None else math.nan,
        threshold_ms=threshold,
        threshold_source=source,
        own_p95_ms=own,
        own_baseline_p95_ms=usual_p95,
        recent_own_p95_ms=recent_own,
        own_limit_ms=own_limit,
        own_slow=judged
        and own_limit is not None
        and max(own or 0.0, recent_own or 0.0) > own_limit,
    )


def _factor(config: ServiceConfig | None, cfg: BottleneckSettings) -> float:
    """Return k: the service's own ``baseline_factor`` if set, else the default."""
    if config is not None and config.baseline_factor is not None:
        return config.baseline_factor
    return cfg.baseline_factor


def _blame(
    reports: dict[str, ServiceReport], stats: Mapping[str, ServiceStats]
) -> dict[str, float]:
    """Apply rule 3: return culprit -> its ratio (rule 4); record slow services' residual."""
    culprits: dict[str, float] = {}
    for name, report in reports.items():
        if report.status == "insufficient_data":
            continue
        callees = stats[name].callees if name in stats else ()
        slow_callees = [
            c
            for c in callees
            if c in reports and (reports[c].status == "slow" or reports[c].own_slow)
        ]
        ratio = 0.0
        if report.own_slow and report.own_limit_ms:
            own = max(report.own_p95_ms or 0.0, report.recent_own_p95_ms or 0.0)
            ratio = own / report.own_limit_ms - 1.0
        if report.status == "slow" and report.threshold_ms:
            excess = sum(
                reports[c].p95_ms - (reports[c].threshold_ms or 0.0)
                for c in slow_callees
                if reports[c].status == "slow"
            )
            residual = max(report.self_p95_ms, report.p95_ms - excess)
            reports[name] = replace(report, residual_p95_ms=residual)
            # With a slow callee, or own work known to be healthy, it is waiting.
            if ratio > 0 or (not slow_callees and report.own_baseline_p95_ms is None):
                ratio = max(ratio, residual / report.threshold_ms - 1.0)
        if ratio > 0:
            culprits[name] = ratio
    return culprits


def _pool_adjustment(
    pool: str,
    base: int,
    util: float | None,
    reports: Mapping[str, ServiceReport],
    cfg: BottleneckSettings,
    idle_below: float,
) -> LatencyAdjustment:
    """Apply rules 6 and 7 to one pool, and name bottlenecks outside every GPU pool."""
    members = [r for r in reports.values() if r.pool == pool]
    relevant = [r for r in members if r.status == "slow" or r.culprit or r.extra_nodes > 0]
    outside = [r for r in reports.values() if pool in r.slows_pools]
    if not relevant and not outside:
        return LatencyAdjustment()
    reason = "; ".join(r.note for r in (*relevant, *outside))
    names = tuple(r.service for r in outside)
    wanted = max((r.extra_nodes for r in members), default=0)
    if util is not None and util < idle_below:
        blamed = any(r.culprit for r in members)
        if blamed:
            # The verdict itself is the flag, said once by the explanation's summary.
            reason += f"; GPU utilisation {util:.0f}% < {idle_below:.0f}%"
        elif wanted:
            reason += (
                f"; GPU utilisation {util:.0f}% < {idle_below:.0f}%: the GPUs have headroom, "
                "no nodes added for latency"
            )
        return LatencyAdjustment(extra_nodes=0, reason=reason, not_gpu_bound=blamed, outside=names)
    cap = max(1, ceil_nodes(cfg.max_fraction * base))
    if wanted > cap:
        reason += f"; capped at {cap} nodes ({cfg.max_fraction:g} x {base} current)"
    asking = tuple(sorted(r.service for r in members if r.extra_nodes > 0))
    return LatencyAdjustment(
        extra_nodes=min(wanted, cap), reason=reason, services=asking, outside=names
    )
