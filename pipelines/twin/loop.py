"""The lock-step driver: the simulated clock is the only clock (docs/twin.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

import pandas as pd

from pipelines.config.pools import PoolConfig
from pipelines.simulate.result import SimResult
from pipelines.simulate.types import SimPool
from pipelines.twin.cluster import Published, Reading, Semantics, SimCluster
from pipelines.twin.service import Served, TwinError, wait_until

SERVE_TIMEOUT_S: Final = 120.0
"""How long the service may take to serve a stored run (its refresh runs every 5 s)."""


@dataclass(frozen=True)
class ForecastRun:
    """What the forecast job reported for one step.

    Attributes:
        outcome: ``ok``, ``partial``, ``failed`` or ``skipped``.
        version: the model version it forecast with, None when it failed.
    """

    outcome: str
    version: str | None
    summary: str


class Forecaster(Protocol):
    """Runs the forecast job for one simulated time."""

    def __call__(self, now: datetime) -> ForecastRun:
        """Run it with ``now`` as the forecast's ``generated_at``."""
        ...


class Service(Protocol):
    """The running service as the twin uses it (:class:`~.service.ServiceClient`)."""

    def push(self, samples: Sequence[tuple[str, datetime, float]]) -> None:
        """Store samples ``(series id, time, value)``."""
        ...

    def forecast(self, pool: str) -> tuple[datetime, str | None] | None:
        """The served forecast run of ``pool``: its ``generated_at`` and model version."""
        ...

    def recommendation(self, pool: str) -> Served | None:
        """The pool's current recommendation, None while there is none."""
        ...


class Restarter(Protocol):
    """Kills the service with SIGKILL and starts it again on the same store."""

    def __call__(self) -> None:
        """Kill and restart; return once the new process answers."""
        ...


@dataclass(frozen=True)
class StepRecord:
    """What happened at one step, for the run's log and the checks.

    Attributes:
        headroom_pods: placeholder pods recommended.
        mode: ``predictive`` or ``reactive``.
        term: the chain's term that set the number.
        forecast_version: the model version of the forecast decided on.
        stages: the decision chain's stages as the service explained them.
    """

    ts: pd.Timestamp
    desired_nodes: int
    headroom_pods: int
    mode: str
    term: str
    forecast_version: str | None
    stages: Mapping[str, int]


@dataclass(frozen=True)
class TwinRun:
    """The outcome of a twin run.

    Attributes:
        result: the figures, with the replay's accounting.
        steps: what the service recommended at each step.
        restarts: how often the service was killed and started again.
    """

    result: SimResult
    steps: list[StepRecord]
    restarts: int


Progress = Callable[[int, int, pd.Timestamp, SimCluster], None]
"""Told ``(steps done, steps in all, the step's time, the cluster)`` after each step."""


def _no_progress(done: int, total: int, ts: pd.Timestamp, cluster: SimCluster) -> None:
    """Report nothing."""


def _served_run(
    client: Service, pool: str, ts: datetime, version: str | None
) -> Callable[[], bool]:
    """True once the service's forecast of ``pool`` is the run made at ``ts``."""

    def check() -> bool:
        made = client.forecast(pool)
        return made is not None and made == (ts, version)

    return check


def _recommendation(client: Service, pool: str, ts: datetime) -> Served:
    """The recommendation at ``ts`` decided from the run made at ``ts`` (polled until there)."""
    got: list[Served] = []

    def decided() -> bool:
        answer = client.recommendation(pool)
        if (
            answer is not None
            and answer.generated_at == ts
            and (answer.forecast_at == ts or answer.mode == "reactive")
        ):
            got.append(answer)
            return True
        return False

    wait_until(decided, SERVE_TIMEOUT_S, f"the recommendation of {pool} at {ts}")
    return got[-1]


def _decided(
    client: Service, forecaster: Forecaster, pool: str, ts: datetime
) -> tuple[ForecastRun, Served]:
    """Run the step's forecast job, wait until it is served, read the decision on it."""
    made = forecaster(ts)
    if made.outcome != "ok":
        raise TwinError(
            f"the forecast job at {ts} ended {made.outcome!r} ({made.summary}); the twin "
            "acts only on complete runs"
        )
    wait_until(
        _served_run(client, pool, ts, made.version),
        SERVE_TIMEOUT_S,
        f"the service to serve the forecast run made at {ts}",
    )
    return made, _recommendation(client, pool, ts)


def _samples(pool: PoolConfig, ts: datetime, reading: Reading) -> list[tuple[str, datetime, float]]:
    """The readings as the pool's series, stamped ``ts``."""
    return [
        (pool.series_id("allocated_gpus"), ts, reading.allocated_gpus),
        (pool.series_id("queue_gpus"), ts, reading.queue_gpus),
        (pool.series_id("nodes"), ts, float(reading.nodes)),
    ]


def run_twin(
    pool: PoolConfig,
    demand: pd.Series,
    *,
    client: Service,
    forecaster: Forecaster,
    initial_nodes: int,
    semantics: Semantics = "replay",
    restart_after: Sequence[int] = (),
    restart_mid: Sequence[int] = (),
    restarter: Restarter | None = None,
    progress: Progress = _no_progress,
) -> TwinRun:
    """Drive the running service in lock-step with a simulated pool over ``demand``.

    Args:
        pool: the pool the service decides for (as in its pools file).
        demand: GPUs of work wanted per step (UTC index, the service's step).
        forecaster: runs the forecast job for a step's time.
        initial_nodes: ready nodes at step 0.
        semantics: how the cluster applies a recommendation (:mod:`.cluster`).
        restart_after: step numbers after which the service is killed (SIGKILL) and
            started again on the same store.
        restart_mid: step numbers at which the service is killed and started again
            between the push of the step's samples (which it decided on) and the
            step's forecast run.
        restarter: does the kill and restart; needed when a restart is asked for.

    Raises:
        TwinError: a forecast run was not ``ok``, or the service did not serve a step.
    """
    if (restart_after or restart_mid) and restarter is None:
        raise ValueError("restart_after and restart_mid need a restarter")
    index = pd.DatetimeIndex(demand.index)
    step = (index[1] - index[0]).to_pytimedelta()
    cluster = SimCluster(SimPool.of(pool, step), index, initial_nodes, semantics)
    steps: list[StepRecord] = []
    restarts = 0
    values = demand.to_numpy(dtype=float)
    for t, stamp in enumerate(index):
        ts = stamp.to_pydatetime()
        cluster.begin(t)
        reading = cluster.arrive(t, float(values[t]))
        client.push(_samples(pool, ts, reading))
        if t in restart_mid and restarter is not None:
            restarter()
            restarts += 1
        made, served = _decided(client, forecaster, pool.name, ts)
        cluster.act(t, Published(served.desired_nodes, served.headroom_pods))
        cluster.serve(t)
        steps.append(
            StepRecord(
                stamp,
                served.desired_nodes,
                served.headroom_pods,
                served.mode,
                served.term,
                made.version,
                dict(served.stages),
            )
        )
        progress(t + 1, len(index), stamp, cluster)
        if t in restart_after and restarter is not None:
            restarter()
            restarts += 1
    return TwinRun(cluster.result(), steps, restarts)
