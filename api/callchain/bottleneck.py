"""Find the services that make the call chains slow, and the nodes their pools need.

The rules, in the order they apply:

1. **Threshold.** A service is judged against its SLO (``slo_p95_ms`` in the pools
   config, under its pool or, for a service on no GPU pool, under the top-level
   ``services``) or, without one, against ``baseline_factor`` (k, default 2, per
   service if set) times its own ready baseline p95. With neither, or fewer than
   ``min_calls`` calls in the window, it is not judged. Its status is ``slow`` when
   p95 > threshold, ``near`` when p95 >= ``near_fraction`` x threshold, else ``ok``.
2. **Blame.** A slow service may only be waiting on a slow callee. What remains of its
   p95 with its slow direct callees brought back to their thresholds is its *residual*:
   ``residual = max(self_p95, p95 - sum of the slow callees' excess)``. It is blamed
   (a culprit) only when the residual is still over its threshold and, when one of
   its direct callees is slow, its own work is not healthy. Its *own* p95 (reported)
   is the p95 of its exclusive time: duration minus the time in its callees; that is
   *healthy* when it is within its threshold and within k times its own usual
   exclusive p95 (a baseline kept like the duration's, ready after
   ``baseline_min_updates`` analyses). The residual alone over-blames a caller whose
   own work has not changed: when its callees' thresholds leave its own threshold
   little room (a caller's SLO tighter than its callee's), or when it calls a slow
   callee several times per call (the excess is subtracted once). Until a caller's
   exclusive baseline is ready, the residual alone decides. A slow leaf is always
   blamed (residual = p95); its caller, slow only because of it, is not.
3. **Proportional nodes.** A culprit on a pool asks it for
   ``ceil(current_nodes x (residual / threshold - 1) x gain)`` nodes (``current_nodes``
   counted as at least 1, so an empty pool can still grow). A culprit on no GPU pool
   asks for nothing: it is reported as a bottleneck outside every GPU pool in the
   reason of each pool whose services share its call chain (its transitive callers
   and callees), where buying GPUs would not help.
4. **Downstream.** The services a culprit calls, transitively, will receive the
   traffic it was holding back once it is fixed: a fix that only moves the queue one
   hop down is no fix. Each downstream service that is ``slow`` or ``near`` is scaled
   with the culprit: its pool is asked for at least the culprit's fraction,
   ``ceil(current_nodes x (own_culprit / threshold_culprit - 1) x gain)``, or its own
   culprit share if that is larger. Downstream services with headroom are left alone.
5. **Per pool.** A pool gets the largest ask of its services (they share the nodes, so
   asks do not add up), capped at ``max_fraction`` x its current nodes (at least 1).
6. **Not GPU-bound.** When a pool's mean GPU utilisation is below ``gpu_idle_below``
   (default 40 %, per pool if set) no nodes are added for latency: idle GPUs mean more
   of them would not help. The pool is reported ``not_gpu_bound`` only when one of its
   services is *blamed* (rule 2): a pool whose services are slow only waiting on
   another pool's service is not the one to fix. An unknown utilisation is assumed
   GPU-bound.

Percentiles do not add up exactly, so the residual of rule 2 is an estimate; summing
the callees' excess assumes sequential calls and, with parallel calls, errs towards
blaming the callee, which then gets scaled anyway. The exclusive-time check needs no
such arithmetic: it compares the caller's own work with its own history.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final, Literal

from api.callchain.baseline import BaselineState, is_ready, update_baselines
from api.callchain.types import ServiceStats, finite_or_none
from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolConfig, ServiceConfig
from pipelines.policy import LatencyAdjustment, ceil_nodes

_MIN_USUAL_MS: Final = 1.0

ServiceStatus = Literal["ok", "near", "slow", "insufficient_data", "unjudged"]
"""How a service stands against its threshold (``unjudged``: no SLO nor ready baseline)."""

ThresholdSource = Literal["slo", "baseline", "none"]
"""Where a service's threshold came from."""

Verdict = Literal[
    "bottleneck",
    "not_gpu_bound",
    "outside_gpu_pools",
    "waiting_on_callee",
    "scaled_with_upstream",
    "ok",
    "near",
    "insufficient_data",
    "unjudged",
]
"""The conclusion on one service: blamed on a GPU-bound pool (``bottleneck``), blamed
on a pool whose GPUs idle (``not_gpu_bound``), blamed on no GPU pool
(``outside_gpu_pools``), slow only waiting on a slow callee, scaled with a culprit
upstream, or its status when none of these."""


