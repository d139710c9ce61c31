"""Online combination of the model and a reference: realised losses only, tracks the better."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.peak import combine_bounds, expert_weights
from forecaster.peak.combine import pinball


def test_pinball_is_asymmetric() -> None:
    peak = np.array([10.0, 10.0])
    np.testing.assert_allclose(pinball(peak, np.array([8.0, 12.0]), 0.9), [1.8, 0.2])


def test_weights_use_only_realised_losses() -> None:
    rng = np.random.default_rng(0)
    lm, lr = rng.random(300), rng.random(300)
    lead = 3
    base = expert_weights(lm, lr, lead, eta=5.0, halflife=50.0)
    changed = lm.copy()
    changed[200:] += 100.0  # the forecast at 200 is realised only at 203
    moved = expert_weights(changed, lr, lead, eta=5.0, halflife=50.0)
    np.testing.assert_array_equal(base[: 200 + lead], moved[: 200 + lead])
    assert moved[200 + lead] < base[200 + lead]
    assert (base[:lead] == 0.5).all()


def test_weights_skip_missing_losses() -> None:
    lm = np.array([np.nan, 1.0, 1.0, 1.0])
    lr = np.array([0.0, 0.0, 0.0, 0.0])
    w = expert_weights(lm, lr, lead=1, eta=1.0, halflife=10.0)
    assert w[1] == 0.5  # the only realised origin had no loss: still no evidence
    assert w[3] < 0.5
    with pytest.raises(ValueError, match="lead"):
        expert_weights(lm, lr, lead=0, eta=1.0, halflife=10.0)


@pytest.mark.parametrize("model_is_better", [True, False])
def test_combination_converges_to_the_better_expert(model_is_better: bool) -> None:
    rng = np.random.default_rng(7)
    n, level = 3000, 0.9
    peak = rng.normal(0.0, 1.0, n)
    good = np.full(n, 1.2816)  # the true q0.9
    bad = np.full(n, 4.0)  # far too wide
    model, reference = (good, bad) if model_is_better else (bad, good)
    scale = np.ones(n)
    mixed = combine_bounds(model, reference, peak, scale, level, lead=2, eta=30.0, halflife=200.0)
    np.testing.assert_allclose(mixed[-500:], good[-500:], atol=0.05)
    tail = slice(1000, None)
    loss = pinball(peak[tail], mixed[tail], level).mean()
    assert loss <= pinball(peak[tail], good[tail], level).mean() * 1.02


def test_a_missing_reference_leaves_the_model() -> None:
    n = 50
    model = np.arange(n, dtype=np.float64)
    reference = np.full(n, np.nan)
    out = combine_bounds(model, reference, model + 1.0, np.ones(n), 0.9, lead=1)
    np.testing.assert_array_equal(out, model)
