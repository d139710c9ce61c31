"""The Foresight adapter: the real policy.decide, the pool config, carried state."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from forecaster.models.naive import Persistence
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.walkforward import WalkForwardForecaster
from policy.config import ScaleDownConfig
from policy.decide import decide
from policy.recommendation import Recommendation
from policy.state import StabilisationState


def persistence() -> Persistence:
    return Persistence(horizon=3, window=50)


def forecaster() -> WalkForwardForecaster:
    return WalkForwardForecaster(persistence, retrain_every=timedelta(hours=1), min_history=6)


class Spy:
    """Wraps policy.decide and keeps every call's arguments and answer."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.answers: list[Recommendation] = []

    def __call__(self, *args: Any) -> Recommendation:
        answer = decide(*args)
        self.calls.append(args)
        self.answers.append(answer)
        return answer


def test_the_default_decision_is_the_apis_own_function(pool):
    adapter = ForesightPolicy(pool(), forecaster())
    assert adapter.decide_fn is decide


def test_every_step_is_decided_by_the_policy_with_the_pools_config_and_carried_state(series, pool):
    rng = np.random.default_rng(5)
    config = pool(lead_minutes=10).model_copy(
        update={"quantile": 0.8, "scale_down": ScaleDownConfig(window=timedelta(minutes=15))}
    )
    spy = Spy()
    adapter = ForesightPolicy(config, forecaster(), decide_fn=spy)
    result = simulate(series(rng.gamma(3.0, 15.0, 40)), config, adapter)

    assert len(spy.calls) == 40
    assert result.frame["desired_nodes"].tolist() == [a.desired_nodes for a in spy.answers]
    for i, (pool_arg, forecast, live, _health, _lat, state, now) in enumerate(spy.calls):
        assert pool_arg is config
        assert forecast.level == 0.8
        assert now == result.frame.index[i].to_pydatetime()
        # The state handed in is the one the previous decision returned.
        expected = StabilisationState() if i == 0 else spy.answers[i - 1].state
        assert state == expected
        # Live demand is the work wanted now: the backlog carried in plus this step's.
        carried = result.frame["backlog_gpus"].iloc[i - 1] if i else 0.0
        assert live.demand_gpus.value == pytest.approx(
            carried + result.frame["demand_gpus"].iloc[i]
        )
    # The forecast covers now + lead + step, so the policy ran predictively throughout.
    assert adapter.terms["reactive"] == 0


def test_recomputing_one_step_by_hand_gives_the_same_nodes(series, pool):
    rng = np.random.default_rng(9)
    config = pool(lead_minutes=10)
    spy = Spy()
    simulate(
        series(rng.gamma(3.0, 15.0, 30)),
        config,
        ForesightPolicy(config, forecaster(), decide_fn=spy),
    )
    args = spy.calls[17]
    assert decide(*args).desired_nodes == spy.answers[17].desired_nodes


@pytest.mark.parametrize("cut", [12, 25])
def test_a_different_future_leaves_every_earlier_decision_unchanged(series, pool, cut):
    rng = np.random.default_rng(cut)
    values = rng.gamma(2.0, 20.0, 40)
    changed = values.copy()
    changed[cut + 1 :] = rng.gamma(2.0, 60.0, 40 - cut - 1)
    config = pool(lead_minutes=10)
    before = simulate(series(values), config, ForesightPolicy(config, forecaster())).frame
    after = simulate(series(changed), config, ForesightPolicy(config, forecaster())).frame
    assert (
        before["desired_nodes"].iloc[: cut + 1].tolist()
        == after["desired_nodes"].iloc[: cut + 1].tolist()
    )
    assert before["desired_nodes"].tolist() != after["desired_nodes"].tolist()


def test_a_higher_quantile_never_provisions_less(series, pool):
    rng = np.random.default_rng(2)
    demand = series(rng.gamma(2.0, 25.0, 80))
    shared = forecaster()
    provisioned = []
    for q in (0.5, 0.9, 0.99):
        config = pool(lead_minutes=10).model_copy(update={"quantile": q})
        provisioned.append(
            simulate(demand, config, ForesightPolicy(config, shared)).gpu_hours_provisioned
        )
    assert provisioned == sorted(provisioned)
    assert provisioned[0] < provisioned[-1]


def test_refreshing_every_few_steps_keeps_the_last_forecast(series, pool):
    config = pool(lead_minutes=10)
    spy = Spy()
    adapter = ForesightPolicy(config, forecaster(), refresh_every=3, decide_fn=spy)
    simulate(series([8.0 * (i % 7) for i in range(12)]), config, adapter)
    made = [call[1].generated_at for call in spy.calls]
    assert made[0] == made[1] == made[2] != made[3]
    assert adapter.terms["reactive"] == 0  # a forecast 2 steps old still covers the window
