"""A training's peak checks: its peak model against the buffer and the champion's.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak_gate.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from forecaster.exceptions import DataValidationError, InsufficientHistoryError
from forecaster.gate import CHALLENGER, INCUMBENT, Check, CheckName, compare_peak
from forecaster.peak.fitting import PeakFit, peak_prototype
from forecaster.peak.heldout import BUFFER, heldout_forecasts, peak_losses
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.plan import TrainingPlan, recent_history

logger = logging.getLogger(__name__)

PeakChecks = tuple[Check, Check, pd.DataFrame]
"""``peak_vs_buffer``, ``peak_vs_incumbent`` and the losses they compared."""


def peak_checks(
    df: pd.DataFrame,
    plan: TrainingPlan,
    heldout_from: Mapping[str, pd.Timestamp],
    fit: PeakFit,
    incumbent: PeakQuantileForecaster | None,
    *,
    has_champion: bool,
) -> PeakChecks:
    """Score the training's peak model on the held-out windows and run both peak checks.

    Args:
        df: the training's validated long frame.
        plan: its plan (``peak_leads``, ``peak_levels``, ``served_levels``, ``peak_params``).
        heldout_from: each series' first held-out cutoff (``BacktestResult.heldout_from``).
        fit: the training's final peak fit (on all the history).
        incumbent: the current champion's peak model; None when it has none.
        has_champion: whether there is a current champion at all.
    """
    served = plan.gated_levels
    empty = pd.DataFrame()
    if not plan.peak_leads:
        why = "no pool lead time is configured: no peak model is served"
        return _skip("peak_vs_buffer", why), _skip("peak_vs_incumbent", why), empty
    if fit.model is None:
        if incumbent is not None:
            lost = Check(
                "peak_vs_incumbent",
                "failed",
                f"the champion serves a peak model and this version has none ({fit.reason})",
            )
        else:
            lost = _skip("peak_vs_incumbent", f"neither has a peak model ({fit.reason})")
        return _skip("peak_vs_buffer", f"no peak model: {fit.reason}"), lost, empty
    prototype = peak_prototype(plan.peak_leads, plan.peak_levels, plan.peak_params)
    history = recent_history(df, plan.max_train)
    try:
        challenger = heldout_forecasts(prototype, history, heldout_from)
    except (InsufficientHistoryError, DataValidationError) as exc:
        why = (
            f"the peak model could not be scored on held-out windows: {exc} Keep more "
            "history (max_train_days) or hold out fewer windows (heldout_windows)"
        )
        failed = Check("peak_vs_buffer", "failed", why)
        return failed, Check("peak_vs_incumbent", "failed", why), empty
    forecasts = {CHALLENGER: challenger}
    versus = _incumbent_forecasts(prototype, incumbent, history, heldout_from, challenger)
    if isinstance(versus, pd.DataFrame):
        forecasts[INCUMBENT] = versus
    losses = peak_losses(history, forecasts, served)
    buffer = compare_peak("peak_vs_buffer", losses, served, BUFFER)
    if isinstance(versus, pd.DataFrame):
        return buffer, compare_peak("peak_vs_incumbent", losses, served, INCUMBENT), losses
    why = versus if has_champion else "no champion yet"
    return buffer, _skip("peak_vs_incumbent", why), losses


def _incumbent_forecasts(
    prototype: PeakQuantileForecaster,
    incumbent: PeakQuantileForecaster | None,
    history: pd.DataFrame,
    heldout_from: Mapping[str, pd.Timestamp],
    challenger: pd.DataFrame,
) -> pd.DataFrame | str:
    """The champion's peak forecasts on the held-out origins, or why there are none."""
    if incumbent is None:
        return "the champion has no peak model"
    params = {
        **incumbent.get_params(),
        "lead_steps": prototype.lead_steps,
        "quantiles": prototype.quantiles,
    }
    if _normal(params) == _normal(prototype.get_params()):
        return challenger
    try:
        return heldout_forecasts(PeakQuantileForecaster(**params), history, heldout_from)
    except (InsufficientHistoryError, DataValidationError, TypeError) as exc:
        # TypeError: a champion pickled by another version of the class.
        logger.warning("the champion's peak model cannot be refitted: %s", exc)
        return f"the champion's peak model cannot be refitted on these windows: {exc}"


def _normal(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters with sequences as tuples, so a list and a tuple of the same compare equal."""
    return {k: _tuple(v) for k, v in params.items()}


def _tuple(value: Any) -> Any:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(_tuple(v) for v in value)
    return value


def _skip(name: CheckName, why: str) -> Check:
    return Check(name, "skipped", why)
