"""What a training writes to its MLflow run: params, both score sets, the gate, the model.

Details: docs/forecasting.md, "Notes from the code", `forecaster/training_run.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from mlflow.models.model import ModelInfo

from forecaster.backtest import BacktestResult
from forecaster.champion import ChampionForecaster
from forecaster.estimator import Estimator
from forecaster.gate import GateDecision, gate_metrics, gate_tags
from forecaster.peak.fitting import PeakFit
from forecaster.plan import TrainingPlan
from forecaster.pool_review import log_pool_review
from forecaster.run_metrics import window_metrics, window_steps
from forecaster.run_summary import summarise
from forecaster.tracking import HORIZON_COLUMN, TrainingRun, describe_pools, summary_metrics
from forecaster.types import DS, MODEL, PERSISTENCE, UID


@dataclass(frozen=True)
class TrainingRecord:
    """What a training scored, for its run.

    Attributes:
        df: the validated long frame trained on.
        result: the whole backtest (selection and held-out windows).
        heldout: the held-out windows' backtest frame.
        selection: ``{unique_id: family}`` of the champion.
        selection_scores: scores on the selection windows.
        scores: scores on the held-out windows.
    """

    plan: TrainingPlan
    candidates: Sequence[Estimator]
    df: pd.DataFrame
    result: BacktestResult
    heldout: pd.DataFrame
    selection: Mapping[str, str]
    selection_scores: pd.DataFrame
    scores: pd.DataFrame


def log_training(
    run: TrainingRun,
    record: TrainingRecord,
    decision: GateDecision,
    champion: ChampionForecaster,
    peak: PeakFit,
) -> ModelInfo:
    """Log a training's params, metrics, artifacts, gate and model into its open run."""
    plan, result = record.plan, record.result
    run.log_params(training_params(plan, record.candidates, record.df))
    run.log_metrics(nested_metrics(record.selection_scores, record.scores, record.selection))
    run.log_metrics(gate_metrics(decision, plan.gated_levels))
    run.log_frame("scores.csv", record.scores)  # held out: what the evaluate job compares with
    run.log_frame("scores_selection.csv", record.selection_scores)
    run.log_table(
        "scores_by_model.json",
        model_table(record.selection_scores, record.scores, record.selection),
    )
    run.log_champions(record.selection)
    run.log_frame("backtest.parquet", result.frame)
    if not result.failures.empty:
        run.log_frame("failures.csv", result.failures)
    rows = champion_rows(record.heldout, record.selection)
    log_pool_review(run, rows, record.scores, record.selection, level=max(plan.levels))
    run.set_tags(gate_tags(decision))
    run.set_tags({"foresight.peak": peak.describe()[:500]})
    log_review(run, record, decision)
    return run.log_forecaster(champion, levels=plan.levels, peak=peak.model)


def log_review(run: TrainingRun, record: TrainingRecord, decision: GateDecision) -> None:
    """Log what a reviewer reads first and the per-window series.

    The ``summary/...`` metrics, ``summary.json`` and ``gate.json`` and the run's
    description (:mod:`forecaster.run_summary`); the champion's and persistence's
    scores per backtest window as ``window/...`` metrics whose ``step`` is the window
    (selection windows first, held-out ones from ``plan.n_windows``).
    """
    plan, result = record.plan, record.result
    steps = window_steps(result.frame, result.heldout_from, plan.n_windows)
    run.log_steps(
        window_metrics(
            result.frame,
            result.scales,
            record.selection,
            steps,
            levels=plan.levels,
            horizons=plan.horizons,
        )
    )
    summary = summarise(
        record.scores, record.selection, decision, levels=plan.levels, served=plan.gated_levels
    )
    run.log_metrics(summary.metrics)
    run.log_table("summary.json", summary.horizons)
    run.log_table("gate.json", summary.checks)
    run.set_description(summary.description)


METRIC_MODELS = ("champion", PERSISTENCE)
"""Models whose score aggregates are run metrics; every family's are in
``scores_by_model.json``. One metric per family, metric and horizon drew a hundred
sections of one-point charts in the MLflow UI and as many columns to choose from."""


