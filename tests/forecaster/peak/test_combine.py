"""Online combination of the model and a reference: realised losses only, tracks the better."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.peak_batch import combine_bounds, expert_weights
from forecaster.peak.combine import DiscountedExperts, mix, pinball, snap_to_demand


def test_pinball_is_asymmetric() -> None:
    peak = np.array([10.0, 10.0])
    np.testing.assert_allclose(pinball(peak, np.array([8.0, 12.0]), 0.9), [1.8, 0.2])


def test_weights_use_only_realised_losses() -> None:
    rng = np.random.default_rng(0)
    losses = rng.random((300, 2))
    lead = 3
    base = expert_weights(losses, lead, eta=5.0, halflife=50.0)
    changed = losses.copy()
    changed[200:, 0] += 100.0  # the forecast at 200 is realised only at 203
    moved = expert_weights(changed, lead, eta=5.0, halflife=50.0)
    np.testing.assert_array_equal(base[: 200 + lead], moved[: 200 + lead])
    assert moved[200 + lead, 0] < base[200 + lead, 0]
    assert (base[:lead] == 0.5).all()
    np.testing.assert_allclose(base.sum(axis=1), 1.0)


def test_an_expert_without_a_loss_has_no_weight_and_does_not_stop_the_others() -> None:
    losses = np.column_stack([[np.nan, 1.0, 1.0, 1.0], np.zeros(4), [1.0, 0.5, 0.5, 0.5]])
    w = expert_weights(losses, lead=1, eta=1.0, halflife=10.0)
    np.testing.assert_allclose(w[0], 1.0 / 3.0)  # nothing realised: equal
    assert w[1, 0] == 0.0  # the first expert had no loss yet: no evidence, no weight
    assert w[1, 1] > w[1, 2] > 0.0  # the others learnt from the origin it missed
    assert 0.0 < w[3, 0] < w[3, 1]
    nothing = expert_weights(np.full((3, 2), np.nan), lead=1, eta=1.0, halflife=10.0)
    np.testing.assert_array_equal(nothing, 0.5)  # no loss at all: still equal
    with pytest.raises(ValueError, match="lead"):
        expert_weights(losses, lead=0, eta=1.0, halflife=10.0)


def test_three_experts_weigh_the_best_most() -> None:
    experts = DiscountedExperts(eta=2.0, halflife=10.0, experts=3)
    np.testing.assert_allclose(experts.weights(), 1.0 / 3.0)
    for _ in range(20):
        experts.observe(np.array([0.5, 1.0, 0.1]))
    w = experts.weights()
    assert w[2] > w[0] > w[1]
    assert w.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="3 losses"):
        experts.observe(np.array([1.0, 2.0]))


def test_mix_of_agreeing_experts_is_exact_and_skips_missing_ones() -> None:
    # 0.1 * 0.7 + 0.1 * 0.2 + 0.1 * 0.1 is not 0.1 in floating point; the mix must be.
    assert mix(np.array([0.1, 0.1, 0.1]), np.array([0.7, 0.2, 0.1])) == 0.1
    assert mix(np.array([np.nan, 4.0, 8.0]), np.array([0.5, 0.25, 0.25])) == 6.0
    assert np.isnan(mix(np.array([np.nan, np.nan]), np.array([0.5, 0.5])))


@pytest.mark.parametrize("best", [0, 1, 2])
def test_combination_converges_to_the_better_expert(best: int) -> None:
    rng = np.random.default_rng(7)
    n, level = 3000, 0.9
    peak = rng.normal(0.0, 1.0, n)
    good = np.full(n, 1.2816)  # the true q0.9
    bad = [np.full(n, 4.0), np.full(n, -2.0)]  # far too wide, far too low
    experts = [*bad[:best], good, *bad[best:]]
    scale = np.ones(n)
    mixed = combine_bounds(experts, peak, scale, level, lead=2, eta=30.0, halflife=200.0)
    np.testing.assert_allclose(mixed[-500:], good[-500:], atol=0.05)
    tail = slice(1000, None)
    loss = pinball(peak[tail], mixed[tail], level).mean()
    assert loss <= pinball(peak[tail], good[tail], level).mean() * 1.02


def test_a_missing_reference_leaves_the_model() -> None:
    n = 50
    model = np.arange(n, dtype=np.float64)
    reference = np.full(n, np.nan)
    out = combine_bounds([model, reference], model + 1.0, np.ones(n), 0.9, lead=1)
    np.testing.assert_array_equal(out, model)


def test_a_mix_just_above_demand_is_set_to_demand_where_the_reference_is_there() -> None:
    demand = np.full(7, 10.0)
    bounds = np.array([10.0 + 1e-6, 10.5, 10.7, 9.0, np.nan, 10.0, 10.2])
    scale = np.array([1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    # The trailing-day reference sits at demand (an atom covering the level) but for the
    # last origin, where it is above demand: no atom there, the bound is kept.
    reference = np.array([10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.4])
    out = snap_to_demand(bounds, demand, scale, reference, tolerance=0.3)
    # Within 0.3 scale units above: demand. Beyond, at or below demand, NaN: as given.
    np.testing.assert_array_equal(out, [10.0, 10.0, 10.7, 9.0, np.nan, 10.0, 10.2])
    np.testing.assert_array_equal(snap_to_demand(bounds, demand, scale, reference, 0.0), bounds)
    # A reference below demand (more than 1 - q of the headroom negative): demand covers
    # the level too, so a bound just above it is set to demand as well.
    below = np.where(reference == 10.0, 8.0, reference)
    out = snap_to_demand(bounds, demand, scale, below, tolerance=0.3)
    np.testing.assert_array_equal(out, [10.0, 10.0, 10.7, 9.0, np.nan, 10.0, 10.2])
    unknown = np.full(7, np.nan)
    np.testing.assert_array_equal(snap_to_demand(bounds, demand, scale, unknown, 0.3), bounds)


def test_a_negative_snap_tolerance_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance >= 0"):
        snap_to_demand(np.ones(2), np.ones(2), np.ones(2), np.ones(2), tolerance=-0.1)
