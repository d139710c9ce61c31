"""``foresight backtest --champion``: the trained champion scored walk-forward (docs/jobs.md)."""

from __future__ import annotations

from concurrent.futures import Executor

import pandas as pd

from forecaster.backtest import BacktestResult
from forecaster.champion import FAMILY
from forecaster.metrics import score_backtest
from forecaster.plan import TrainingPlan
from forecaster.procedure import champion_backtest
from forecaster.types import CUTOFF, UID, Progress
from pipelines.config.settings import Settings
from pipelines.dataset import Dataset
from pipelines.jobs.history import candidate_models


def champion_scores(
    settings: Settings,
    dataset: Dataset,
    plan: TrainingPlan,
    families: BacktestResult,
    *,
    executor: Executor | None,
    report: Progress,
) -> pd.DataFrame:
    """Score rows of model ``champion`` at the cutoffs of the families' backtest."""
    cutoffs = {str(uid): list(part[CUTOFF].unique()) for uid, part in families.scales.groupby(UID)}
    walk = champion_backtest(
        dataset.frame,
        candidate_models(settings, dataset.step, plan.horizon),
        plan,
        cutoffs=cutoffs,
        executor=executor,
        progress=lambda done, total: report("champion walk-forward", done, total),
    )
    frame = walk.result.frame.drop(columns=[FAMILY], errors="ignore")
    return score_backtest(frame, families.scales, plan.levels, plan.horizons)