@dataclass(frozen=True)
class BottleneckSettings:
    """The knobs of the analysis (see the module documentation for the rules).

    Attributes:
        baseline_factor: k; without an SLO a service is slow above k x its baseline.
        gain: the share of the relative excess turned into extra nodes.
        max_fraction: the most extra nodes per decision, as a share of current nodes.
        near_fraction: a downstream service at or above this share of its threshold is
            scaled with the culprit upstream of it.
        gpu_idle_below: GPU utilisation (0-100) under which a slow pool is not GPU-bound.
        min_calls: fewer calls in the window than this and a service is not judged.
        baseline_half_life: the half-life of the baseline's moving average.
        baseline_min_updates: updates before a baseline is used to judge.
    """

    baseline_factor: float = 2.0
    gain: float = 0.5
    max_fraction: float = 1.0
    near_fraction: float = 0.8
    gpu_idle_below: float = 40.0
    min_calls: int = 20
    baseline_half_life: timedelta = timedelta(hours=1)
    baseline_min_updates: int = 5

    def __post_init__(self) -> None:
        if not self.baseline_factor > 1:
            raise ValueError(f"baseline_factor must be > 1, got {self.baseline_factor}")
        if not self.gain > 0 or not self.max_fraction > 0:
            raise ValueError("gain and max_fraction must be > 0")
        if not 0 < self.near_fraction <= 1:
            raise ValueError(f"near_fraction must be in (0, 1], got {self.near_fraction}")
        if self.min_calls < 1 or self.baseline_min_updates < 1:
            raise ValueError("min_calls and baseline_min_updates must be >= 1")


@dataclass(frozen=True)
class ServiceReport:
    """The verdict on one service, for the explanation and a dashboard.

    Attributes:
        service: the service name.
        pool: the pool it runs on, None when no pool lists it.
        status: how it stands against its threshold.
        call_count: calls in the window.
        p95_ms: p95 call duration (NaN without calls).
        self_p95_ms: p95 self time (NaN without calls).
        threshold_ms: the p95 it is judged against, None when not judged.
        threshold_source: where ``threshold_ms`` came from.
        own_p95_ms: p95 of its exclusive time (duration minus time in callees); None
            without calls.
        residual_p95_ms: p95 with its slow callees' excess removed (rule 2); None
            unless slow.
        own_baseline_p95_ms: its usual exclusive p95 (rule 2); None until ready.
        culprit: its own work makes it slow (it is blamed).
        scaled_with: the culprits upstream of it that it is scaled with (rule 4).
        extra_nodes: the nodes it asks of its pool before the cap and GPU check.
        note: the verdict in words.
        verdict: the conclusion (see :data:`Verdict`).
        slows_pools: for a culprit on no GPU pool, the pools whose services share its
            call chain.
    """

    service: str
    pool: str | None
    status: ServiceStatus
    call_count: int
    p95_ms: float
    self_p95_ms: float
    threshold_ms: float | None
    threshold_source: ThresholdSource
    own_p95_ms: float | None = None
    residual_p95_ms: float | None = None
    own_baseline_p95_ms: float | None = None
    culprit: bool = False
    scaled_with: tuple[str, ...] = ()
    extra_nodes: int = 0
    note: str = ""
    verdict: Verdict = "unjudged"
    slows_pools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form (NaN becomes null)."""
        return {
            "service": self.service,
            "pool": self.pool,
            "status": self.status,
            "call_count": self.call_count,
            "p95_ms": finite_or_none(self.p95_ms),
            "self_p95_ms": finite_or_none(self.self_p95_ms),
            "threshold_ms": self.threshold_ms,
            "threshold_source": self.threshold_source,
            "own_p95_ms": self.own_p95_ms,
            "residual_p95_ms": self.residual_p95_ms,
            "own_baseline_p95_ms": self.own_baseline_p95_ms,
            "culprit": self.culprit,
            "verdict": self.verdict,
            "scaled_with": list(self.scaled_with),
            "slows_pools": list(self.slows_pools),
            "extra_nodes": self.extra_nodes,
            "note": self.note,
        }


@dataclass(frozen=True)
class LatencyAnalysis:
    """The result of one analysis.

    Attributes:
        adjustments: pool name -> what latency asks of it, for every pool passed in.
        services: service name -> its report, for every service seen or configured.
        baselines: the baselines updated with this window; pass them to the next call.
    """

    adjustments: Mapping[str, LatencyAdjustment]
    services: Mapping[str, ServiceReport]
    baselines: BaselineState

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form of the adjustments and the service reports."""
        return {
            "pools": {
                name: {
                    "extra_nodes": adj.extra_nodes,
                    "reason": adj.reason,
                    "not_gpu_bound": adj.not_gpu_bound,
                }
                for name, adj in self.adjustments.items()
            },
            "services": {name: report.to_dict() for name, report in self.services.items()},
        }


