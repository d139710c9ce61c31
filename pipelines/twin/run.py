"""One twin run end to end: deploy the case, drive the service, replay the same case.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/run.py`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipelines.simulate.result import SimResult
from pipelines.store.store import Store, open_store
from pipelines.twin.case import JobForecaster, TwinCase, copy_deployment, prepare
from pipelines.twin.cluster import Semantics
from pipelines.twin.compare import StoredRunPolicy, agreement, compare
from pipelines.twin.loop import Progress, TwinRun, run_twin
from pipelines.twin.offline import replay_on_cluster
from pipelines.twin.service import ServeProcess, ServiceClient, twin_environment, wait_until
from policy.state import StabilisationState


@dataclass(frozen=True)
class CaseReport:
    """A twin run and the replay of the same case.

    Attributes:
        semantics: the cluster's consumer semantics.
        replay: the offline replay with the twin's stored forecast runs, on the same
            cluster model and semantics.
        replay_desired: the replay's desired nodes per step.
        replay_stages: the replay's decision stages per step.
    """

    case: TwinCase
    semantics: Semantics
    twin: TwinRun
    replay: SimResult
    replay_desired: pd.Series
    replay_stages: dict[pd.Timestamp, dict[str, int]]

    @property
    def twin_desired(self) -> pd.Series:
        """The service's desired nodes per step."""
        return pd.Series(
            [s.desired_nodes for s in self.twin.steps], index=[s.ts for s in self.twin.steps]
        )

    def rows(self) -> list[dict[str, float | str]]:
        """The figures side by side (:func:`.compare.compare`)."""
        return compare(self.twin.result, self.replay)

    def disagreements(self) -> list[dict[str, Any]]:
        """The steps where the service and the replay desired different nodes, with why.

        Each names the step, and the decision chain's stages of both (which stage
        differs says what separated them: the window maximum, the need, the floor).
        """
        return [
            {
                "ts": str(step.ts),
                "twin": dict(step.stages),
                "replay": self.replay_stages.get(step.ts, {}),
            }
            for step in self.twin.steps
            if self.replay_desired.get(step.ts) != step.desired_nodes
        ]

    def as_json(self) -> dict[str, Any]:
        """The report as plain data."""
        share = agreement(self.twin_desired, self.replay_desired)
        return {
            "case": self.case.name,
            "pool": self.case.pool.name,
            "semantics": self.semantics,
            "steps": len(self.case.demand),
            "start": str(self.case.demand.index[0]),
            "end": str(self.case.demand.index[-1]),
            "step_minutes": self.case.step.total_seconds() / 60,
            "quantile": self.case.pool.quantile,
            "lead_minutes": self.case.pool.lead_time.total_seconds() / 60,
            "restarts": self.twin.restarts,
            "desired_agreement": None if math.isnan(share) else share,
            "modes": pd.Series([s.mode for s in self.twin.steps]).value_counts().to_dict(),
            "figures": self.rows(),
            "disagreements": self.disagreements(),
            "twin": self.twin.result.summary(),
            "replay": self.replay.summary(),
            "accounting": self.replay.accounting(),
        }


def run_case(
    case: TwinCase,
    workdir: Path,
    *,
    semantics: Semantics = "replay",
    restart_after: Sequence[int] = (),
    restart_mid: Sequence[int] = (),
    progress: Progress | None = None,
    template: Path | None = None,
) -> CaseReport:
    """Deploy ``case`` in ``workdir``, run the twin against ``foresight serve``, replay it.

    ``template``: a deployment of the same case that :func:`.case.prepare` laid out and
    nothing ran on, copied instead of training again (:func:`.case.copy_deployment`).
    """
    if template is None:
        config, settings = prepare(case, workdir)
    else:
        config, settings = copy_deployment(template, workdir)
    process = ServeProcess(config, workdir, twin_environment())
    client = ServiceClient(process.base)

    def restart() -> None:
        process.kill()
        process.start(client)

    with open_store(settings.store_url) as store:
        try:
            process.start(client)
            initial = _initial_state(client, store, case)
            run = run_twin(
                case.pool,
                case.demand,
                client=client,
                forecaster=JobForecaster(settings, store),
                initial_nodes=case.initial_nodes,
                semantics=semantics,
                restart_after=restart_after,
                restart_mid=restart_mid,
                restarter=restart,
                **({"progress": progress} if progress is not None else {}),
            )
        finally:
            process.stop()
            client.close()
        versions = {s.ts: s.forecast_version for s in run.steps if s.forecast_version}
        policy = StoredRunPolicy(case.pool, store, versions, initial)
        replay = replay_on_cluster(
            case.demand,
            case.pool,
            policy,
            initial_nodes=case.initial_nodes,
            semantics=semantics,
        )
    desired = pd.Series(policy.decisions)
    return CaseReport(case, semantics, run, replay, desired, policy.stages)


def _initial_state(client: ServiceClient, store: Store, case: TwinCase) -> StabilisationState:
    """The stabilisation state the service holds before the first step."""
    name = case.pool.name
    wait_until(
        lambda: client.recommendation(name) is not None, 120.0, f"a first decision of {name}"
    )
    stored = store.state.get(name)
    return StabilisationState() if stored is None else StabilisationState.from_dict(stored)
