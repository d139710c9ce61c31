"""The scale decision for one pool: the chain of pure steps, composed.

forecast (the stored peak quantile over the lead time, else the per-horizon maximum)
-> raw need -> + latency -> reactive floor -> health gate -> bounds ->
stabilisation -> final clamp -> recommendation with its explanation. Every step is a
public function of its own module; this one only wires them and records what each
produced. No clock is read: ``now`` is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from policy.bounds import clamp
from policy.config import PoolRule
from policy.explain import (
    Explanation,
    HeldLatency,
    InputReading,
    Stages,
    summarise,
    term_that_set,
)
from policy.floor import apply_floor, reactive_floor
from policy.health import HealthVerdict, assess_health
from policy.need import PeakDemand, add_latency, nodes_for_gpus, peak_demand
from policy.recommendation import Recommendation, action_for, headroom
from policy.stabilise import Stabilised, stabilise
from policy.state import LatencyCause, StabilisationState
from policy.types import (
    DEFAULT_VALIDITY,
    DemandForecast,
    ForecastHealth,
    LatencyAdjustment,
    LiveSignals,
    require_aware,
)


def _settings(pool: PoolRule) -> dict[str, float]:
    rule = {}
    if pool.safety_margin:  # named only when set: a pool without one reads as before
        rule["safety_margin"] = pool.safety_margin
    if pool.waiting_cost_ratio is not None and pool.quantile_rule == "newsvendor":
        rule["waiting_cost_ratio"] = pool.waiting_cost_ratio
    return rule | {
        "gpus_per_node": pool.gpus_per_node,
        "min_nodes": pool.min_nodes,
        "max_nodes": pool.max_nodes,
        "target_utilisation": pool.target_utilisation,
        "quantile": pool.quantile,
        "lead_time_seconds": pool.lead_time.total_seconds(),
        "scale_down_window_seconds": pool.scale_down.window.total_seconds(),
        "max_step_nodes": pool.scale_down.max_step_nodes,
        "max_step_percent": pool.scale_down.max_step_percent,
    }


@dataclass(frozen=True)
class _Need:
    """The chain up to the bounds: what each step produced (see :class:`Stages`)."""

    verdict: HealthVerdict
    peak: PeakDemand | None
    floor: int
    forecast_nodes: int | None
    latency_nodes: int | None
    applied: int
    need: int
    bounded: int
    cause: LatencyCause | None


def _need(
    pool: PoolRule,
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    latency: LatencyAdjustment,
    now: datetime,
) -> _Need:
    """Forecast -> raw need -> + latency -> reactive floor -> health gate -> bounds."""
    verdict = assess_health(forecast, live, health, pool.lead_time, now)
    peak = (
        None
        if forecast is None
        else peak_demand(
            forecast,
            now,
            pool.lead_time,
            demand=live.demand_gpus,
            safety_margin=pool.safety_margin,
        )
    )
    floor = reactive_floor(live.demand_gpus.value, pool.gpus_per_node)
    forecast_nodes: int | None = None
    latency_nodes: int | None = None
    applied = 0
    if verdict.mode == "predictive" and peak is not None:
        # A peak quantile carries its own margin: no target utilisation on top (need.py).
        utilisation = pool.target_utilisation if peak.utilisation_applies else 1.0
        forecast_nodes = nodes_for_gpus(peak.value, pool.gpus_per_node, utilisation)
        latency_nodes, applied = add_latency(forecast_nodes, latency)
        need = apply_floor(latency_nodes, floor)
    else:
        # Reactive mode is cluster-autoscaler's semantics: capacity for the work there is.
        need = floor
    bounded = clamp(need, pool.min_nodes, pool.max_nodes)
    cause: LatencyCause | None = None
    if forecast_nodes is not None and applied:
        # Only the nodes the floor and the bounds left to latency are latency's.
        without = clamp(apply_floor(forecast_nodes, floor), pool.min_nodes, pool.max_nodes)
        if bounded > without:
            cause = LatencyCause(bounded - without, latency.services, latency.reason)
    return _Need(verdict, peak, floor, forecast_nodes, latency_nodes, applied, need, bounded, cause)


def _inputs(
    chain: _Need,
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    last_scale_up: datetime | None,
    now: datetime,
) -> dict[str, InputReading]:
    """The readings the decision used, each with its age at ``now``."""
    peak = chain.peak
    generated = None if forecast is None else forecast.generated_at
    return {
        # Dated by the forecast job's run: its age is what the staleness check bounds.
        "forecast_peak_gpus": InputReading.of(None if peak is None else peak.value, generated, now),
        "live_demand_gpus": InputReading.of_sample(live.demand_gpus, now),
        "ready_nodes": InputReading.of_sample(live.ready_nodes, now),
        "gpu_util": InputReading.of_sample(live.gpu_util, now),
        "forecast_error": InputReading.of(health.measured_error, health.error_at, now),
        "last_scale_up": InputReading.of(None, last_scale_up, now),
    }


def _explain(
    pool: PoolRule,
    chain: _Need,
    stages: Stages,
    stable: Stabilised,
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    latency: LatencyAdjustment,
    now: datetime,
) -> Explanation:
    """The explanation: the term that set the answer, its summary and every stage."""
    peak, verdict = chain.peak, chain.verdict
    term = term_that_set(stages)
    held_latency = HeldLatency.of(stable.held, pool.scale_down.window)
    settings = _settings(pool)
    inputs = _inputs(chain, forecast, live, health, stable.state.last_scale_up_at, now)
    return Explanation(
        term=term,
        mode=verdict.mode,
        summary=summarise(
            stages,
            term,
            health_detail=verdict.detail,
            peak_gpus=None if peak is None else peak.value,
            level=None if peak is None else peak.level,
            demand_gpus=live.demand_gpus.value,
            current_nodes=live.current_nodes,
            latency=latency,
            latency_applied=chain.applied,
            limit=stable.limited_by,
            held_latency=held_latency,
            settings=settings,
            calibration=None if forecast is None else forecast.calibration,
            peak=peak,
        ),
        health_reasons=verdict.reasons,
        health_detail=verdict.detail,
        stages=stages,
        inputs=MappingProxyType(inputs),
        forecast_peak_at=None if peak is None else peak.at,
        latency=latency,
        latency_applied=chain.applied,
        stabilisation_limit=stable.limited_by,
        held_latency=held_latency,
        settings=MappingProxyType(settings),
    )


def decide(
    pool: PoolRule,
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    latency: LatencyAdjustment,
    state: StabilisationState,
    now: datetime,
    *,
    validity: timedelta | None = None,
) -> Recommendation:
    """Decide how many nodes a pool should have at ``now``, and explain why.

    Args:
        pool: the pool's configuration (sizes, bounds, lead time, quantile, scale-down).
        forecast: the demand forecast at the level to provision for (normally the
            pool's ``quantile``), None when there is no model or forecast.
        health: the recent live forecast error and the staleness and error bounds.
        latency: the call-chain adjustment (use ``NO_LATENCY`` when there is none).
        state: what stabilisation kept from earlier decisions (empty at first).
        now: the decision time; must be timezone-aware.
        validity: how long the answer holds; default the forecast step, or
            ``DEFAULT_VALIDITY`` without a forecast.

    Raises:
        ValueError: ``now`` is naive.
    """
    require_aware(now, "now")
    chain = _need(pool, forecast, live, health, latency, now)
    current = live.current_nodes
    basis = None if forecast is None else forecast.generated_at
    stable = stabilise(
        chain.bounded, current, state, pool.scale_down, now, latency=chain.cause, basis=basis
    )
    final = clamp(stable.nodes, pool.min_nodes, pool.max_nodes)
    stages = Stages(
        mode=chain.verdict.mode,
        forecast_nodes=chain.forecast_nodes,
        latency_nodes=chain.latency_nodes,
        floor_nodes=chain.floor,
        need=chain.need,
        bounded=chain.bounded,
        window_max=stable.window_max,
        stabilised=stable.nodes,
        final=final,
    )
    explanation = _explain(pool, chain, stages, stable, forecast, live, health, latency, now)
    headroom_nodes, headroom_pods = headroom(final, chain.floor, pool.gpus_per_node)
    if validity is None:
        validity = DEFAULT_VALIDITY if forecast is None else forecast.step
    peak = chain.peak
    return Recommendation(
        pool=pool.name,
        current_nodes=current,
        desired_nodes=final,
        delta=final - current,
        action=action_for(current, final),
        headroom_nodes=headroom_nodes,
        headroom_pods=headroom_pods,
        gpus_per_placeholder_pod=pool.gpus_per_node,
        quantile=pool.quantile if forecast is None else forecast.level,
        forecast_quantiles=MappingProxyType({} if peak is None else dict(peak.by_level)),
        mode=chain.verdict.mode,
        explanation=explanation,
        model_version=None if forecast is None else forecast.model_version,
        data_freshness_seconds=(now - live.oldest()).total_seconds(),
        generated_at=now,
        valid_until=now + validity,
        state=stable.state,
    )
