"""The ``train`` job: backtest, select, gate and register on the store's history (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from forecaster.estimator import Estimator
from forecaster.exceptions import ForesightError
from forecaster.gate import check_lines, relative_line, verdict
from forecaster.training import TrainingOutcome, train
from forecaster.types import UID, Progress
from pipelines.config.settings import Settings
from pipelines.config.tracking import tracking_config
from pipelines.executors import make_executor
from pipelines.jobs.history import candidate_models, read_history, training_plan
from pipelines.jobs.report import JobReport
from pipelines.jobs.runtime import borrowed_store, finish, utc_now
from pipelines.store.store import Store

JOB = "train"


def run_train(
    settings: Settings,
    *,
    store: Store | None = None,
    now: datetime | None = None,
    progress: Progress | None = None,
    candidates: Sequence[Estimator] | None = None,
    fast: bool = False,
) -> JobReport:
    """Train on the stored history up to ``now`` and promote the winner if it earns it.

    Args:
        settings: plan, tracking, registry and executor settings.
        store: where the history is; default the settings' store.
        now: history after this instant is ignored (default: everything stored).
        progress: told ``(stage, done, total)`` as the training advances.
        candidates: the model prototypes; default the catalog's for the data's step.
        fast: with the default candidates, the quick set (no MSTL, no boosting) even
            when ``settings.model_set`` is ``full``.

    Returns:
        ``ok`` (or ``partial`` naming series left out or whose backtest windows
        failed) with the run id, version and promotion in ``details``; ``failed``
        when the store, MLflow or the data make training impossible.
    """
    started = utc_now()
    try:
        end = utc_now(now) if now is not None else None
        with borrowed_store(settings, store) as opened:
            history = read_history(opened, settings, end=end)
        plan = training_plan(settings, history.step)
        models = (
            list(candidates)
            if candidates is not None
            else candidate_models(settings, history.step, plan.horizon, fast=fast)
        )
        with make_executor(settings.scheduler.workers, settings.scheduler.dask_address) as executor:
            outcome = train(
                history.frame,
                models,
                plan,
                tracking=tracking_config(settings),
                model_name=settings.registered_model_name,
                models_dir=settings.models_dir,
                run_name="train (scheduled)",
                progress=progress,
                executor=executor,
            )
    except ForesightError as exc:
        return finish(JOB, started, "failed", str(exc))
    problems = dict(history.problems)
    # The summary is what `foresight jobs` shows: it names the checks that failed.
    summary = (
        f"trained on {history.frame[UID].nunique()} series: {settings.registered_model_name} "
        f"version {outcome.version} {verdict(outcome.decision)}"
    )
    details = {
        **_details(outcome),
        "series": int(history.frame[UID].nunique()),
        "models": [model.model_name for model in models],
    }
    return finish(
        JOB, started, "partial" if problems else "ok", summary, problems=problems, details=details
    )


def _details(outcome: TrainingOutcome) -> dict[str, Any]:
    """The JSON-ready record of a training: version, gate checks, selection, peak model."""
    failures, decision = outcome.failures, outcome.decision
    # A candidate failing some windows is not the series' problem: another one wins.
    failed_windows = (
        {str(uid): int(n) for uid, n in failures.groupby(UID).size().items()}
        if not failures.empty
        else {}
    )
    return {
        "run_id": outcome.run_id,
        "version": outcome.version,
        "promoted": outcome.promoted,
        "reason": decision.reason,
        "gate": {check.name: check.status for check in decision.checks},
        "failed_checks": list(decision.failed),
        "gate_checks": check_lines(decision),
        "mase_vs_persistence": relative_line(decision.relative),
        "selection": dict(outcome.selection),
        "failed_backtest_windows": failed_windows,
        "peak": outcome.peak.describe(),
    }
