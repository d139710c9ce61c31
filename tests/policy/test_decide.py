"""The composed decision: one hand-checked case per explanation term.

Its wire form is tested with the schema (``tests/api/test_wire_recommendation.py``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.config.pools import PoolConfig
from policy.config import ScaleDownConfig
from policy.decide import decide
from policy.recommendation import Recommendation
from policy.state import DesiredSpan, StabilisationState
from policy.types import (
    NO_LATENCY,
    DemandForecast,
    ForecastHealth,
    LatencyAdjustment,
    LiveSignals,
    Sample,
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
POOL = PoolConfig(
    name="a100",
    node_group_id="a100-asg",
    gpus_per_node=8,
    min_nodes=1,
    max_nodes=20,
    lead_time=10 * MIN,
    target_utilisation=0.8,
    quantile=0.9,
    scale_down=ScaleDownConfig(window=10 * MIN, max_step_nodes=1),
)
HEALTH = ForecastHealth(0.8, 1.5, 5 * MIN, 30 * MIN, error_at=NOW - 5 * MIN)
EMPTY = StabilisationState()


def forecast(values: tuple[float, ...] = (20.0, 37.0, 100.0)) -> DemandForecast:
    # Points at +5, +15, +25 min; the window [now, now + 20 min] holds the first two.
    return DemandForecast(
        timestamps=tuple(NOW + (5 + 10 * i) * MIN for i in range(len(values))),
        quantiles={0.5: tuple(v / 2 for v in values), 0.9: values},
        level=0.9,
        model_version="7",
        generated_at=NOW - 2 * MIN,
        step=10 * MIN,
    )


def live(demand: float = 10.0, nodes: float = 4.0) -> LiveSignals:
    return LiveSignals(
        Sample(demand, NOW - 30 * timedelta(seconds=1)),
        Sample(nodes, NOW - 20 * timedelta(seconds=1)),
        Sample(35.0, NOW - 10 * timedelta(seconds=1)),
    )


def run(
    pool: PoolConfig = POOL,
    f: DemandForecast | None = None,
    signals: LiveSignals | None = None,
    health: ForecastHealth = HEALTH,
    latency: LatencyAdjustment = NO_LATENCY,
    state: StabilisationState = EMPTY,
) -> Recommendation:
    return decide(pool, f, signals or live(), health, latency, state, NOW)


def test_forecast_sets_the_number() -> None:
    rec = run(f=forecast())
    # Peak q0.9 in the window is 37 GPUs; 37 / (8 * 0.8) = 5.78 -> 6 nodes.
    assert (rec.current_nodes, rec.desired_nodes, rec.delta, rec.action) == (4, 6, 2, "scale_up")
    assert rec.explanation.term == "forecast"
    assert rec.mode == "predictive"
    # Live demand of 10 GPUs occupies 2 nodes; 4 more are headroom, one pod each.
    assert (rec.headroom_nodes, rec.headroom_pods, rec.gpus_per_placeholder_pod) == (4, 4, 8)
    assert dict(rec.forecast_quantiles) == {0.5: 18.5, 0.9: 37.0}
    assert rec.model_version == "7"
    assert rec.valid_until == NOW + 10 * MIN
    assert rec.explanation.forecast_peak_at == NOW + 15 * MIN
    assert "peaks at 37 GPUs" in rec.explanation.summary
    assert rec.explanation.summary.endswith("6 nodes, set by forecast")


def test_floor_sets_the_number_when_live_demand_beats_the_forecast() -> None:
    rec = run(f=forecast(), signals=live(demand=60.0))
    assert rec.desired_nodes == 8  # 60 GPUs occupy ceil(7.5) nodes > 6 forecast
    assert rec.explanation.term == "floor"
    assert rec.headroom_nodes == 0


def test_latency_adds_nodes_and_sets_the_number() -> None:
    rec = run(f=forecast(), latency=LatencyAdjustment(2, "rerank p95 2.1 s > SLO 1 s"))
    assert rec.desired_nodes == 8
    assert rec.explanation.term == "latency"
    assert rec.explanation.latency_applied == 2
    assert "rerank p95" in rec.explanation.summary


def test_not_gpu_bound_pool_gets_no_latency_nodes_and_says_so() -> None:
    rec = run(f=forecast(), latency=LatencyAdjustment(2, "GPUs 12 % busy", not_gpu_bound=True))
    assert rec.desired_nodes == 6
    assert rec.explanation.term == "forecast"
    assert rec.explanation.latency_applied == 0
    assert "not GPU-bound" in rec.explanation.summary
    assert rec.explanation.latency.not_gpu_bound is True


def test_a_bottleneck_outside_every_gpu_pool_is_named_in_the_summary() -> None:
    latency = LatencyAdjustment(0, "tokenizer p95 479 ms ...", outside=("tokenizer",))
    rec = run(f=forecast(), latency=latency)
    assert rec.desired_nodes == 6
    assert (
        "tokenizer (on no GPU pool) is slow in its own work; buying GPUs will not help"
        in rec.explanation.summary
    )


@pytest.mark.parametrize(
    ("f", "health", "signals", "reason"),
    [
        (None, HEALTH, live(nodes=2), "no_forecast"),
        (forecast(), ForecastHealth(2.4, 1.5, 5 * MIN, 30 * MIN), live(nodes=2), "error"),
        (forecast(), ForecastHealth(0.8, 1.5, 5 * MIN, MIN), live(nodes=2), "stale_forecast"),
        (
            forecast(),
            ForecastHealth(0.8, 1.5, 10 * timedelta(seconds=1), 30 * MIN),
            live(nodes=2),
            "stale_live",
        ),
    ],
)
def test_unhealthy_forecast_falls_back_to_the_floor(
    f: DemandForecast | None, health: ForecastHealth, signals: LiveSignals, reason: str
) -> None:
    rec = run(f=f, health=health, signals=signals, latency=LatencyAdjustment(3, "slow"))
    assert rec.mode == "reactive"
    assert rec.explanation.term == "reactive"
    assert rec.desired_nodes == 2  # 10 GPUs -> 2 nodes; latency is not added in reactive mode
    assert reason in rec.explanation.health_reasons
    assert rec.explanation.summary.startswith("reactive mode: ")
    assert "not added in reactive mode" in rec.explanation.summary
    assert rec.explanation.stages.forecast_nodes is None


def test_no_forecast_uses_the_default_validity_and_has_no_model() -> None:
    rec = run(f=None)
    assert rec.model_version is None
    assert rec.valid_until == NOW + timedelta(minutes=1)
    assert rec.forecast_quantiles == {}
    given = decide(POOL, None, live(), HEALTH, NO_LATENCY, EMPTY, NOW, validity=5 * MIN)
    assert given.valid_until == NOW + 5 * MIN


def test_bounds_cap_the_forecast_and_raise_the_floor() -> None:
    capped = run(pool=POOL.model_copy(update={"max_nodes": 5}), f=forecast())
    assert (capped.desired_nodes, capped.explanation.term) == (5, "bounds")
    raised = run(pool=POOL.model_copy(update={"min_nodes": 3}), f=None, signals=live(nodes=2))
    assert (raised.desired_nodes, raised.explanation.term) == (3, "bounds")
    assert "bounds [3, 20]" in raised.explanation.summary


def test_final_clamp_beats_a_held_count_above_a_lowered_max() -> None:
    rec = run(pool=POOL.model_copy(update={"max_nodes": 5}), f=forecast(), signals=live(nodes=9))
    # Stabilisation would hold 9 (history too young); the bounds still win.
    assert (rec.desired_nodes, rec.explanation.term) == (5, "bounds")
    assert rec.explanation.stages.stabilised == 9


def test_stabilisation_holds_then_steps_down() -> None:
    held = StabilisationState(
        spans=(DesiredSpan(9, NOW - 30 * MIN, NOW - 3 * MIN),),
        tracked_since=NOW - 60 * MIN,
        last_decision_at=NOW - 3 * MIN,
    )
    rec = run(f=forecast(), signals=live(nodes=9), state=held)
    assert (rec.desired_nodes, rec.action, rec.explanation.term) == (9, "hold", "stabilisation")
    assert rec.explanation.stabilisation_limit == "window"
    assert "highest desired value of the last 10 min" in rec.explanation.summary
    # 14 minutes later 9 has left the window: down by one step, to 8.
    later = decide(POOL, forecast(), live(nodes=9), HEALTH, NO_LATENCY, rec.state, NOW + 14 * MIN)
    assert (later.desired_nodes, later.action) == (8, "scale_down")
    assert later.explanation.stabilisation_limit == "step"


def test_a_large_pool_whose_work_collapsed_steps_down_by_its_share_and_says_so() -> None:
    big = POOL.model_copy(update={"max_nodes": 100})
    calm = StabilisationState(
        spans=(DesiredSpan(2, NOW - 30 * MIN, NOW - 1 * MIN),),
        tracked_since=NOW - 60 * MIN,
        last_decision_at=NOW - 1 * MIN,
    )
    rec = run(big, forecast((5.0, 5.0, 5.0)), live(demand=5.0, nodes=80), state=calm)
    assert (rec.desired_nodes, rec.action) == (72, "scale_down")
    assert rec.explanation.stabilisation_limit == "step"
    assert "limited to 8 node(s) below the 80 ready" in rec.explanation.summary
    assert "at most 1 or 10 % of them per decision" in rec.explanation.summary


def test_explanation_lists_every_input_with_value_and_age() -> None:
    rec = run(f=forecast())
    inputs = rec.explanation.inputs
    assert inputs["forecast_peak_gpus"].value == 37.0
    assert inputs["forecast_peak_gpus"].age_seconds == 120.0
    assert (inputs["live_demand_gpus"].value, inputs["live_demand_gpus"].age_seconds) == (10, 30)
    assert (inputs["ready_nodes"].value, inputs["ready_nodes"].age_seconds) == (4.0, 20.0)
    assert (inputs["gpu_util"].value, inputs["gpu_util"].age_seconds) == (35.0, 10.0)
    assert (inputs["forecast_error"].value, inputs["forecast_error"].age_seconds) == (0.8, 300.0)
    assert rec.data_freshness_seconds == 30.0


def test_naive_now_is_rejected() -> None:
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        decide(POOL, forecast(), live(), HEALTH, NO_LATENCY, EMPTY, datetime(2024, 5, 1, 12))


def _at(at: datetime, latency: LatencyAdjustment, state: StabilisationState) -> Recommendation:
    """Decide at ``at`` with the same 37-GPU forecast peak and 8 ready nodes."""
    shift = at - NOW
    f = forecast()
    moved = DemandForecast(
        timestamps=tuple(ts + shift for ts in f.timestamps),
        quantiles=f.quantiles,
        level=f.level,
        model_version=f.model_version,
        generated_at=f.generated_at + shift,
        step=f.step,
    )
    signals = LiveSignals(
        Sample(10.0, at - 30 * timedelta(seconds=1)), Sample(8.0, at - 20 * timedelta(seconds=1))
    )
    health = ForecastHealth(0.8, 1.5, 5 * MIN, 30 * MIN, error_at=at - 5 * MIN)
    rec = decide(POOL, moved, signals, health, latency, state, at)
    # The state goes through the store between decisions, as in the service.
    return replace(rec, state=StabilisationState.from_dict(rec.state.to_dict()))


def test_held_latency_nodes_keep_naming_their_cause_until_the_window_lets_go() -> None:
    slow = LatencyAdjustment(2, "llm p95 800 ms vs SLO 400 ms: +2 nodes", services=("llm",))
    # The forecast needs 6 nodes; latency of llm adds 2 for four minutes.
    first = _at(NOW, slow, EMPTY)
    second = _at(NOW + 2 * MIN, slow, first.state)
    assert (first.desired_nodes, second.desired_nodes) == (8, 8)
    assert second.explanation.term == "latency"
    assert second.explanation.held_latency is None

    # llm recovers at +4 min: the forecast alone asks for 6, the window holds the 8.
    held = []
    state = second.state
    for minutes in (4, 6, 10, 13):
        rec = _at(NOW + minutes * MIN, NO_LATENCY, state)
        held.append(rec)
        state = rec.state
    for rec in held:
        assert (rec.desired_nodes, rec.explanation.term) == (8, "stabilisation")
        assert rec.explanation.stabilisation_limit == "window"
        cause = rec.explanation.held_latency
        assert cause is not None
        assert (cause.nodes, cause.services) == (2, ("llm",))
        # Why, not only who, survives the store between decisions (issue #37).
        assert cause.reason == "llm p95 800 ms vs SLO 400 ms: +2 nodes"
        assert cause.until == NOW + 4 * MIN  # the first decision without the latency
        assert cause.released_at == NOW + 14 * MIN
        assert (
            "2 of them were added for call-chain latency of llm, which ended by "
            "2024-05-01T12:04:00Z; stabilisation holds them until 2024-05-01T12:14:00Z"
        ) in rec.explanation.summary

    # At +14 min the 8 has left the window: one step down, and latency is not named.
    after = _at(NOW + 14 * MIN, NO_LATENCY, state)
    assert (after.desired_nodes, after.explanation.stabilisation_limit) == (7, "step")
    assert after.explanation.held_latency is None
    assert "latency of llm" not in after.explanation.summary


def test_a_held_value_the_forecast_also_reached_is_not_blamed_on_latency() -> None:
    slow = LatencyAdjustment(2, "llm slow", services=("llm",))
    first = _at(NOW, slow, EMPTY)
    # Latency ends, but the floor alone now asks for the same 8 nodes (60 GPUs live).
    signals = LiveSignals(
        Sample(60.0, NOW + 2 * MIN - timedelta(seconds=30)), Sample(8.0, NOW + 2 * MIN)
    )
    health = ForecastHealth(0.8, 1.5, 5 * MIN, 30 * MIN, error_at=NOW)
    second = decide(POOL, forecast(), signals, health, NO_LATENCY, first.state, NOW + 2 * MIN)
    assert second.desired_nodes == 8
    third = _at(NOW + 4 * MIN, NO_LATENCY, second.state)
    assert (third.desired_nodes, third.explanation.stabilisation_limit) == (8, "window")
    assert third.explanation.held_latency is None
    assert "latency" not in third.explanation.summary.split("scale-down held")[1]


def test_latency_still_asking_for_less_is_not_called_ended() -> None:
    first = _at(NOW, LatencyAdjustment(3, "llm slow", services=("llm",)), EMPTY)
    second = _at(NOW + 2 * MIN, LatencyAdjustment(1, "llm slow", services=("llm",)), first.state)
    assert (first.desired_nodes, second.desired_nodes) == (9, 9)
    assert second.explanation.held_latency is not None
    assert second.explanation.held_latency.nodes == 3
    assert "until 2024-05-01T12:02:00Z (it now asks for 1)" in second.explanation.summary


def test_calibration_moves_only_the_provisioned_quantile_and_never_below_zero() -> None:
    from policy.types import Calibration

    made = forecast().calibrated(Calibration(-30.0, 0.97, 50))
    assert made.quantiles[0.9] == (0.0, 7.0, 70.0)
    assert made.quantiles[0.5] == forecast().quantiles[0.5]
    assert forecast().calibrated(None) == forecast()
    with pytest.raises(ValueError, match="already calibrated"):
        made.calibrated(Calibration(1.0, 0.9, 5))
    rec = run(f=made)
    assert "-30 GPUs of live calibration" in rec.explanation.summary
    assert rec.explanation.inputs["forecast_peak_gpus"].value == 7.0  # the window's peak
