"""The explanation's words stay true: no "accurate" without a measured error, and a
forecast term that says what the forecast added over live demand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipelines.config.pools import PoolConfig
from policy.decide import decide
from policy.state import StabilisationState
from policy.types import NO_LATENCY, DemandForecast, ForecastHealth, LiveSignals, Sample

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
)


def forecast(values: tuple[float, ...]) -> DemandForecast:
    return DemandForecast(
        timestamps=tuple(NOW + (5 + 10 * i) * MIN for i in range(len(values))),
        quantiles={0.9: values},
        level=0.9,
        model_version="7",
        generated_at=NOW - 2 * MIN,
        step=10 * MIN,
    )


def live(demand: float) -> LiveSignals:
    at = NOW - 30 * timedelta(seconds=1)
    return LiveSignals(Sample(demand, at), Sample(4.0, at), Sample(35.0, at))


def health(error: float | None) -> ForecastHealth:
    return ForecastHealth(error, 1.5, 5 * MIN, 30 * MIN)


def run(values: tuple[float, ...], demand: float, error: float | None = 0.8):  # type: ignore[no-untyped-def]
    return decide(
        POOL, forecast(values), live(demand), health(error), NO_LATENCY, StabilisationState(), NOW
    )


def test_an_unmeasured_error_is_not_called_accurate() -> None:
    rec = run((20.0, 37.0), demand=10.0, error=None)
    assert rec.mode == "predictive"
    text = repr(rec.explanation)
    assert "accurate" not in str(text)
    assert "not measured yet" in str(text)


def test_a_measured_error_is_named_with_its_bound() -> None:
    rec = run((20.0, 37.0), demand=10.0, error=0.8)
    assert "recent mase 0.8 is within the bound 1.5" in repr(rec.explanation)


def test_a_flat_forecast_lifted_only_by_target_utilisation_does_not_say_forecast() -> None:
    # Live demand 40 GPUs, flat q0.9 of 42: 42 / (8 x 0.8) -> 7 nodes, and live demand
    # alone at 80 % target utilisation -> 7 nodes too; the floor is 5.
    rec = run((42.0, 42.0), demand=40.0)
    assert rec.desired_nodes == 7
    assert rec.explanation.term == "forecast"
    summary = rec.explanation.summary
    assert "set by forecast" not in summary
    assert "7 nodes, set by the target utilisation" in summary
    assert "adds none" in summary


def test_a_forecast_rise_says_how_much_it_adds() -> None:
    rec = run((20.0, 37.0), demand=10.0)
    summary = rec.explanation.summary
    assert summary.endswith("6 nodes, set by forecast")
    assert "the forecast peak is +27 GPUs over live demand" in summary
    assert "4 node(s) beyond the 2 live demand needs" in summary


def _summary(pool: PoolConfig) -> str:
    rec = decide(
        pool, forecast((20.0, 37.0)), live(10.0), health(0.8), NO_LATENCY,
        StabilisationState(), NOW,
    )  # fmt: skip
    return rec.explanation.summary


def test_a_cost_ratio_sets_the_newsvendor_quantile_and_the_explanation_says_so() -> None:
    costly = PoolConfig.model_validate(
        POOL.model_dump(exclude={"quantile"}) | {"waiting_cost_ratio": 9.0}
    )
    assert costly.quantile == 0.9
    assert costly.quantile_rule == "newsvendor"
    assert "newsvendor quantile: a waiting GPU-hour costs 9x an idle one" in _summary(costly)
    # A quantile given directly overrides the cost rule, and the words do not claim it.
    direct = PoolConfig.model_validate(POOL.model_dump() | {"waiting_cost_ratio": 3.0})
    assert direct.quantile == 0.9
    assert direct.quantile_rule == "quantile"
    assert "newsvendor" not in _summary(direct)
