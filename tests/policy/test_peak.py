"""The policy provisions at the stored peak quantile; the per-horizon max is the fallback."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from forecaster.exceptions import DataValidationError
from pipelines.config.pools import PoolConfig
from policy.config import ScaleDownConfig
from policy.decide import decide
from policy.peak import PeakForecast
from policy.recommendation import Recommendation
from policy.state import StabilisationState
from policy.types import (
    NO_LATENCY,
    Calibration,
    DemandForecast,
    ForecastHealth,
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
    max_nodes=40,
    lead_time=10 * MIN,
    target_utilisation=0.8,
    quantile=0.9,
    scale_down=ScaleDownConfig(window=10 * MIN, max_step_nodes=1),
)
HEALTH = ForecastHealth(None, 1.5, 5 * MIN, 30 * MIN)
ORIGIN = NOW - 2 * MIN


def peak(q90: float = 60.0, last: float = 40.0, lead: timedelta = 10 * MIN) -> PeakForecast:
    return PeakForecast(quantiles={0.5: last + 2.0, 0.9: q90}, origin=ORIGIN, last=last, lead=lead)


def forecast(
    p: PeakForecast | None = None, values: tuple[float, ...] = (41.0, 45.0, 99.0)
) -> DemandForecast:
    return DemandForecast(
        timestamps=tuple(ORIGIN + 5 * (i + 1) * MIN for i in range(len(values))),
        quantiles={0.5: tuple(v - 3 for v in values), 0.9: values},
        level=0.9,
        model_version="7",
        generated_at=ORIGIN,
        step=5 * MIN,
        peak=p,
        peak_missing="" if p is not None else "the served model version has no peak forecast",
    )


def live(demand: float = 40.0, at: datetime = ORIGIN) -> LiveSignals:
    return LiveSignals(Sample(demand, at), Sample(5.0, NOW - MIN))


def run(
    f: DemandForecast | None, signals: LiveSignals | None = None, **pool: object
) -> Recommendation:
    chosen = POOL.model_copy(update=pool) if pool else POOL
    return decide(chosen, f, signals or live(), HEALTH, NO_LATENCY, StabilisationState(), NOW)


def test_the_peak_quantile_is_provisioned_directly_without_a_utilisation_margin() -> None:
    rec = run(forecast(peak(q90=60.0)))

    # 60 GPUs / 8 per node = 7.5 -> 8 nodes; no 0.8 utilisation on top (that would be 10).
    assert rec.explanation.stages.forecast_nodes == 8
    assert rec.desired_nodes == 8
    assert rec.mode == "predictive"
    assert rec.forecast_quantiles == {0.5: 42.0, 0.9: 60.0}
    assert rec.explanation.forecast_peak_at == ORIGIN + 10 * MIN
    summary = rec.explanation.summary
    assert "q0.9 of the demand peak over the next 10 min is 60 GPUs" in summary
    assert "no target-utilisation margin on a peak quantile" in summary


def test_target_utilisation_does_not_move_a_peak_decision() -> None:
    low, high = (run(forecast(peak()), target_utilisation=u) for u in (0.5, 1.0))
    assert low.desired_nodes == high.desired_nodes


def test_the_per_horizon_path_does_not_matter_when_a_peak_exists() -> None:
    one = run(forecast(peak(), values=(41.0, 45.0, 99.0)))
    other = run(forecast(peak(), values=(0.0, 300.0, 0.0)))
    assert one.desired_nodes == other.desired_nodes == 8


def test_newer_live_demand_gets_the_stored_headroom() -> None:
    newer = live(demand=70.0, at=NOW - MIN)

    rec = run(forecast(peak(q90=60.0, last=40.0)), newer)

    # Headroom 60 - 40 = 20 GPUs on the newer 70: 90 GPUs -> 12 nodes.
    assert rec.forecast_quantiles[0.9] == pytest.approx(90.0)
    assert rec.desired_nodes == 12
    assert rec.explanation.forecast_peak_at == NOW - MIN + 10 * MIN
    assert "carried over to the newer live demand of 70 GPUs" in rec.explanation.summary


def test_live_demand_not_newer_than_the_origin_leaves_the_peak_as_stored() -> None:
    rec = run(forecast(peak(q90=60.0, last=40.0)), live(demand=70.0, at=ORIGIN - MIN))
    assert rec.forecast_quantiles[0.9] == 60.0
    assert "carried over" not in rec.explanation.summary


def test_without_a_peak_forecast_the_per_horizon_max_is_used_and_said() -> None:
    rec = run(forecast(None, values=(41.0, 45.0, 99.0)))

    # Window [now, now + 15 min] holds +3, +8, +13 min: max 99; 99 / 6.4 -> 16 nodes.
    assert rec.forecast_quantiles[0.9] == 99.0
    assert rec.explanation.stages.forecast_nodes == 16
    summary = rec.explanation.summary
    assert "no peak forecast: the served model version has no peak forecast" in summary
    assert "which is not a quantile of the peak" in summary
    assert "80% target utilisation" in summary


def test_the_live_calibration_offset_is_added_to_the_peak_quantile() -> None:
    calibrated = forecast(peak(q90=60.0)).calibrated(Calibration(8.0, 0.8, 50))

    rec = run(calibrated)

    assert rec.forecast_quantiles[0.9] == 68.0  # 68 / 8 -> 9 nodes
    assert rec.desired_nodes == 9
    assert "+8 GPUs of live calibration" in rec.explanation.summary


def test_a_peak_calibrated_online_is_provisioned_as_stored_and_said_so() -> None:
    online = replace(peak(q90=60.0), raw={0.5: 41.0, 0.9: 52.0})
    calibrated = forecast(online).calibrated(Calibration(8.0, 0.8, 50))

    rec = run(calibrated)

    assert rec.forecast_quantiles[0.9] == 60.0  # not 68: the online bound is not calibrated twice
    assert rec.desired_nodes == 8
    summary = rec.explanation.summary
    assert "the model's 52 GPUs moved +8 by online calibration" in summary
    assert "live calibration" not in summary


def test_a_peak_forecast_covers_the_window_even_when_the_path_is_short() -> None:
    short = replace(forecast(peak()), timestamps=(), quantiles={0.9: (), 0.5: ()})
    assert run(short).mode == "predictive"
    too_short = forecast(peak(lead=5 * MIN), values=(41.0,))
    assert run(too_short).explanation.health_reasons == ("forecast_short",)


def test_a_peak_forecast_without_the_pools_level_is_refused() -> None:
    with pytest.raises(DataValidationError, match=r"peak forecast has no quantile 0\.95"):
        replace(forecast(peak()), level=0.95, quantiles={0.95: (1.0, 2.0, 3.0)})


def test_the_peak_input_is_dated_by_the_forecast_and_a_peak_adding_no_node_is_said() -> None:
    rec = run(forecast(peak(q90=38.0, last=36.0)), live(demand=36.0, at=NOW - MIN))

    assert rec.explanation.inputs["forecast_peak_gpus"].at == ORIGIN  # the job's run
    assert rec.explanation.stages.forecast_nodes == 5  # 38 / 8 -> 5, as live 36 needs
    assert (
        "live demand already needs 5 nodes and the forecast peak (+2 GPUs over live demand) "
        "adds none" in rec.explanation.summary
    )


def returned(last: float = 20.0) -> PeakForecast:
    """Demand back at 20 GPUs after an idle spell; 120 GPUs before it, held from q0.5 up."""
    return PeakForecast(
        quantiles={0.1: last, 0.5: 120.0, 0.9: 120.0},
        origin=ORIGIN,
        last=last,
        lead=10 * MIN,
        returning=120.0,
    )


def test_a_pool_back_from_an_idle_spell_is_provisioned_its_level_before_and_said_so() -> None:
    rec = run(forecast(returned()))

    assert rec.desired_nodes == 15  # 120 / 8
    summary = rec.explanation.summary
    assert "held at 120 GPUs, the most demand reached in the hour before the idle" in summary


def test_a_held_level_is_a_level_not_a_headroom_when_newer_demand_comes() -> None:
    higher = run(forecast(returned()), live(demand=60.0, at=NOW - MIN))
    # The held 120 stays 120 (not 120 - 20 + 60 = 160); q0.1 carries its headroom (0).
    assert higher.forecast_quantiles == {0.1: 60.0, 0.5: 120.0, 0.9: 120.0}
    assert "held at 120 GPUs" in higher.explanation.summary
    above = run(forecast(returned()), live(demand=130.0, at=NOW - MIN))
    assert above.forecast_quantiles[0.9] == 130.0
    assert "held at" not in above.explanation.summary


def test_a_returning_level_must_be_a_number_of_gpus() -> None:
    with pytest.raises(DataValidationError, match="returning level"):
        replace(returned(), returning=float("nan"))
    with pytest.raises(DataValidationError, match="returning level"):
        replace(returned(), returning=-1.0)


def scaled(q90: float = 60.0, scale: float | None = 4.0) -> PeakForecast:
    return replace(peak(q90=q90), scale=scale)


def test_a_safety_margin_adds_margin_times_the_volatility_to_the_peak_quantile() -> None:
    none = run(forecast(scaled(q90=60.0, scale=4.0)))
    some = run(forecast(scaled(q90=60.0, scale=4.0)), safety_margin=2.5)

    # 60 + 2.5 x 4 = 70 GPUs -> ceil(70 / 8) = 9 nodes; without it 60 -> 8.
    assert none.desired_nodes == 8
    assert some.explanation.inputs["forecast_peak_gpus"].value == 70.0
    assert some.explanation.stages.forecast_nodes == 9
    assert some.desired_nodes == 9
    assert "a safety margin of 2.5 x the demand's recent volatility (10 GPUs)" in (
        some.explanation.summary
    )
    assert some.explanation.settings["safety_margin"] == 2.5


def test_a_zero_safety_margin_changes_nothing() -> None:
    plain = run(forecast(peak(q90=60.0)))
    zero = run(forecast(scaled(q90=60.0, scale=4.0)), safety_margin=0.0)

    assert zero.desired_nodes == plain.desired_nodes
    assert zero.explanation.summary == plain.explanation.summary
    assert zero.explanation.settings == plain.explanation.settings
    assert "safety_margin" not in zero.explanation.settings


def test_a_safety_margin_moves_with_the_headroom_to_newer_demand() -> None:
    newer = live(demand=70.0, at=NOW - MIN)
    rec = run(forecast(scaled(q90=60.0, scale=4.0)), newer, safety_margin=1.0)

    # headroom 20 carried to 70 = 90, plus 1 x 4 = 94 GPUs -> 12 nodes
    assert rec.explanation.inputs["forecast_peak_gpus"].value == 94.0
    assert rec.desired_nodes == 12


def test_a_safety_margin_without_a_scale_is_not_applied_and_said() -> None:
    rec = run(forecast(scaled(q90=60.0, scale=None)), safety_margin=3.0)

    assert rec.desired_nodes == 8
    assert "no safety margin: the peak forecast carries no volatility scale" in (
        rec.explanation.summary
    )


def test_the_per_horizon_fallback_gets_no_safety_margin_and_says_why() -> None:
    rec = run(forecast(None, values=(41.0, 45.0, 99.0)), safety_margin=3.0)

    assert rec.explanation.stages.forecast_nodes == 16  # as without a margin
    assert "no safety margin: the per-horizon fallback has no volatility scale" in (
        rec.explanation.summary
    )


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_peak_forecasts_scale_must_be_a_positive_number(bad: float) -> None:
    with pytest.raises(DataValidationError, match="scale must be finite and > 0"):
        scaled(scale=bad)