def service_pools(pools: Sequence[PoolConfig]) -> dict[str, str]:
    """Return service name -> pool name from the pools' ``services`` lists.

    Raises:
        ConfigError: a service is listed by more than one pool, so which pool to scale
            for it is ambiguous.
    """
    owner: dict[str, str] = {}
    for pool in pools:
        for service in pool.services:
            if service.name in owner and owner[service.name] != pool.name:
                raise ConfigError(
                    f"service {service.name!r} is listed by pools {owner[service.name]!r} and "
                    f"{pool.name!r}; list each service under the one pool it runs on"
                )
            owner[service.name] = pool.name
    return owner


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
) -> LatencyAnalysis:
    """Find the bottlenecks in the window's stats and the extra nodes per pool.

    Args:
        stats: per-service statistics of the current window.
        pools: the configured pools; their ``services`` give the pool and SLO of each.
        services: services on no GPU pool (the pools file's top-level ``services``)
            with their SLOs.
        current_nodes: pool name -> ready nodes now (missing counts as 0).
        gpu_util: pool name -> mean GPU utilisation 0-100, None or missing when unknown.
        baselines: the baselines so far (``BaselineState()`` to start).
        now: the time of the analysis (for the baselines).
        settings: the knobs; defaults when None.

    Returns:
        The adjustment of every pool, a report per service and the updated baselines.

    Raises:
        ConfigError: a service is listed by more than one pool.
    """
    cfg = settings or BottleneckSettings()
    owner = service_pools(pools)
    configured = {s.name: s for pool in pools for s in pool.services}
    configured.update({s.name: s for s in services})
    reports = {
        name: _judge(name, stats.get(name), owner.get(name), configured.get(name), baselines, cfg)
        for name in sorted(set(stats) | set(configured))
    }
    base = {pool.name: max(1, current_nodes.get(pool.name, 0)) for pool in pools}

    culprit_ratio: dict[str, float] = {}
    for name, report in reports.items():
        if report.status != "slow" or report.threshold_ms is None:
            continue
        slow_callees = [
            c for c in stats[name].callees if c in reports and reports[c].status == "slow"
        ]
        callee_excess = sum(
            reports[c].p95_ms - (reports[c].threshold_ms or 0.0) for c in slow_callees
        )
        residual = max(report.self_p95_ms, report.p95_ms - callee_excess)
        reports[name] = replace(report, residual_p95_ms=residual)
        healthy = bool(slow_callees) and _own_work_healthy(
            report, _factor(configured.get(name), cfg)
        )
        if residual > report.threshold_ms and not healthy:
            culprit_ratio[name] = residual / report.threshold_ms - 1.0

    ratios: dict[str, float] = dict(culprit_ratio)
    scaled_with: dict[str, list[str]] = {}
    for culprit, ratio in culprit_ratio.items():
        if reports[culprit].pool is None:
            continue  # nothing to buy for it, so nothing downstream to scale with it
        for downstream in _downstream(culprit, stats):
            checked = reports.get(downstream)
            if checked is None or checked.status not in ("slow", "near"):
                continue
            scaled_with.setdefault(downstream, []).append(culprit)
            ratios[downstream] = max(ratios.get(downstream, 0.0), ratio)

    idle_below = {
        pool.name: cfg.gpu_idle_below if pool.gpu_idle_below is None else pool.gpu_idle_below
        for pool in pools
    }
    for name, report in reports.items():
        ratio = ratios.get(name, 0.0)
        extra = ceil_nodes(base[report.pool] * ratio * cfg.gain) if report.pool else 0
        blamed = name in culprit_ratio
        slows = _pools_on_chain(name, stats, owner) if blamed and report.pool is None else ()
        judged = replace(
            report,
            culprit=blamed,
            scaled_with=tuple(sorted(scaled_with.get(name, ()))),
            slows_pools=slows,
            extra_nodes=extra,
        )
        util = gpu_util.get(judged.pool) if judged.pool else None
        idle = util is not None and judged.pool is not None and util < idle_below[judged.pool]
        reports[name] = replace(judged, note=_note(judged), verdict=_verdict(judged, idle))

    adjustments = {
        pool.name: _pool_adjustment(
            pool.name, base[pool.name], gpu_util.get(pool.name), reports, cfg, idle_below[pool.name]
        )
        for pool in pools
    }
    new_baselines = update_baselines(
        baselines,
        stats,
        now,
        half_life=cfg.baseline_half_life,
        min_calls=cfg.min_calls,
        freeze_above=cfg.baseline_factor,
        min_updates=cfg.baseline_min_updates,
    )
    return LatencyAnalysis(
        adjustments=MappingProxyType(adjustments),
        services=MappingProxyType(reports),
        baselines=new_baselines,
    )


