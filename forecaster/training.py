"""One training: backtest the candidates, choose per series, gate, register, promote.

The champion forecasts each series with the median of the families by default
(``plan.champion == "median"``, see :mod:`forecaster.models.combination`); its
backtest rows are the median of the families' rows in each window, so it is scored
without fitting any family twice, and only the held-out windows are backtested (there
is nothing to select). ``select`` picks one family (or the median) per series on the
selection windows instead.

Scores are nested: the backtest has earlier *selection* windows and later *held-out*
windows (:func:`forecaster.backtest.nested_cutoffs`). Selection sees only the
selection windows; the champion's reported scores and the promotion gate use only the
held-out ones, which selection never saw (neither as training data nor as actuals).
MLflow gets both, as ``selection/<metric>/<model>/<horizon>`` and
``heldout/<metric>/<model>/<horizon>``, so a reviewer cannot mistake one for the other.

The training also fits one global peak-quantile model on every pool's demand
(:mod:`forecaster.peak.fitting`) at the plan's ``peak_leads`` and ``peak_levels``, and
stores it inside the same logged model as the champion, so the registered version,
its ``champion`` alias and its last-known-good copy carry both. Too little history
means no peak model (the reason is logged and tagged ``foresight.peak``).

The order of the side effects is what keeps a crash harmless: the run is logged
first, the new version is registered next, the ``champion`` alias moves only after
the gate said so, and the last-known-good copy is replaced last (atomically). A
training killed at any point leaves the previous champion serving.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from forecaster.backtest import (
    BacktestResult,
    Estimator,
    same_estimator,
    split_heldout,
)
from forecaster.champion import ChampionForecaster
from forecaster.exceptions import TrackingError
from forecaster.fleet import nested_fleet_backtest
from forecaster.metrics import score_backtest
from forecaster.models.combination import with_median_rows
from forecaster.models.guarded import (
    calibrated,
    guarded_members,
    with_combinations,
    with_guarded_rows,
)
from forecaster.peak.fitting import PeakFit, fit_peak
from forecaster.plan import COMBINATION_RULES, TrainingPlan, recent_history
from forecaster.pool_review import log_pool_review
from forecaster.registry import (
    champion_version,
    export_last_known_good,
    load_champion,
    promote,
    register,
)
from forecaster.selection import (
    PromotionDecision,
    choose_families,
    default_family,
    promotion_gate,
)
from forecaster.tracking import (
    TrackingConfig,
    describe_pools,
    start_training_run,
    summary_metrics,
)
from forecaster.types import DS, MODEL, UID, Progress

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
        peak: the global peak-quantile model stored with the version, or why there is
            none (``peak.model`` None).
    """

    run_id: str
    selection: dict[str, str]
    scores: pd.DataFrame
    decision: PromotionDecision
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
        tracking: the MLflow tracking server and registry.
        model_name: the registered model's name.
        models_dir: where the last-known-good copy lives.
        run_name: the MLflow run's display name; default :func:`default_run_name`
            (what was trained and up to when), so runs tell apart in the MLflow UI.
        progress: called as stages advance.
        executor: fans the backtests and the champion's fit out per series.
    """
    report = progress or (lambda stage, done, total: None)
    # A plain backtest unless a candidate is joint (global_gbm): see forecaster.fleet.
    result = nested_fleet_backtest(
        calibrated(candidates),  # rows carry the errors the guarded choice is built from
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
    )
    names = [c.model_name for c in candidates]
    frame = with_guarded_rows(with_median_rows(result.frame, names), guarded_members(names))
    result = replace(result, frame=frame)
    chosen, heldout = split_heldout(result)
    selection_scores = score_backtest(chosen.frame, chosen.scales, plan.levels, plan.horizons)
    scores = score_backtest(heldout.frame, heldout.scales, plan.levels, plan.horizons)
    series = [str(uid) for uid in df[UID].unique()]
    selection = choose_families(
        plan.champion, selection_scores, series, horizon=plan.selection_horizon
    )
    challenger_rows = champion_rows(heldout.frame, selection)
    incumbent_rows = _incumbent_rows(
        df,
        plan,
        heldout.frame,
        with_combinations(candidates),
        tracking=tracking,
        model_name=model_name,
        models_dir=models_dir,
        executor=executor,
    )
    decision = promotion_gate(challenger_rows, incumbent_rows, scales=heldout.scales)
    report("fit", 0, 1)
    champion = ChampionForecaster(
        selection, with_combinations(candidates), default=default_family(plan.champion)
    ).fit(recent_history(df, plan.max_train), executor=executor)
    # The same history the champion is fitted on: both describe the data up to now.
    peak = fit_peak(recent_history(df, plan.max_train), plan.peak_leads, plan.peak_levels)
    report("fit", 1, 1)

    with start_training_run(
        tracking,
        run_name=run_name or default_run_name(df),
        tags={"foresight.model_name": model_name, **data_span_tags(df)},
    ) as run:
        run.log_params(_params(plan, candidates, df))
        run.log_metrics(nested_metrics(selection_scores, scores, selection))
        run.log_frame("scores.csv", scores)  # held out: what the evaluate job compares with
        run.log_frame("scores_selection.csv", selection_scores)
        run.log_champions(selection)
        run.log_frame("backtest.parquet", result.frame)
        if not result.failures.empty:
            run.log_frame("failures.csv", result.failures)
        log_pool_review(run, challenger_rows, scores, selection, level=max(plan.levels))
        run.set_tags({"foresight.gate": decision.reason[:500]})
        run.set_tags({"foresight.peak": peak.describe()[:500]})
        info = run.log_forecaster(champion, levels=plan.levels, peak=peak.model)
        run_id = run.run_id
    version = register(info.model_uri, model_name, tracking=tracking, run_id=run_id)
    promoted = promote(model_name, version, decision, tracking=tracking)
    if promoted:
        export_last_known_good(
            info.model_uri,
            models_dir,
            {"name": model_name, "version": version, "run_id": run_id},
            tracking=tracking,
        )
    report("register", 1, 1)
    return TrainingOutcome(
        run_id=run_id,
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


def nested_metrics(
    selection_scores: pd.DataFrame, heldout_scores: pd.DataFrame, selection: Mapping[str, str]
) -> dict[str, float]:
    """MLflow metrics of both score sets: ``selection/...`` and ``heldout/...``.

    Keys are ``<set>/<metric>/<model>/<horizon>``; ``<model>`` includes ``champion``
    (each series' selected family). Only ``heldout/`` figures are out of sample.
    """
    out: dict[str, float] = {}
    for prefix, scores in (("selection", selection_scores), ("heldout", heldout_scores)):
        for key, value in summary_metrics(scores, selection).items():
            out[f"{prefix}/{key}"] = value
    return out


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


def champion_rows(frame: pd.DataFrame, selection: Mapping[str, str]) -> pd.DataFrame:
    """Return the backtest rows of each series' selected model, renamed ``champion``.

    Equal to backtesting a ``ChampionForecaster`` with this selection, since it
    refits the same family with the same parameters on the same windows.
    """
    chosen = frame[frame[MODEL].eq(frame[UID].map(selection))]
    return chosen.assign(**{MODEL: "champion"}).reset_index(drop=True)


def _incumbent_rows(
    df: pd.DataFrame,
    plan: TrainingPlan,
    heldout: pd.DataFrame,
    prototypes: Mapping[str, Estimator],
    *,
    tracking: TrackingConfig,
    model_name: str,
    models_dir: Path,
    executor: Executor | None,
) -> pd.DataFrame | None:
    """The current champion's rows on the same held-out windows; ``None`` when there is none.

    When every family it uses is one of this training's prototypes with the same
    hyperparameters, its rows are those families' rows in ``heldout`` (the training's
    own backtest, the median included): the same fits, made once. Otherwise it is
    backtested on those windows.
    """
    try:
        if champion_version(model_name, tracking=tracking) is None:
            return None
        loaded = load_champion(
            model_name, models_dir=models_dir, tracking=tracking, refresh_last_known_good=False
        )
    except TrackingError as exc:
        logger.warning("no current champion to compare with: %s", exc)
        return None
    incumbent = loaded.model
    if not isinstance(incumbent, ChampionForecaster):
        return None
    # Series the old champion never saw are served by its default, as they would be.
    prototype = incumbent.unfitted()
    default = prototype.default or "persistence"
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
    )
    return result.frame


def _params(
    plan: TrainingPlan, candidates: Sequence[Estimator], df: pd.DataFrame
) -> dict[str, object]:
    params: dict[str, object] = {
        "horizon": plan.horizon,
        "horizons": dict(plan.horizons),
        "selection_horizon": plan.selection_horizon,
        "champion_rule": plan.champion,
        "n_windows": plan.n_windows,
        "heldout_windows": plan.heldout_windows,
        "levels": list(plan.levels),
        "max_train": plan.max_train,
        "n_series": df[UID].nunique(),
        "n_rows": len(df),
    }
    for candidate in candidates:
        for key, value in candidate.get_params().items():
            params[f"{candidate.model_name}.{key}"] = value
    return params
