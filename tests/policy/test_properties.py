"""Properties of the scale decision (hypothesis): bounds, floor, monotonicity, pacing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.config.pools import PoolConfig
from policy.config import ScaleDownConfig
from policy.decide import decide
from policy.floor import reactive_floor
from policy.recommendation import Recommendation
from policy.stabilise import record
from policy.state import StabilisationState
from policy.types import DemandForecast, ForecastHealth, LatencyAdjustment, LiveSignals, Sample

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
FAST = settings(max_examples=150, deadline=None)

gpus = st.floats(min_value=0.0, max_value=400.0, allow_nan=False)


@st.composite
def pools(draw: st.DrawFn) -> PoolConfig:
    min_nodes = draw(st.integers(0, 8))
    return PoolConfig(
        name="p",
        node_group_id="ng",
        gpus_per_node=draw(st.sampled_from([1, 2, 4, 8])),
        min_nodes=min_nodes,
        max_nodes=max(1, min_nodes + draw(st.integers(0, 40))),
        lead_time=draw(st.integers(1, 20)) * MIN,
        target_utilisation=draw(st.floats(0.3, 1.0)),
        quantile=0.9,
        scale_down=ScaleDownConfig(
            window=draw(st.integers(0, 20)) * MIN,
            max_step_nodes=draw(st.integers(1, 4)),
            max_step_percent=draw(st.sampled_from([0.0, 10.0, 25.0, 100.0])),
        ),
    )


@st.composite
def forecasts(draw: st.DrawFn, n: int | None = None) -> DemandForecast | None:
    if n is None and draw(st.booleans()) and draw(st.booleans()):
        return None  # a quarter of the cases have no model
    size = n if n is not None else draw(st.integers(1, 6))
    values = draw(st.lists(gpus, min_size=size, max_size=size))
    return DemandForecast(
        timestamps=tuple(NOW + 5 * k * MIN for k in range(size)),
        quantiles={0.9: tuple(values)},
        level=0.9,
        model_version="1",
        generated_at=NOW - draw(st.integers(0, 60)) * MIN,
        step=5 * MIN,
    )


@st.composite
def lives(draw: st.DrawFn) -> LiveSignals:
    age = draw(st.integers(0, 600)) * timedelta(seconds=1)
    return LiveSignals(
        Sample(draw(gpus), NOW - age), Sample(draw(st.integers(0, 60)), NOW - age), None
    )


healths = st.builds(
    ForecastHealth,
    recent_error=st.none() | st.floats(0.0, 3.0),
    error_bound=st.just(1.5),
    max_live_age=st.just(5 * MIN),
    max_forecast_age=st.just(30 * MIN),
)
latencies = st.builds(
    LatencyAdjustment,
    extra_nodes=st.integers(0, 5),
    reason=st.just("x"),
    not_gpu_bound=st.booleans(),
)


@st.composite
def states(draw: st.DrawFn) -> StabilisationState:
    """A state left by a few earlier decisions over the last half hour."""
    state = StabilisationState()
    for minutes_ago in sorted(draw(st.lists(st.integers(1, 30), max_size=6)), reverse=True):
        state = record(state, draw(st.integers(0, 50)), NOW - minutes_ago * MIN, 20 * MIN)
    return state


@FAST
@given(pools(), forecasts(), lives(), healths, latencies, states())
def test_always_within_bounds_and_never_below_the_floor_unless_capped(
    pool: PoolConfig,
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    latency: LatencyAdjustment,
    state: StabilisationState,
) -> None:
    rec = decide(pool, forecast, live, health, latency, state, NOW)
    assert pool.min_nodes <= rec.desired_nodes <= pool.max_nodes
    floor = reactive_floor(live.demand_gpus.value, pool.gpus_per_node)
    assert rec.desired_nodes >= min(floor, pool.max_nodes)
    assert rec.headroom_nodes == max(0, rec.desired_nodes - floor)
    assert rec.delta == rec.desired_nodes - rec.current_nodes
    assert len(rec.state.spans) <= 51  # spans strictly decrease: bounded by the values seen


@st.composite
def raised(draw: st.DrawFn) -> tuple[DemandForecast, DemandForecast]:
    low = draw(forecasts(n=draw(st.integers(1, 6))))
    assert low is not None
    bumps = draw(st.lists(gpus, min_size=len(low.timestamps), max_size=len(low.timestamps)))
    values = tuple(v + b for v, b in zip(low.quantiles[0.9], bumps, strict=True))
    high = DemandForecast(low.timestamps, {0.9: values}, 0.9, "1", low.generated_at, low.step)
    return low, high


@FAST
@given(pools(), raised(), lives(), healths, latencies, states())
def test_monotone_non_decreasing_in_the_forecast(
    pool: PoolConfig,
    pair: tuple[DemandForecast, DemandForecast],
    live: LiveSignals,
    health: ForecastHealth,
    latency: LatencyAdjustment,
    state: StabilisationState,
) -> None:
    low, high = pair
    before = decide(pool, low, live, health, latency, state, NOW)
    after = decide(pool, high, live, health, latency, state, NOW)
    assert after.desired_nodes >= before.desired_nodes


@dataclass(frozen=True)
class Step:
    """One decision of a replayed sequence."""

    at: datetime
    current: int
    raw: int
    rec: Recommendation


@st.composite
def timelines(draw: st.DrawFn) -> list[tuple[int, float, bool]]:
    """Per decision: seconds since the previous one, live demand, whether nodes follow."""
    return draw(
        st.lists(st.tuples(st.integers(1, 900), gpus, st.booleans()), min_size=2, max_size=25)
    )


@FAST
@given(pools(), timelines(), st.floats(0.0, 1.0))
def test_scale_down_never_faster_than_window_and_step_and_scale_up_at_once(
    pool: PoolConfig, timeline: list[tuple[int, float, bool]], start_share: float
) -> None:
    # Reactive decisions (no forecast) so the live demand drives the raw value directly;
    # the consumer applies each recommendation at once (or lags, when `follow` is False).
    health = ForecastHealth(None, 1.5, timedelta(days=1), timedelta(days=1))
    # Start within the bounds: above max_nodes the bounds (rightly) beat the step.
    nodes = round(pool.min_nodes + start_share * (pool.max_nodes - pool.min_nodes))
    state, now = StabilisationState(), NOW
    history: list[Step] = []
    for gap, demand, follow in timeline:
        now += gap * timedelta(seconds=1)
        live = LiveSignals(Sample(demand, now), Sample(nodes, now))
        rec = decide(pool, None, live, health, LatencyAdjustment(), state, now)
        history.append(Step(now, nodes, rec.explanation.stages.bounded, rec))
        state = rec.state
        if follow:
            nodes = rec.desired_nodes

    window, limit = pool.scale_down.window, pool.scale_down
    first = history[0].at
    for i, s in enumerate(history):
        desired = s.rec.desired_nodes
        # Scale-up is immediate: never below this decision's own (bounded) need.
        assert desired >= s.raw
        if s.raw > s.current:
            assert s.rec.action == "scale_up"
        if desired >= s.current:
            continue
        # A scale-down: the history spans a window, at most a step below ready nodes
        # (max_step_nodes, or max_step_percent of them rounded down if that is more) ...
        assert s.at - first >= window
        step = max(limit.max_step_nodes, s.current * limit.max_step_percent // 100)
        assert desired >= s.current - step
        # ... and no lower than any value in force during the window (values hold
        # from their decision until the next one replaced them).
        in_window = [
            h.raw
            for j, h in enumerate(history[: i + 1])
            if j == i or history[j + 1].at > s.at - window
        ]
        assert desired >= max(in_window)