def nested_metrics(
    selection_scores: pd.DataFrame,
    heldout_scores: pd.DataFrame,
    selection: Mapping[str, str],
    models: Sequence[str] = METRIC_MODELS,
) -> dict[str, float]:
    """MLflow metrics of both score sets: ``selection/...`` and ``heldout/...``.

    Keys are ``<set>/<metric>/<model>/<horizon>`` for ``models``; ``champion`` is each
    series' selected family. Only ``heldout/`` figures are out of sample.
    """
    out: dict[str, float] = {}
    for prefix, scores in (("selection", selection_scores), ("heldout", heldout_scores)):
        for key, value in summary_metrics(scores, selection).items():
            if key.split("/")[1] in models:
                out[f"{prefix}/{key}"] = value
    return out


def model_table(
    selection_scores: pd.DataFrame, heldout_scores: pd.DataFrame, selection: Mapping[str, str]
) -> pd.DataFrame:
    """Every model's scores, means over series, per score set and horizon (a small table).

    Rows ``set, model, horizon`` (``champion`` included) and the metric columns.
    """
    parts = []
    for name, scores in (("selection", selection_scores), ("heldout", heldout_scores)):
        if scores.empty:
            continue
        chosen = champion_rows(scores, selection)
        both = pd.concat([scores, chosen], ignore_index=True).drop(columns=["n_windows"])
        means = both.groupby([MODEL, HORIZON_COLUMN], sort=True).mean(numeric_only=True)
        parts.append(means.reset_index().assign(set=name))
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts, ignore_index=True)
    return table[["set", *[c for c in table.columns if c != "set"]]]


def default_run_name(df: pd.DataFrame) -> str:
    """Name a run by its pools, series count and last timestamp.

    E.g. ``train a100-train,l4-infer (10 series) to 2025-03-30 23:55Z``: many runs named
    just "train" cannot be told apart in the MLflow UI's run list.
    """
    pools = describe_pools(df[UID].astype(str).unique())
    if len(pools) > 60:
        pools = pools[:57] + "..."
    end = pd.Timestamp(df[DS].max()).strftime("%Y-%m-%d %H:%MZ")
    return f"train {pools} ({df[UID].nunique()} series) to {end}"


def data_span_tags(df: pd.DataFrame) -> dict[str, str]:
    """Tags with the first and last timestamp trained on (searchable in the MLflow UI)."""
    return {
        "foresight.data_start": pd.Timestamp(df[DS].min()).isoformat(),
        "foresight.data_end": pd.Timestamp(df[DS].max()).isoformat(),
    }


def training_params(
    plan: TrainingPlan, candidates: Sequence[Estimator], df: pd.DataFrame
) -> dict[str, object]:
    """The run's params: the plan, the data's size, every family's and the peak's settings."""
    params: dict[str, object] = {
        "horizon": plan.horizon,
        "horizons": dict(plan.horizons),
        "selection_horizon": plan.selection_horizon,
        "champion_rule": plan.champion,
        "n_windows": plan.n_windows,
        "heldout_windows": plan.heldout_windows,
        # The step of the first held-out window in the window/... metrics.
        "heldout_first_step": plan.n_windows,
        "levels": list(plan.levels),
        "max_train": plan.max_train,
        "peak_leads": list(plan.peak_leads),
        "peak_levels": list(plan.peak_levels),
        "gated_levels": list(plan.gated_levels),
        "n_series": df[UID].nunique(),
        "n_rows": len(df),
    }
    for candidate in candidates:
        for key, value in candidate.get_params().items():
            params[f"{candidate.model_name}.{key}"] = value
    for key, value in plan.peak_params.items():
        params[f"peak.{key}"] = value
    return params


def champion_rows(frame: pd.DataFrame, selection: Mapping[str, str]) -> pd.DataFrame:
    """Return the backtest rows of each series' selected model, renamed ``champion``.

    Equal to backtesting a ``ChampionForecaster`` with this selection, since it
    refits the same family with the same parameters on the same windows.
    """
    chosen = frame[frame[MODEL].eq(frame[UID].map(selection))]
    return chosen.assign(**{MODEL: "champion"}).reset_index(drop=True)
