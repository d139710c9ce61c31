"""One training: backtest the candidates, choose per series, gate, register, promote.

Details: docs/forecasting.md, "Notes from the code", `forecaster/training.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from forecaster.backtest import BacktestResult, split_heldout
from forecaster.champion import ChampionForecaster
from forecaster.cutoffs import Refits
from forecaster.estimator import Estimator, same_estimator
from forecaster.exceptions import TrackingError
from forecaster.fleet import nested_fleet_backtest
from forecaster.gate import GateDecision, guard_check, point_check
from forecaster.last_known_good import export_last_known_good
from forecaster.metrics import relative_mase, score_backtest
from forecaster.models.combination import with_median_rows
from forecaster.models.guarded import (
    calibrated,
    guarded_members,
    with_combinations,
    with_guarded_rows,
)
from forecaster.peak.fitting import PeakFit, fit_peak
from forecaster.peak_gate import peak_checks
from forecaster.plan import COMBINATION_RULES, TrainingPlan, recent_history
from forecaster.registry import (
    LoadedModel,
    champion_version,
    load_champion,
    promote,
    register,
)
from forecaster.selection import (
    choose_families,
    default_family,
    promotion_gate,
)
from forecaster.tracking import TrackingConfig, TrainingRun, start_training_run
from forecaster.training_run import (
    TrainingRecord,
    champion_rows,
    data_span_tags,
    default_run_name,
    log_training,
    nested_metrics,
)
from forecaster.types import MODEL, PERSISTENCE, UID, Progress

__all__ = [
    "Progress",
    "TrainingOutcome",
    "TrainingPlan",  # lives in forecaster.plan; re-exported from its old home
    "champion_rows",
    "data_span_tags",
    "default_run_name",
    "nested_metrics",
    "recent_history",
    "train",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingOutcome:
    """What one training did.

    Attributes:
        scores: held-out scores (windows selection never saw), per series and model.
        selection_scores: the scores selection was made on (earlier windows).
        decision: the promotion gate's checks (:class:`~forecaster.gate.GateDecision`);
            ``decision.failed`` names those that held the version back.
        peak: the global peak-quantile model stored with the version, or why there is
            none (``peak.model`` None).
    """

    run_id: str
    selection: dict[str, str]
    scores: pd.DataFrame
    decision: GateDecision
    version: str
    promoted: bool
    champion: ChampionForecaster
    failures: pd.DataFrame = field(repr=False)
    selection_scores: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    peak: PeakFit = field(repr=False, default_factory=lambda: PeakFit(None, "not fitted"))


def train(
    df: pd.DataFrame,
    candidates: Sequence[Estimator],
    plan: TrainingPlan,
    *,
    tracking: TrackingConfig,
    model_name: str,
    models_dir: Path,
    run_name: str | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> TrainingOutcome:
    """Train on a validated series frame and promote the winner if it earns it.

    Args:
        df: validated long frame (see ``forecaster.contract.validate_series``).
        candidates: unfitted model prototypes; names must be unique.
        plan: horizons, windows and levels.
        models_dir: where the last-known-good copy lives.
        run_name: the MLflow run's display name; default :func:`default_run_name`
            (what was trained and up to when), so runs tell apart in the MLflow UI.
        progress: called as stages advance.
        executor: fans the backtests and the champion's fit out per series.
    """
    report = progress or (lambda stage, done, total: None)
    # The run opens before the backtest and closes after registration, so its
    # duration is the training's, and a training that raises ends it FAILED.
    with start_training_run(
        tracking,
        run_name=run_name or default_run_name(df),
        tags={"foresight.model_name": model_name, **data_span_tags(df)},
    ) as run:
        return _train_in_run(
            run,
            df,
            candidates,
            plan,
            tracking=tracking,
            model_name=model_name,
            models_dir=models_dir,
            report=report,
            executor=executor,
        )


def _train_in_run(
    run: TrainingRun,
    df: pd.DataFrame,
    candidates: Sequence[Estimator],
    plan: TrainingPlan,
    *,
    tracking: TrackingConfig,
    model_name: str,
    models_dir: Path,
    report: Progress,
    executor: Executor | None,
) -> TrainingOutcome:
    """Everything :func:`train` does, inside its open run (see there)."""
    result = _backtest(candidates, df, plan, report, executor)
    chosen, heldout = split_heldout(result)
    selection_scores = score_backtest(chosen.frame, chosen.scales, plan.levels, plan.horizons)
    scores = score_backtest(heldout.frame, heldout.scales, plan.levels, plan.horizons)
    series = [str(uid) for uid in df[UID].unique()]
    selection = choose_families(
        plan.champion, selection_scores, series, horizon=plan.selection_horizon
    )
    report("fit", 0, 1)
    champion = ChampionForecaster(
        selection, with_combinations(candidates), default=default_family(plan.champion)
    ).fit(recent_history(df, plan.max_train), executor=executor)
    # The same history the champion is fitted on: both describe the data up to now.
    peak = fit_peak(
        recent_history(df, plan.max_train), plan.peak_leads, plan.peak_levels, plan.peak_params
    )
    report("fit", 1, 1)
    incumbent, first = _incumbent(model_name, tracking=tracking, models_dir=models_dir)
    decision = _judge(
        df, plan, heldout, scores, selection, candidates, incumbent, peak, executor=executor
    )
    decision = replace(decision, first=first)
    record = TrainingRecord(
        plan, candidates, df, result, heldout.frame, selection, selection_scores, scores
    )
    info = log_training(run, record, decision, champion, peak)
    version = register(info.model_uri, model_name, tracking=tracking, run_id=run.run_id)
    promoted = promote(model_name, version, decision, tracking=tracking)
    if promoted:
        export_last_known_good(
            info.model_uri,
            models_dir,
            {"name": model_name, "version": version, "run_id": run.run_id},
            tracking=tracking,
        )
    run.set_tags({"foresight.model_version": version})
    report("register", 1, 1)
    return TrainingOutcome(
        run_id=run.run_id,
        selection=selection,
        scores=scores,
        decision=decision,
        version=version,
        promoted=promoted,
        champion=champion,
        failures=result.failures,
        selection_scores=selection_scores,
        peak=peak,
    )


def _backtest(
    candidates: Sequence[Estimator],
    df: pd.DataFrame,
    plan: TrainingPlan,
    report: Progress,
    executor: Executor | None,
) -> BacktestResult:
    """The nested backtest of the candidates, with the median's and guarded choice's rows."""
    # A plain backtest unless a candidate is joint (global_gbm): see forecaster.fleet.
    fitted = scored_candidates(plan, candidates)
    result = nested_fleet_backtest(
        calibrated(fitted),  # rows carry the errors the guarded choice is built from
        df,
        horizon=plan.horizon,
        n_windows=plan.n_windows,
        heldout_windows=plan.heldout_windows,
        # A combination selects nothing: only the held-out windows (scores, gate) are fitted.
        roles="heldout" if plan.champion in COMBINATION_RULES else "all",
        levels=plan.levels,
        max_train=plan.max_train,
        progress=lambda done, total: report("backtest", done, total),
        executor=executor,
        refits=_refits(plan),
    )
    names = [c.model_name for c in fitted]
    frame = result.frame
    if len(fitted) == len(candidates):  # the median of a subset would not be the median
        frame = with_median_rows(frame, names)
    frame = with_guarded_rows(frame, guarded_members(names))
    return replace(result, frame=frame)


def _refits(plan: TrainingPlan) -> Refits:
    """The plan's held-out refits where only held-out windows are fitted, else ``each``."""
    return plan.heldout_refits if plan.champion in COMBINATION_RULES else "each"


