"""The lock-step driver against a small in-process fake of the service."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from pipelines.config.pools import PoolConfig
from pipelines.twin.loop import ForecastRun, run_twin
from pipelines.twin.service import Served, TwinError

STEP = timedelta(minutes=10)
POOL = PoolConfig(
    name="p",
    node_group_id="ng-p",
    gpus_per_node=8,
    min_nodes=0,
    max_nodes=50,
    lead_time=timedelta(minutes=10),
    target_utilisation=1.0,
)


class _FakeService:
    """Stores pushes; serves a run once the forecaster made it; desires demand + 1 node."""

    def __init__(self, stale_reads: int = 0) -> None:
        self.pushed: list[tuple[str, datetime, float]] = []
        self.run: tuple[datetime, str | None] | None = None
        self.stale_reads = stale_reads

    def push(self, samples: Sequence[tuple[str, datetime, float]]) -> None:
        self.pushed.extend(samples)

    def forecast(self, pool: str) -> tuple[datetime, str | None] | None:
        return self.run

    def recommendation(self, pool: str) -> Served | None:
        now = max(ts for _, ts, _ in self.pushed)
        latest = {sid: v for sid, ts, v in self.pushed if ts == now}
        demand = latest["p/allocated_gpus"] + latest["p/queue_gpus"]
        desired = math.ceil(demand / 8) + 1
        if self.stale_reads > 0:
            # The push's decision, from the run before, stamped with the push's time.
            self.stale_reads -= 1
            before = now - STEP
            return Served(desired + 5, 1, now, "predictive", "forecast", {}, forecast_at=before)
        assert self.run is not None
        return Served(desired, 1, now, "predictive", "forecast", {"final": desired}, self.run[0])


class _Forecaster:
    def __init__(self, service: _FakeService, outcome: str = "ok") -> None:
        self.service, self.outcome, self.calls = service, outcome, 0

    def __call__(self, now: datetime) -> ForecastRun:
        self.calls += 1
        self.service.run = (now, "7")
        return ForecastRun(self.outcome, "7", "made")


def _demand(n: int = 12) -> pd.Series:
    rng = np.random.default_rng(7)
    index = pd.date_range("2025-03-03", periods=n, freq=STEP, tz="UTC")
    return pd.Series(rng.uniform(20, 90, n).round(1), index=index)


def test_each_step_pushes_the_readings_forecasts_and_acts_on_the_answer() -> None:
    service = _FakeService()
    forecaster = _Forecaster(service)
    demand = _demand()
    run = run_twin(POOL, demand, client=service, forecaster=forecaster, initial_nodes=12)

    assert forecaster.calls == len(demand)
    assert len(service.pushed) == 3 * len(demand)
    assert {sid for sid, _, _ in service.pushed} == {"p/allocated_gpus", "p/queue_gpus", "p/nodes"}
    assert [s.desired_nodes for s in run.steps] == list(run.result.frame["desired_nodes"])
    assert all(s.forecast_version == "7" for s in run.steps)
    # Pushed readings are what the cluster held: allocated fits on the ready nodes.
    for t, ts in enumerate(demand.index):
        at = {sid: v for sid, when, v in service.pushed if when == ts.to_pydatetime()}
        assert at["p/allocated_gpus"] <= at["p/nodes"] * 8
        assert at["p/allocated_gpus"] + at["p/queue_gpus"] >= demand.iloc[t] - 1e-9


def test_a_partial_forecast_run_stops_the_twin() -> None:
    service = _FakeService()
    with pytest.raises(TwinError, match="complete runs"):
        run_twin(
            POOL,
            _demand(),
            client=service,
            forecaster=_Forecaster(service, outcome="partial"),
            initial_nodes=5,
        )


def test_the_restarter_runs_after_the_named_steps() -> None:
    service = _FakeService()
    done: list[int] = []

    def restart() -> None:
        done.append(len([ts for sid, ts, _ in service.pushed if sid == "p/nodes"]))

    run = run_twin(
        POOL,
        _demand(),
        client=service,
        forecaster=_Forecaster(service),
        initial_nodes=5,
        restart_after=(2, 7),
        restart_mid=(5,),
        restarter=restart,
    )
    # After step 2 (3 pushes), within step 5 (after its push), after step 7.
    assert done == [3, 6, 8]
    assert run.restarts == 3


def test_the_answer_decided_from_the_run_before_is_never_acted_on() -> None:
    # While the service decides on the step's run, a read gets the decision its push
    # made from the run before (stamped with the step's time): the twin waits past it.
    service = _FakeService(stale_reads=3)
    demand = _demand(4)
    run = run_twin(POOL, demand, client=service, forecaster=_Forecaster(service), initial_nodes=5)
    assert service.stale_reads == 0
    assert [s.stages for s in run.steps] == [{"final": s.desired_nodes} for s in run.steps]
