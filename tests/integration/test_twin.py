"""The closed-loop twin, short: the real ``foresight serve`` driven step by step.

On the committed sample's ``a100-train`` pool (7 days of history, then 10 five-minute
steps): a champion is trained once (both runs copy that deployment),
``foresight serve --clock replay`` runs with its
scheduler, and the twin pushes the simulated cluster's readings, runs the forecast
job for each step and acts on the recommendation. Checked: every step was decided
from the complete run made at that step; the figures match the offline replay of
the same case within 3 %; and a run whose service is killed with SIGKILL twice (after a
step, and within a step, between the push it decided on and the step's forecast run)
and started again on the same store decides exactly what the uninterrupted run did.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from pipelines.twin.case import TwinCase, prepare, sample_case
from pipelines.twin.run import CaseReport, run_case

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
STEPS = 10
KILL_AFTER = 4
KILL_MID = 7


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> tuple[TwinCase, Path]:
    """The case, and its deployment trained once (each run copies it)."""
    case = sample_case(SAMPLE, "a100-train", timedelta(days=7), STEPS)
    template = tmp_path_factory.mktemp("twin-template")
    prepare(case, template)
    return case, template


@pytest.fixture(scope="module")
def uninterrupted(
    deployed: tuple[TwinCase, Path], tmp_path_factory: pytest.TempPathFactory
) -> CaseReport:
    case, template = deployed
    return run_case(case, tmp_path_factory.mktemp("runs") / "straight", template=template)


@pytest.mark.timeout(600)
def test_every_step_is_decided_from_the_run_made_at_that_step(
    uninterrupted: CaseReport,
) -> None:
    steps = uninterrupted.twin.steps
    assert len(steps) == STEPS
    assert [s.ts for s in steps] == list(uninterrupted.case.demand.index)
    assert {s.mode for s in steps} == {"predictive"}
    assert all(s.forecast_version for s in steps)


@pytest.mark.timeout(600)
def test_the_twin_matches_the_offline_replay_within_3_percent(
    uninterrupted: CaseReport,
) -> None:
    twin, replay = uninterrupted.twin.result, uninterrupted.replay
    assert twin.node_hours == pytest.approx(replay.node_hours, rel=0.03)
    assert twin.waiting_gpu_hours == pytest.approx(replay.waiting_gpu_hours, rel=0.03, abs=1.0)
    assert twin.frame["demand_gpus"].sum() == pytest.approx(replay.frame["demand_gpus"].sum())


@pytest.mark.timeout(600)
def test_a_kill_9_mid_run_loses_no_decision_state(
    deployed: tuple[TwinCase, Path], uninterrupted: CaseReport, tmp_path: Path
) -> None:
    case, template = deployed
    killed = run_case(
        case,
        tmp_path / "killed",
        restart_after=(KILL_AFTER,),
        restart_mid=(KILL_MID,),
        template=template,
    )
    assert killed.twin.restarts == 2
    assert [s.desired_nodes for s in killed.twin.steps] == [
        s.desired_nodes for s in uninterrupted.twin.steps
    ]
    assert killed.twin.result.summary() == uninterrupted.twin.result.summary()