def scored_candidates(plan: TrainingPlan, candidates: Sequence[Estimator]) -> list[Estimator]:
    """The candidates a training backtests: under ``guarded``, the choice's members only.

    The guarded champion's rows are built from its members' rows alone, and the gate
    compares it with persistence (a member): fitting the other families (ETS and MSTL
    are most of a training's CPU) would only add their scores to the run.
    """
    if plan.champion != "guarded":
        return list(candidates)
    members = set(guarded_members([c.model_name for c in candidates]))
    return [c for c in candidates if c.model_name in members] or list(candidates)


def _judge(
    df: pd.DataFrame,
    plan: TrainingPlan,
    heldout: BacktestResult,
    scores: pd.DataFrame,
    selection: Mapping[str, str],
    candidates: Sequence[Estimator],
    incumbent: LoadedModel | None,
    peak: PeakFit,
    *,
    executor: Executor | None,
) -> GateDecision:
    """Run every check of the gate (:mod:`forecaster.gate`) on the held-out windows."""
    # Only what this backtest has rows of can stand for the incumbent's families.
    backtested = set(heldout.frame[MODEL]) if not heldout.frame.empty else set()
    prototypes = {n: p for n, p in with_combinations(candidates).items() if n in backtested}
    rows = _incumbent_rows(df, plan, heldout.frame, prototypes, incumbent, executor=executor)
    point = promotion_gate(champion_rows(heldout.frame, selection), rows, scales=heldout.scales)
    relative = relative_mase(scores, selection)
    buffer, versus, losses = peak_checks(
        df,
        plan,
        heldout.heldout_from,
        peak,
        incumbent.peak if incumbent is not None else None,
        has_champion=incumbent is not None,
    )
    checks = (point_check(point), guard_check(relative), buffer, versus)
    return GateDecision(point, checks, relative, losses)


def _incumbent(
    model_name: str, *, tracking: TrackingConfig, models_dir: Path
) -> tuple[LoadedModel | None, bool]:
    """The current champion from the registry (None when there is none or it is
    unreadable), and whether the registry said there is none (the first version)."""
    try:
        if champion_version(model_name, tracking=tracking) is None:
            return None, True
        return load_champion(
            model_name, models_dir=models_dir, tracking=tracking, refresh_last_known_good=False
        ), False
    except TrackingError as exc:
        logger.warning("no current champion to compare with: %s", exc)
        return None, False


def _incumbent_rows(
    df: pd.DataFrame,
    plan: TrainingPlan,
    heldout: pd.DataFrame,
    prototypes: Mapping[str, Estimator],
    loaded: LoadedModel | None,
    *,
    executor: Executor | None,
) -> pd.DataFrame | None:
    """The current champion's rows on the same held-out windows; ``None`` when there is none."""
    if loaded is None:
        return None
    incumbent = loaded.model
    if not isinstance(incumbent, ChampionForecaster):
        return None
    # Series the old champion never saw are served by its default, as they would be.
    prototype = incumbent.unfitted()
    default = prototype.default or PERSISTENCE
    used = {*incumbent.selection.values(), default}
    if all(
        family in prototypes
        and same_estimator(incumbent.candidates.get(family), prototypes[family])
        for family in used
    ):
        families = {
            str(uid): incumbent.selection.get(str(uid), default) for uid in df[UID].unique()
        }
        return champion_rows(heldout, families)
    # A joint family in the incumbent learns its fleet per window, as the training's did.
    result: BacktestResult = nested_fleet_backtest(
        [prototype],
        df,
        horizon=plan.horizon,
        n_windows=plan.n_windows,
        heldout_windows=plan.heldout_windows,
        roles="heldout",
        levels=plan.levels,
        max_train=plan.max_train,
        executor=executor,
        refits=_refits(plan),
    )
    return result.frame
