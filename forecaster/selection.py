"""Model selection per series and the promotion gate of a challenger (docs/forecasting.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.metrics import HORIZON, SCALE
from forecaster.models.combination import MEDIAN
from forecaster.models.guarded import GUARDED
from forecaster.plan import COMBINATION_RULES, ChampionRule
from forecaster.types import CUTOFF, MEAN, MODEL, PERSISTENCE, STEP, UID, Y

DEFAULT_PREFERENCE: Final[tuple[str, ...]] = (
    PERSISTENCE,
    "seasonal_naive",
    "ets",
    "mstl",
    "gbm",
)
"""Simplest first: the order ties are broken in. Unlisted models rank after, by name."""

GateMetric = Literal["mase", "mae", "smape"]


def preference_rank(model: str, preference: Sequence[str] = DEFAULT_PREFERENCE) -> tuple[int, str]:
    """Return a sort key that puts simpler models first."""
    order = {name: i for i, name in enumerate(preference)}
    return (order.get(model, len(order)), model)


def select_per_series(
    scores: pd.DataFrame,
    metric: str = "mase",
    horizon: str | None = None,
    *,
    preference: Sequence[str] = DEFAULT_PREFERENCE,
    rel_tol: float = 0.05,
) -> dict[str, str]:
    """Return the best model of every series in a score frame.

    Args:
        scores: frame from ``score_backtest`` (``unique_id, model, horizon, <metric>``).
        metric: a lower-is-better column of ``scores`` (``mase``, ``smape``,
            ``pinball``, ``pinball_q0.9``...).
        horizon: the horizon label to select on; ``None`` averages the metric over
            every horizon label of a model.
        preference: simplest-first model order for ties (scores within ``rel_tol``).
        rel_tol: relative margin under which two scores count as tied, so the
            simpler model wins (0.05: a model must be more than 5 % better).

    Returns:
        ``{unique_id: model}``. A series whose every score is NaN (e.g. MASE of a
        constant series) gets its most preferred model.
    """
    if metric.startswith("coverage") or metric == "n_windows":
        raise ValueError(f"{metric!r} is not a lower-is-better metric; use mase, smape, pinball")
    missing = {UID, MODEL, metric} - set(scores.columns)
    if missing:
        raise ValueError(f"score frame lacks columns {sorted(missing)}")
    rows = scores
    if horizon is not None:
        rows = scores[scores[HORIZON] == horizon]
        if rows.empty:
            known = sorted(scores[HORIZON].unique()) if HORIZON in scores else []
            raise ValueError(f"no scores for horizon {horizon!r}; known: {known}")
    per_model = rows.groupby([UID, MODEL], sort=True, observed=True)[metric].mean().reset_index()
    choice: dict[str, str] = {}
    for uid, part in per_model.groupby(UID, sort=True):
        ranked = sorted(
            zip(part[MODEL].astype(str), part[metric].astype(float), strict=True),
            key=lambda mv: preference_rank(mv[0], preference),
        )
        finite = [(m, v) for m, v in ranked if np.isfinite(v)]
        if not finite:
            choice[str(uid)] = ranked[0][0]
            continue
        best = min(v for _, v in finite)
        tol = rel_tol * max(abs(best), 1e-12)
        # ``ranked`` is in preference order, so the first near-best is the simplest.
        choice[str(uid)] = next(m for m, v in finite if v - best <= tol)
    return choice


def choose_families(
    rule: ChampionRule,
    scores: pd.DataFrame,
    series: Sequence[str],
    horizon: str | None,
) -> dict[str, str]:
    """Return ``{unique_id: family}`` of the champion under ``rule``.

    ``median`` and ``guarded`` give every series that combination of the families,
    whatever the scores; ``select`` picks per series on the scores
    (:func:`select_per_series`), and a series without scores is left out (the
    champion's default serves it).
    """
    if rule in COMBINATION_RULES:
        return dict.fromkeys(series, default_family(rule))
    if scores.empty:
        return {}
    return select_per_series(scores, horizon=horizon)


def default_family(rule: ChampionRule) -> str:
    """The family of a series the champion was not trained on."""
    return {"median": MEDIAN, "guarded": GUARDED}.get(rule, PERSISTENCE)


class SeriesComparison(NamedTuple):
    """Scores of challenger and champion on one series' shared windows."""

    challenger: float
    champion: float
    n_windows: int


@dataclass(frozen=True)
class PromotionDecision:
    """Whether a challenger replaces the champion, and why.

    Attributes:
        promote: True when the challenger should become champion.
        reason: one sentence a human can act on.
        challenger_score: mean over shared series of the challenger's metric.
        champion_score: the same for the champion; None when there is none.
        per_series: ``{unique_id: SeriesComparison}`` on the shared windows.
    """

    promote: bool
    reason: str
    challenger_score: float | None
    champion_score: float | None
    per_series: Mapping[str, SeriesComparison] = field(default_factory=dict)


def promotion_gate(
    challenger: pd.DataFrame,
    champion: pd.DataFrame | None,
    *,
    metric: GateMetric = "mase",
    min_improvement: float = 0.0,
    scales: pd.DataFrame | None = None,
) -> PromotionDecision:
    """Decide whether ``challenger`` replaces ``champion`` on their shared windows.

    Both frames are backtest frames of one model each (``unique_id, cutoff, step,
    mean, y``; one row per ``unique_id, cutoff, step``). They are inner-joined on
    ``unique_id, cutoff, step``, so only windows both were scored on count; the
    actuals are the challenger's. Per series the metric is averaged over the shared
    windows, then over series. The challenger is promoted only when its score is
    strictly below ``champion_score * (1 - min_improvement)``: a tie keeps the
    champion, avoiding churn.

    Args:
        challenger: backtest frame of the candidate.
        champion: backtest frame of the current champion; None when there is none.
        metric: ``mase`` (per-window MAE / naive scale), ``mae`` or ``smape``.
        min_improvement: the relative gain required, e.g. 0.02 for 2 %.
        scales: ``unique_id, cutoff, scale`` for MASE; pass the challenger's
            ``BacktestResult.scales`` (the shared windows' training data is the same).

    Raises:
        ValueError: when ``metric='mase'`` and ``scales`` is missing.
        DataValidationError: when a frame holds several rows per window step.
    """
    if not 0.0 <= min_improvement < 1.0:
        raise ValueError(f"min_improvement must be in [0, 1), got {min_improvement}")
    if metric == "mase" and scales is None and champion is not None:
        raise ValueError(
            "metric='mase' needs the windows' naive scales: pass scales=BacktestResult.scales "
            "of the challenger's backtest, or use metric='mae' or 'smape'."
        )
    challenger_windows = _one_model(challenger, "challenger")
    if champion is None:
        return PromotionDecision(
            promote=True,
            reason="no champion yet: the challenger becomes the first champion",
            challenger_score=None,
            champion_score=None,
        )
    champion_windows = _one_model(champion, "champion")
    keys = [UID, CUTOFF, STEP]
    joined = challenger_windows[[*keys, MEAN, Y]].merge(
        champion_windows[[*keys, MEAN]], on=keys, suffixes=("_new", "_old")
    )
    if joined.empty:
        return PromotionDecision(
            promote=False,
            reason=(
                "challenger and champion share no backtest window (unique_id, cutoff, step): "
                "they cannot be compared; backtest both on the same data and cutoffs"
            ),
            challenger_score=None,
            champion_score=None,
        )
    return _verdict(_per_series(joined, metric, scales), metric, min_improvement)


def _verdict(
    per_series: dict[str, SeriesComparison], metric: GateMetric, min_improvement: float
) -> PromotionDecision:
    """Compare the mean scores over the series where both are defined, with the margin."""
    finite = {u: c for u, c in per_series.items() if np.isfinite(c.challenger + c.champion)}
    if not finite:
        return PromotionDecision(
            promote=False,
            reason=f"{metric} is undefined on every shared series (constant windows?)",
            challenger_score=None,
            champion_score=None,
            per_series=per_series,
        )
    new = float(np.mean([c.challenger for c in finite.values()]))
    old = float(np.mean([c.champion for c in finite.values()]))
    bar = old * (1.0 - min_improvement)
    n_windows = sum(c.n_windows for c in finite.values())
    where = f"on {len(finite)} series, {n_windows} shared windows"
    gain = (old - new) / old if old > 0.0 else 0.0
    if new < bar:
        reason = (
            f"challenger {metric} {new:.4g} beats champion {old:.4g} {where}: "
            f"{gain:.1%} better, at least the required {min_improvement:.1%}"
        )
        return PromotionDecision(True, reason, new, old, per_series)
    reason = (
        f"challenger {metric} {new:.4g} does not beat champion {old:.4g} {where} by the "
        f"required {min_improvement:.1%} (gain {gain:.1%}); the champion stays"
    )
    return PromotionDecision(False, reason, new, old, per_series)


def _one_model(frame: pd.DataFrame, role: str) -> pd.DataFrame:
    missing = {UID, CUTOFF, STEP, MEAN, Y} - set(frame.columns)
    if missing:
        raise DataValidationError(f"{role} backtest frame lacks columns {sorted(missing)}")
    if frame.duplicated([UID, CUTOFF, STEP]).any():
        models = sorted(frame[MODEL].unique()) if MODEL in frame else []
        raise DataValidationError(
            f"{role} backtest frame has several rows per (unique_id, cutoff, step) "
            f"(models {models}); filter it to the one model being compared."
        )
    return frame


def _per_series(
    joined: pd.DataFrame, metric: GateMetric, scales: pd.DataFrame | None
) -> dict[str, SeriesComparison]:
    y = joined[Y].to_numpy(dtype=np.float64)
    rows = joined[[UID, CUTOFF]].copy()
    for side in ("new", "old"):
        pred = joined[f"{MEAN}_{side}"].to_numpy(dtype=np.float64)
        err = np.abs(y - pred)
        if metric == "smape":
            den = np.abs(y) + np.abs(pred)
            err = np.where(den > 0.0, 200.0 * err / np.where(den > 0.0, den, 1.0), 0.0)
        rows[side] = np.where(np.isfinite(y) & np.isfinite(pred), err, np.nan)
    per_window = rows.groupby([UID, CUTOFF], sort=True, observed=True)[["new", "old"]].mean()
    if metric == "mase" and scales is not None:
        scale = scales.set_index([UID, CUTOFF])[SCALE].reindex(per_window.index)
        scale = scale.where(scale > 0.0)
        per_window = per_window.div(scale, axis=0)
    out: dict[str, SeriesComparison] = {}
    for uid, part in per_window.groupby(level=0, sort=True):
        both = part.dropna()
        out[str(uid)] = SeriesComparison(
            challenger=float(both["new"].mean()) if len(both) else float("nan"),
            champion=float(both["old"].mean()) if len(both) else float("nan"),
            n_windows=len(both),
        )
    return out