def _judge(
    name: str,
    stat: ServiceStats | None,
    pool: str | None,
    config: ServiceConfig | None,
    baselines: BaselineState,
    cfg: BottleneckSettings,
) -> ServiceReport:
    """Apply rule 1: the threshold and the status of one service (and its usual own time)."""
    baseline, usual = baselines.get(name), baselines.get_exclusive(name)
    threshold: float | None = None
    source: ThresholdSource = "none"
    if config is not None and config.slo_p95_ms is not None:
        threshold, source = config.slo_p95_ms, "slo"
    elif baseline is not None and is_ready(baseline, cfg.baseline_min_updates):
        threshold, source = _factor(config, cfg) * baseline.p95_ms, "baseline"
    calls = stat.call_count if stat is not None else 0
    p95 = stat.p95_ms if stat is not None else math.nan
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
    return ServiceReport(
        service=name,
        pool=pool,
        status=status,
        call_count=calls,
        p95_ms=p95,
        self_p95_ms=stat.self_p95_ms if stat is not None else math.nan,
        threshold_ms=threshold,
        threshold_source=source,
        own_p95_ms=finite_or_none(stat.self_p95_ms) if stat is not None else None,
        own_baseline_p95_ms=(
            usual.p95_ms
            if usual is not None and is_ready(usual, cfg.baseline_min_updates)
            else None
        ),
    )


def _factor(config: ServiceConfig | None, cfg: BottleneckSettings) -> float:
    """Return k: the service's own ``baseline_factor`` if set, else the default."""
    if config is not None and config.baseline_factor is not None:
        return config.baseline_factor
    return cfg.baseline_factor


def _own_work_healthy(report: ServiceReport, factor: float) -> bool:
    """Return whether a service's exclusive p95 is within its threshold and its usual.

    Unknown (no ready exclusive baseline, or no threshold) counts as not healthy, so
    the residual alone decides, as it did before exclusive baselines existed.
    """
    usual, own, threshold = report.own_baseline_p95_ms, report.own_p95_ms, report.threshold_ms
    if usual is None or own is None or threshold is None:
        return False
    # A floor of 1 ms: a thin proxy's usual 0 ms must not make every microsecond unusual.
    return own <= threshold and own <= factor * max(usual, _MIN_USUAL_MS)


def _downstream(service: str, stats: Mapping[str, ServiceStats]) -> list[str]:
    """Return every service reachable through callee edges, breadth first, without ``service``."""
    seen = {service}
    order: list[str] = []
    queue = deque([service])
    while queue:
        current = queue.popleft()
        stat = stats.get(current)
        for callee in stat.callees if stat is not None else ():
            if callee not in seen:
                seen.add(callee)
                order.append(callee)
                queue.append(callee)
    return order


