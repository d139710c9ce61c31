"""The pool's safety margin in the raw need: volatility units beyond the peak quantile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from policy.need import margin_gpus, peak_demand
from policy.peak import PeakForecast
from policy.types import DemandForecast

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def forecast(scale: float | None) -> DemandForecast:
    peak = PeakForecast({0.9: 50.0, 0.99: 58.0}, NOW, last=40.0, lead=10 * MIN, scale=scale)
    return DemandForecast(
        timestamps=(NOW + 5 * MIN,),
        quantiles={0.9: (50.0,), 0.99: (58.0,)},
        level=0.99,
        model_version="1",
        generated_at=NOW,
        step=5 * MIN,
        peak=peak,
    )


@pytest.mark.parametrize(("margin", "expected"), [(0.0, 58.0), (1.0, 61.0), (2.5, 65.5)])
def test_the_margin_raises_the_provisioned_peak_by_margin_times_scale(
    margin: float, expected: float
) -> None:
    got = peak_demand(forecast(scale=3.0), NOW, 10 * MIN, safety_margin=margin)

    assert got is not None
    assert got.value == pytest.approx(expected)
    assert got.margin == pytest.approx(margin * 3.0)
    assert got.by_level[0.99] == 58.0  # the quantiles are reported as forecast


def test_a_zero_margin_is_the_peak_without_one() -> None:
    without = peak_demand(forecast(scale=3.0), NOW, 10 * MIN)
    zero = peak_demand(forecast(scale=3.0), NOW, 10 * MIN, safety_margin=0.0)
    assert zero == without


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
def test_a_negative_or_non_finite_margin_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="safety_margin must be a finite number >= 0"):
        peak_demand(forecast(scale=3.0), NOW, 10 * MIN, safety_margin=bad)


def test_margin_gpus_needs_a_scale() -> None:
    assert margin_gpus(0.0, None) == (0.0, "")
    assert margin_gpus(2.0, 3.0) == (6.0, "")
    none, why = margin_gpus(2.0, None)
    assert none == 0.0
    assert "no volatility scale" in why
