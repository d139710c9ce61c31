"""Each step of the scale policy on its own, with hand-checked numbers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from forecaster.models.naive import Persistence
from policy.bounds import clamp
from policy.config import ScaleDownConfig
from policy.explain import Stages, term_that_set
from policy.floor import apply_floor, reactive_floor
from policy.health import assess_health
from policy.need import add_latency, ceil_nodes, nodes_for_gpus, peak_demand
from policy.recommendation import action_for, headroom
from policy.stabilise import record, stabilise
from policy.state import DesiredSpan, LatencyCause, StabilisationState
from policy.types import DemandForecast, ForecastHealth, LatencyAdjustment, LiveSignals, Sample

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
LEAD = 10 * MIN
STEP = 10 * MIN


def forecast(
    values: list[float],
    offsets_min: list[int] | None = None,
    generated_ago: timedelta = MIN,
    extra: dict[float, list[float]] | None = None,
) -> DemandForecast:
    offsets = offsets_min if offsets_min is not None else [5 + 10 * i for i in range(len(values))]
    quantiles = {0.9: values, **(extra or {})}
    return DemandForecast(
        timestamps=tuple(NOW + k * MIN for k in offsets),
        quantiles={k: tuple(v) for k, v in quantiles.items()},
        level=0.9,
        model_version="7",
        generated_at=NOW - generated_ago,
        step=STEP,
    )


def live(
    demand: float = 10.0, nodes: float = 4.0, age: timedelta = 30 * timedelta(seconds=1)
) -> LiveSignals:
    return LiveSignals(Sample(demand, NOW - age), Sample(nodes, NOW - age), Sample(55.0, NOW))


HEALTH = ForecastHealth(
    recent_error=0.8, error_bound=1.5, max_live_age=5 * MIN, max_forecast_age=30 * MIN
)


# -- need ---------------------------------------------------------------------


def test_peak_is_the_largest_value_inside_now_to_lead_plus_step() -> None:
    # Points at +5, +15, +25 min; the window is [now, now + 20 min], so 100 is outside.
    f = forecast([20.0, 37.0, 100.0], extra={0.5: [10.0, 12.0, 90.0]})
    peak = peak_demand(f, NOW, LEAD)
    assert peak is not None
    assert peak.value == 37.0
    assert peak.at == NOW + 15 * MIN
    assert peak.points == 2
    assert dict(peak.by_level) == {0.5: 12.0, 0.9: 37.0}


def test_peak_ignores_past_points_and_clips_negative_values() -> None:
    f = forecast([500.0, -3.0, -1.0], offsets_min=[-5, 5, 15])
    peak = peak_demand(f, NOW, LEAD)
    assert peak is not None
    assert peak.value == 0.0
    assert peak_demand(forecast([5.0], offsets_min=[45]), NOW, LEAD) is None


def test_nodes_for_gpus_divides_by_gpus_per_node_times_target() -> None:
    assert nodes_for_gpus(37.0, 8, 0.8) == 6  # 37 / 6.4 = 5.78
    assert nodes_for_gpus(12.8, 8, 0.8) == 2  # exactly two nodes' worth, not three
    assert nodes_for_gpus(12.81, 8, 0.8) == 3
    assert nodes_for_gpus(0.0, 8, 0.8) == 0
    with pytest.raises(ValueError, match="target_utilisation"):
        nodes_for_gpus(1.0, 8, 0.0)


def test_ceil_nodes_forgives_float_noise_only() -> None:
    assert ceil_nodes(2.0000000000000004) == 2
    assert ceil_nodes(2.001) == 3
    assert ceil_nodes(-4.0) == 0


def test_latency_adds_nodes_unless_the_pool_is_not_gpu_bound() -> None:
    assert add_latency(6, LatencyAdjustment(2, "rerank p95 1.4x SLO")) == (8, 2)
    assert add_latency(6, LatencyAdjustment(2, "idle GPUs", not_gpu_bound=True)) == (6, 0)
    assert add_latency(6, LatencyAdjustment()) == (6, 0)
    with pytest.raises(ValueError, match="extra_nodes"):
        LatencyAdjustment(-1)


# -- floor and bounds ---------------------------------------------------------


def test_floor_is_capacity_for_current_demand_without_utilisation_target() -> None:
    assert reactive_floor(60.0, 8) == 8  # 7.5 nodes of GPUs -> 8 nodes
    assert reactive_floor(64.0, 8) == 8  # full nodes are fine: nothing waits
    assert reactive_floor(0.0, 8) == 0
    assert apply_floor(6, 8) == 8
    assert apply_floor(9, 8) == 9


def test_clamp_keeps_nodes_within_bounds() -> None:
    assert clamp(25, 1, 20) == 20
    assert clamp(0, 3, 20) == 3
    assert clamp(7, 3, 20) == 7
    with pytest.raises(ValueError, match="below min_nodes"):
        clamp(5, 4, 3)


# -- health -------------------------------------------------------------------


def test_healthy_forecast_is_predictive() -> None:
    verdict = assess_health(forecast([20.0, 37.0]), live(), HEALTH, LEAD, NOW)
    assert verdict.mode == "predictive"
    assert verdict.reasons == ()


@pytest.mark.parametrize(
    ("f", "signals", "health", "reason", "words"),
    [
        (None, live(), HEALTH, "no_forecast", "no forecast"),
        (
            forecast([20.0, 37.0], generated_ago=2 * 60 * MIN),
            live(),
            HEALTH,
            "stale_forecast",
            "7200 s old",
        ),
        (forecast([20.0], offsets_min=[5]), live(), HEALTH, "forecast_short", "short of"),
        (forecast([20.0, 37.0]), live(age=10 * MIN), HEALTH, "stale_live", "600 s old"),
        (
            forecast([20.0, 37.0]),
            live(),
            ForecastHealth(2.0, 1.5, 5 * MIN, 30 * MIN),
            "error",
            "mase is 2",
        ),
    ],
)
def test_each_health_failure_turns_reactive_and_says_why(
    f: DemandForecast | None,
    signals: LiveSignals,
    health: ForecastHealth,
    reason: str,
    words: str,
) -> None:
    verdict = assess_health(f, signals, health, LEAD, NOW)
    assert verdict.mode == "reactive"
    assert verdict.reasons == (reason,)
    assert words in verdict.detail


def test_several_health_failures_are_all_listed() -> None:
    stale = forecast([20.0], offsets_min=[5], generated_ago=60 * MIN)
    bad = ForecastHealth(3.0, 1.5, 5 * MIN, 30 * MIN)
    verdict = assess_health(stale, live(age=6 * MIN), bad, LEAD, NOW)
    assert verdict.reasons == ("stale_forecast", "forecast_short", "stale_live", "error")


def test_unmeasured_error_counts_as_healthy() -> None:
    for error in (None, float("nan")):
        health = ForecastHealth(error, 1.5, 5 * MIN, 30 * MIN)
        assert assess_health(forecast([1.0, 2.0]), live(), health, LEAD, NOW).mode == "predictive"


def test_gpu_util_age_does_not_gate_the_forecast() -> None:
    signals = LiveSignals(Sample(1.0, NOW), Sample(1.0, NOW), Sample(50.0, NOW - 60 * MIN))
    assert assess_health(forecast([1.0, 2.0]), signals, HEALTH, LEAD, NOW).mode == "predictive"


# -- stabilisation ------------------------------------------------------------

CALM = ScaleDownConfig(window=10 * MIN, max_step_nodes=1)


def warmed(*spans: tuple[int, int, int]) -> StabilisationState:
    """A state tracked for an hour; spans are (nodes, start min ago, end min ago)."""
    return StabilisationState(
        spans=tuple(DesiredSpan(n, NOW - a * MIN, NOW - b * MIN) for n, a, b in spans),
        tracked_since=NOW - 60 * MIN,
        last_decision_at=NOW - min(b for _, _, b in spans) * MIN,
    )


def test_scale_up_is_immediate_even_without_history() -> None:
    result = stabilise(9, 4, StabilisationState(), CALM, NOW)
    assert result.nodes == 9
    assert result.limited_by is None
    assert result.state.last_scale_up_at == NOW
    assert result.state.tracked_since == NOW


def test_scale_down_waits_for_a_whole_window_of_history() -> None:
    result = stabilise(3, 9, StabilisationState(), CALM, NOW)
    assert (result.nodes, result.limited_by) == (9, "warming_up")


def test_scale_down_only_to_the_highest_value_in_the_window() -> None:
    # 9 was desired until 4 minutes ago: still inside the 10-minute window.
    state = warmed((9, 30, 4), (5, 4, 1))
    result = stabilise(3, 9, state, CALM, NOW)
    assert (result.nodes, result.window_max, result.limited_by) == (9, 9, "window")


def test_scale_down_by_at_most_the_step_below_ready_nodes() -> None:
    # 9 stopped 12 minutes ago (outside the window); 5 has held since.
    state = warmed((9, 30, 12), (5, 12, 1))
    result = stabilise(3, 9, state, CALM, NOW)
    assert (result.nodes, result.window_max, result.limited_by) == (8, 5, "step")
    big_step = ScaleDownConfig(window=10 * MIN, max_step_nodes=10)
    result = stabilise(3, 9, state, big_step, NOW)
    assert (result.nodes, result.limited_by) == (5, "window")


def test_a_large_pool_steps_down_by_a_share_of_its_ready_nodes() -> None:
    # 80 ready nodes whose work collapsed to 3: 10 % of them go per decision, not 1.
    state = warmed((3, 30, 1))
    result = stabilise(3, 80, state, CALM, NOW)
    assert (result.nodes, result.limited_by) == (72, "step")
    # Rounded down: 19 ready nodes is one node at a time, as on a small pool.
    assert stabilise(3, 19, state, CALM, NOW).nodes == 18
    assert stabilise(3, 20, state, CALM, NOW).nodes == 18
    # 0 % is the node count alone.
    nodes_only = ScaleDownConfig(window=10 * MIN, max_step_nodes=1, max_step_percent=0)
    assert stabilise(3, 80, state, nodes_only, NOW).nodes == 79
    # Whichever allows more wins.
    many = ScaleDownConfig(window=10 * MIN, max_step_nodes=12, max_step_percent=10)
    assert stabilise(3, 80, state, many, NOW).nodes == 68


def test_repeated_decisions_do_not_cascade_the_step() -> None:
    state = warmed((5, 30, 1))
    first = stabilise(3, 9, state, CALM, NOW)
    again = stabilise(3, 9, first.state, CALM, NOW + timedelta(seconds=1))
    assert first.nodes == again.nodes == 8  # nodes still 9 ready: same answer


def test_record_extends_the_last_value_until_it_is_replaced() -> None:
    state = record(StabilisationState(), 9, NOW - 30 * MIN, CALM.window)
    # No decision for 25 minutes: 9 was in force all that time, up to now.
    state = record(state, 4, NOW - 5 * MIN, CALM.window)
    assert [(s.nodes, s.end) for s in state.spans] == [(9, NOW - 5 * MIN), (4, NOW - 5 * MIN)]
    state = record(state, 4, NOW, CALM.window)
    assert [(s.nodes, s.end) for s in state.spans] == [(9, NOW - 5 * MIN), (4, NOW)]
    later = record(state, 4, NOW + 6 * MIN, CALM.window)
    assert [s.nodes for s in later.spans] == [4]  # 9 ended 11 minutes before


def test_record_drops_values_a_later_larger_value_outlives() -> None:
    state = StabilisationState()
    for minute, nodes in enumerate([3, 7, 5, 6, 2]):
        state = record(state, nodes, NOW + minute * MIN, CALM.window)
    assert [s.nodes for s in state.spans] == [7, 6, 2]


def test_state_round_trips_through_its_dict_form() -> None:
    state = stabilise(9, 4, warmed((12, 30, 2), (5, 2, 1)), CALM, NOW).state
    data = state.to_dict()
    assert data["last_scale_up_at"] == "2024-05-01T12:00:00Z"
    assert StabilisationState.from_dict(data) == state
    with pytest.raises(DataValidationError, match="malformed"):
        StabilisationState.from_dict({"spans": [{"nodes": 1}]})


def test_a_latency_cause_round_trips_and_older_states_have_none() -> None:
    cause = LatencyCause(2, ("llm", "ranker"))
    state = record(StabilisationState(), 8, NOW, CALM.window, cause)
    data = state.to_dict()
    assert data["spans"] == [
        {
            "nodes": 8,
            "start": "2024-05-01T12:00:00Z",
            "end": "2024-05-01T12:00:00Z",
            "latency": {"nodes": 2, "services": ["llm", "ranker"]},
        }
    ]
    assert StabilisationState.from_dict(data) == state
    # A state stored before causes were recorded has spans without "latency".
    old = {"spans": [{"nodes": 8, "start": "2024-05-01T12:00:00Z", "end": "2024-05-01T12:00:00Z"}]}
    assert StabilisationState.from_dict(old).spans[0].latency is None
    with pytest.raises(DataValidationError, match="malformed"):
        StabilisationState.from_dict(
            {"spans": [{**old["spans"][0], "latency": {"nodes": 0, "services": []}}]}
        )


def test_a_change_of_cause_at_the_same_value_starts_a_span_that_outlives_the_old() -> None:
    state = record(StabilisationState(), 8, NOW, CALM.window, LatencyCause(2, ("llm",)))
    state = record(state, 8, NOW + MIN, CALM.window, None)
    # The value is the same but latency no longer explains it: only the newer span stays.
    assert [(s.nodes, s.start, s.latency) for s in state.spans] == [(8, NOW + MIN, None)]
    held = stabilise(6, 8, state, CALM, NOW + 2 * MIN)
    assert held.limited_by == "window"
    assert held.held is not None
    assert held.held.latency is None


# -- explanation term, action, headroom -----------------------------------------


def stages(**overrides: object) -> Stages:
    base: dict[str, object] = {
        "mode": "predictive",
        "forecast_nodes": 6,
        "latency_nodes": 6,
        "floor_nodes": 2,
        "need": 6,
        "bounded": 6,
        "window_max": 6,
        "stabilised": 6,
        "final": 6,
    }
    return Stages(**{**base, **overrides})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "term"),
    [
        ({}, "forecast"),
        ({"latency_nodes": 8, "need": 8, "bounded": 8, "stabilised": 8, "final": 8}, "latency"),
        ({"floor_nodes": 9, "need": 9, "bounded": 9, "stabilised": 9, "final": 9}, "floor"),
        ({"mode": "reactive", "forecast_nodes": None, "latency_nodes": None}, "reactive"),
        ({"bounded": 5, "window_max": 5, "stabilised": 5, "final": 5}, "bounds"),
        ({"stabilised": 9, "final": 9, "window_max": 9}, "stabilisation"),
        ({"stabilised": 30, "final": 20, "window_max": 6}, "bounds"),
    ],
)
def test_term_names_the_last_step_that_changed_the_number(
    overrides: dict[str, object], term: str
) -> None:
    assert term_that_set(stages(**overrides)) == term


def test_action_and_headroom() -> None:
    assert action_for(4, 6) == "scale_up"
    assert action_for(6, 6) == "hold"
    assert action_for(7, 6) == "scale_down"
    assert headroom(6, 2, 8) == (4, 4)  # one whole-node placeholder pod per node
    assert headroom(6, 2, 8, gpus_per_pod=2) == (4, 16)
    assert headroom(1, 2, 8) == (0, 0)


# -- inputs ---------------------------------------------------------------------


def test_naive_timestamps_are_rejected_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"timezone-aware.*timezone\.utc"):
        Sample(1.0, datetime(2024, 5, 1, 12, 0))
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        assess_health(None, live(), HEALTH, LEAD, datetime(2024, 5, 1))


def test_bad_forecast_values_name_the_problem() -> None:
    with pytest.raises(DataValidationError, match="NaN"):
        forecast([1.0, float("nan")])
    with pytest.raises(DataValidationError, match=r"no quantile 0\.9"):
        DemandForecast((NOW,), {0.5: (1.0,)}, 0.9, "1", NOW, STEP)
    with pytest.raises(DataValidationError, match="one value per timestamp"):
        DemandForecast((NOW,), {0.9: (1.0, 2.0)}, 0.9, "1", NOW, STEP)
    with pytest.raises(DataValidationError, match="demand_gpus"):
        LiveSignals(Sample(-1.0, NOW), Sample(1.0, NOW))


def test_forecast_builds_from_a_real_model_frame() -> None:
    ds = pd.date_range("2024-04-30", periods=200, freq="10min", tz="UTC")
    rng = np.random.default_rng(0)
    history = pd.DataFrame(
        {"unique_id": "a100/demand_gpus", "ds": ds, "y": 40 + rng.normal(0, 3, ds.size)}
    )
    frame = Persistence(horizon=6, window=100).fit(history).predict(6, levels=(0.5, 0.9))
    f = DemandForecast.from_frame(
        frame,
        level=0.9,
        model_version="3",
        generated_at=ds[-1].to_pydatetime(),
        step=STEP,
    )
    assert set(f.quantiles) == {0.5, 0.9}
    assert len(f.timestamps) == 6
    assert f.timestamps[0] == ds[-1] + STEP
    assert all(hi >= lo for hi, lo in zip(f.quantiles[0.9], f.quantiles[0.5], strict=True))
    with pytest.raises(DataValidationError, match=r"q0\.95"):
        DemandForecast.from_frame(frame, level=0.95, model_version="3", generated_at=NOW, step=STEP)


def test_a_second_decision_at_the_same_instant_replaces_the_first() -> None:
    # The service decides when the push of ``NOW`` arrives (from the older forecast:
    # 10 nodes) and again when the forecast run of ``NOW`` is read (6 nodes). The
    # replay decides once per step: the first must not hold the second for a window.
    state = warmed((6, 30, 5))
    first = stabilise(10, 8, state, CALM, NOW, basis=NOW - 10 * MIN)
    assert first.nodes == 10

    second = stabilise(6, 8, first.state, CALM, NOW, basis=NOW)

    assert second.window_max == 6
    assert second.nodes == 7  # one step below the 8 ready nodes, as from ``state``
    assert second.nodes == stabilise(6, 8, state, CALM, NOW, basis=NOW).nodes
    assert second.state.previous == replace(state, previous=None)
    assert second.state.last_basis == NOW


def test_two_decisions_at_one_instant_from_the_same_forecast_both_count() -> None:
    # Replicas (or a re-read) deciding at one instant from the same forecast: the
    # higher one still holds the lower one, whichever came last.
    state = warmed((6, 30, 5))
    first = stabilise(10, 8, state, CALM, NOW, basis=NOW - 10 * MIN)
    second = stabilise(6, 8, first.state, CALM, NOW, basis=NOW - 10 * MIN)
    assert (second.nodes, second.limited_by) == (10, "window")


def test_a_newer_forecast_replaces_every_decision_of_the_instant_from_the_older_one() -> None:
    # A service killed after the push of ``NOW`` was decided (10 nodes, older forecast)
    # and started again decides once more from that forecast (9) before the forecast
    # run of ``NOW`` is read (6): the result is the uninterrupted run's, which decided
    # 10 and then 6.
    state = warmed((6, 30, 5))
    older = NOW - 10 * MIN
    pushed = stabilise(10, 8, state, CALM, NOW, basis=older)
    restarted = stabilise(9, 8, pushed.state, CALM, NOW, basis=older)
    assert (restarted.nodes, restarted.limited_by) == (10, "window")

    killed = stabilise(6, 8, restarted.state, CALM, NOW, basis=NOW)
    uninterrupted = stabilise(6, 8, pushed.state, CALM, NOW, basis=NOW)

    assert killed == uninterrupted
    assert killed.nodes == 7
    assert killed.state.previous == replace(state, previous=None)


def test_a_decision_a_moment_later_still_counts_the_earlier_one() -> None:
    state = warmed((6, 30, 5))
    first = stabilise(10, 8, state, CALM, NOW, basis=NOW - 10 * MIN)
    later = stabilise(6, 8, first.state, CALM, NOW + MIN, basis=NOW + MIN)
    assert (later.nodes, later.limited_by) == (10, "window")


def test_the_state_before_the_last_decision_survives_the_store() -> None:
    first = stabilise(10, 8, warmed((6, 30, 5)), CALM, NOW, basis=NOW - MIN).state
    assert first.previous is not None
    assert StabilisationState.from_dict(first.to_dict()) == first
    older = {k: v for k, v in first.to_dict().items() if k != "previous"}
    assert StabilisationState.from_dict(older).previous is None  # stored before it was kept