def _pools_on_chain(
    service: str, stats: Mapping[str, ServiceStats], owner: Mapping[str, str]
) -> tuple[str, ...]:
    """Return the pools of the services sharing ``service``'s call chains.

    Those are its transitive callers (their latency includes it) and its transitive
    callees (their traffic waits behind it).
    """
    seen = {service}
    queue = deque([service])
    while queue:
        stat = stats.get(queue.popleft())
        for neighbour in (*stat.callers, *stat.callees) if stat is not None else ():
            if neighbour not in seen:
                seen.add(neighbour)
                queue.append(neighbour)
    return tuple(sorted({owner[name] for name in seen if name in owner}))


def _verdict(report: ServiceReport, gpus_idle: bool) -> Verdict:
    if report.culprit:
        if report.pool is None:
            return "outside_gpu_pools"
        return "not_gpu_bound" if gpus_idle else "bottleneck"
    if report.scaled_with:
        return "scaled_with_upstream"
    if report.status == "slow":
        return "waiting_on_callee"
    return report.status


def _label(report: ServiceReport) -> str:
    kind = "SLO" if report.threshold_source == "slo" else "baseline threshold"
    return f"{report.service} p95 {report.p95_ms:.0f} ms vs {kind} {report.threshold_ms:.0f} ms"


def _note(report: ServiceReport) -> str:
    if report.status == "insufficient_data":
        return f"{report.service}: {report.call_count} calls in the window, too few to judge"
    if report.status == "unjudged":
        return f"{report.service}: no SLO and no baseline yet, not judged"
    parts = [_label(report)]
    usual = report.own_baseline_p95_ms
    as_usual = "" if usual is None else f", usual {usual:.0f} ms"
    if report.culprit:
        parts.append(
            f"slow in its own work (own p95 {report.own_p95_ms or 0.0:.0f} ms exclusive of "
            f"callees{as_usual}, {report.residual_p95_ms or 0.0:.0f} ms without slow "
            "callees' excess)"
        )
    elif report.status == "slow":
        parts.append(
            f"slow only waiting on slow callees (own p95 {report.own_p95_ms or 0.0:.0f} ms "
            f"exclusive of callees{as_usual}), not blamed"
        )
    if report.scaled_with:
        parts.append(
            f"{report.status}, downstream of {', '.join(report.scaled_with)}: scaled with it"
        )
    if report.pool is None and report.culprit:
        suffix = (
            "; it runs on no GPU pool (bottleneck outside every GPU pool): buying GPU nodes "
            "will not help, fix or scale the service itself"
        )
    elif report.pool is None and report.status in ("slow", "near"):
        suffix = "; it runs on no GPU pool, so no nodes are added for it"
    else:
        suffix = f": +{report.extra_nodes} nodes" if report.extra_nodes else ""
    return ", ".join(parts) + suffix


def _pool_adjustment(
    pool: str,
    base: int,
    util: float | None,
    reports: Mapping[str, ServiceReport],
    cfg: BottleneckSettings,
    idle_below: float,
) -> LatencyAdjustment:
    """Apply rules 5 and 6 to one pool, and name bottlenecks outside every GPU pool."""
    members = [r for r in reports.values() if r.pool == pool]
    relevant = [r for r in members if r.status == "slow" or r.extra_nodes > 0]
    outside = [r for r in reports.values() if pool in r.slows_pools]
    if not relevant and not outside:
        return LatencyAdjustment()
    reason = "; ".join(r.note for r in (*relevant, *outside))
    wanted = max((r.extra_nodes for r in members), default=0)
    if util is not None and util < idle_below:
        blamed = any(r.culprit for r in members)
        if blamed:
            reason += (
                f"; GPU utilisation {util:.0f}% < {idle_below:.0f}%: not GPU-bound, no nodes "
                "added for latency"
            )
        elif wanted:
            reason += (
                f"; GPU utilisation {util:.0f}% < {idle_below:.0f}%: the GPUs have headroom, "
                "no nodes added for latency"
            )
        return LatencyAdjustment(extra_nodes=0, reason=reason, not_gpu_bound=blamed)
    cap = max(1, ceil_nodes(cfg.max_fraction * base))
    if wanted > cap:
        reason += f"; capped at {cap} nodes ({cfg.max_fraction:g} x {base} current)"
    asking = tuple(sorted(r.service for r in members if r.extra_nodes > 0))
    return LatencyAdjustment(extra_nodes=min(wanted, cap), reason=reason, services=asking)
