"""The twin with several pools the same work runs on: the priority expander picks the group.

Run by ``benchmarks/live_loop.py --multi-pool``; details: docs/twin.md, "Notes from the
code", `benchmarks/twin_multipool.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pandas as pd
import yaml

from benchmarks.twin_expander import Priorities, choose, priorities_of_configmap
from benchmarks.twin_groups import Group, GroupCluster, GroupResult
from pipelines.config.pools import PoolConfig
from pipelines.config.pools_file import load_pools
from pipelines.simulate.types import SimPool
from pipelines.store.store import open_store
from pipelines.twin.case import JobForecaster, _window, deploy, long_signals, sample_signals
from pipelines.twin.cluster import Published, Semantics
from pipelines.twin.loop import (
    SERVE_TIMEOUT_S,
    Forecaster,
    _recommendation,
    _samples,
    _served_run,
)
from pipelines.twin.service import (
    ServeProcess,
    ServiceClient,
    TwinError,
    twin_environment,
    wait_until,
)

SPOT_PRICE_SHARE = 0.4
"""The spot group's price per node, as a share of the on-demand list price."""


class GroupClient(ServiceClient):
    """The twin's service client, with the priority-expander ConfigMap read too."""

    def priority_expander(self) -> Priorities | None:
        """``GET /integrations/priority-expander`` (YAML, the ConfigMap ``publish`` applies).

        None while the service does not answer 200.

        Raises:
            ExpanderConfigError: the ConfigMap's ``priorities`` is not what
                cluster-autoscaler reads.
        """
        try:
            answer = self._http.get("/integrations/priority-expander", params={"format": "yaml"})
        except httpx.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        return priorities_of_configmap(yaml.safe_load(answer.text))


@dataclass(frozen=True)
class GroupCase:
    """What a multi-pool twin run replays.

    Attributes:
        pools: the pools, in the order running work fills their nodes.
        history: long frame ``unique_id, ds, y`` of every pool's signals before the window.
        demand: GPUs of work wanted per step (work every pool's nodes can run).
        initial_nodes: ready nodes per pool at the first step.
    """

    name: str
    pools: tuple[PoolConfig, ...]
    history: pd.DataFrame
    demand: pd.Series
    initial_nodes: dict[str, int]

    @property
    def step(self) -> timedelta:
        """The series step."""
        index = pd.DatetimeIndex(self.demand.index)
        return pd.Timedelta(index[1] - index[0]).to_pytimedelta()


def sample_group_case(sample_dir: Path, history: timedelta, steps: int) -> GroupCase:
    """``a100-train``'s work on an on-demand group (its history) and a new spot group."""
    base = {p.name: p for p in load_pools(sample_dir / "pools.yaml").pools}["a100-train"]
    od = base.model_copy(update={"name": "a100-od", "node_group_id": "eks-a100-od-ng"})
    spot = base.model_copy(
        update={
            "name": "a100-spot",
            "node_group_id": "eks-a100-spot-ng",
            "min_nodes": 0,
            "max_nodes": base.max_nodes // 2,
            "cost_per_node_hour": round(base.cost_per_node_hour * SPOT_PRICE_SHARE, 2),
        }
    )
    wide = sample_signals(sample_dir, "a100-train")
    window = _window(pd.DatetimeIndex(wide.index), history, steps)
    before = wide[wide.index < window[0]]
    idle = before[["allocated_gpus", "queue_gpus", "nodes"]] * 0.0
    frame = pd.concat([long_signals(od.name, before), long_signals(spot.name, idle)])
    demand = (wide["allocated_gpus"] + wide["queue_gpus"]).loc[window]
    return GroupCase(
        name="sample_a100_od_spot",
        pools=(od, spot),
        history=frame.reset_index(drop=True),
        demand=demand.rename("a100/demand_gpus"),
        initial_nodes={od.name: int(wide["nodes"].loc[window[0]]), spot.name: 0},
    )


@dataclass(frozen=True)
class GroupStep:
    """One step of a multi-pool run: each pool's answer and the ConfigMap's preference.

    Attributes:
        preferred: the node group the served ConfigMap prefers among all groups.
    """

    ts: pd.Timestamp
    desired: dict[str, int]
    preferred: str | None


def run_groups(
    case: GroupCase,
    *,
    client: GroupClient,
    forecaster: Forecaster,
    semantics: Semantics = "autoscaler",
) -> tuple[GroupResult, list[GroupStep]]:
    """Drive the running service in lock-step with the groups over the case's demand.

    Raises:
        TwinError: a forecast run was not ``ok``, or the service did not serve a step.
    """
    index = pd.DatetimeIndex(case.demand.index)
    groups = [
        Group(p.name, p.node_group_id, SimPool.of(p, case.step), case.initial_nodes[p.name])
        for p in case.pools
    ]
    cluster = GroupCluster(groups, index, semantics)
    ids = [p.node_group_id for p in case.pools]
    steps: list[GroupStep] = []
    for t, stamp in enumerate(index):
        ts = stamp.to_pydatetime()
        cluster.begin(t)
        readings = cluster.arrive(t, float(case.demand.iloc[t]))
        client.push([s for p in case.pools for s in _samples(p, ts, readings[p.name])])
        made = forecaster(ts)
        if made.outcome != "ok":
            raise TwinError(f"the forecast job at {ts} ended {made.outcome!r} ({made.summary})")
        for pool in case.pools:
            wait_until(
                _served_run(client, pool.name, ts, made.version),
                SERVE_TIMEOUT_S,
                f"the service to serve the run made at {ts} for {pool.name}",
            )
        served = {p.name: _recommendation(client, p.name, ts) for p in case.pools}
        priorities = _configmap(client, ts)
        published = {n: Published(s.desired_nodes, s.headroom_pods) for n, s in served.items()}
        cluster.act(t, published, priorities)
        cluster.serve(t)
        steps.append(
            GroupStep(
                stamp,
                {n: s.desired_nodes for n, s in served.items()},
                choose(priorities, ids),
            )
        )
    return cluster.result(), steps


def _configmap(client: GroupClient, ts: datetime) -> Priorities:
    """The served ConfigMap's priorities (polled until the service answers)."""
    got: list[Priorities] = []

    def read() -> bool:
        answer = client.priority_expander()
        if answer is not None:
            got.append(answer)
        return answer is not None

    wait_until(read, SERVE_TIMEOUT_S, f"the priority-expander ConfigMap at {ts}")
    return got[-1]


def run_group_case(
    case: GroupCase, workdir: Path, *, semantics: Semantics = "autoscaler"
) -> tuple[GroupResult, list[GroupStep]]:
    """Deploy the case in ``workdir``, run the twin against ``foresight serve``, stop it."""
    config, settings = deploy(case.pools, case.history, case.step, workdir)
    process = ServeProcess(config, workdir, twin_environment())
    client = GroupClient(process.base)
    with open_store(settings.store_url) as store:
        try:
            process.start(client)
            return run_groups(
                case, client=client, forecaster=JobForecaster(settings, store), semantics=semantics
            )
        finally:
            process.stop()
            client.close()
