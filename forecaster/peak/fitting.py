"""The training's peak model: one global fit on the fleet, or the reason there is none.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/fitting.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from forecaster.exceptions import DataValidationError, InsufficientHistoryError
from forecaster.peak.fleet import fleet_frame
from forecaster.peak.model import PeakQuantileForecaster

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeakFit:
    """The training's peak model, or why it has none.

    Attributes:
        model: the fitted global model; None when none could be fitted.
        reason: why ``model`` is None; empty when there is a model.
    """

    model: PeakQuantileForecaster | None
    reason: str = ""
    leads: tuple[int, ...] = ()
    levels: tuple[float, ...] = field(default=())

    def describe(self) -> str:
        """One line for a run tag or a log: what was fitted, or why nothing was."""
        if self.model is None:
            return f"no peak model: {self.reason}"
        rows = sum(self.model.n_train_rows_.values())
        return (
            f"peak model at leads {list(self.leads)} steps, levels {list(self.levels)}, "
            f"{len(self.model.series_)} demand series, {rows:,} training rows"
        )


def fit_peak(
    history: pd.DataFrame,
    leads: Sequence[int],
    levels: Sequence[float],
    params: Mapping[str, Any] | None = None,
) -> PeakFit:
    """Fit the fleet's peak-quantile model on a training's history.

    Args:
        history: the validated long frame the training saw (every stored series; the
            pools' demand and covariates are picked out).
        leads: lead steps to forecast (the pools' lead times in steps).
        levels: quantile levels (the pools' provisioning quantiles and the configured
            levels).
        params: other keyword arguments of ``PeakQuantileForecaster``.

    Returns:
        The fit; without a model (and with the reason logged) when there are no leads,
        no demand series or too little history.
    """
    model = peak_prototype(leads, levels, params)
    lead_steps, quantiles = tuple(model.lead_steps), tuple(model.quantiles)
    if not lead_steps:
        return _none("no pool lead time is configured", lead_steps, quantiles)
    try:
        fleet = fleet_frame(history, model.targets)
        fitted = model.fit(fleet)
    except (InsufficientHistoryError, DataValidationError) as exc:
        return _none(str(exc), lead_steps, quantiles)
    fit = PeakFit(fitted, "", lead_steps, quantiles)
    logger.info("%s", fit.describe())
    return fit


def peak_prototype(
    leads: Sequence[int], levels: Sequence[float], params: Mapping[str, Any] | None = None
) -> PeakQuantileForecaster:
    """The unfitted peak model a training fits: its leads and levels, sorted, and ``params``.

    The final fit (:func:`fit_peak`) and the gate's held-out fit
    (:mod:`forecaster.peak_gate`) build it here, so both fit the same model.
    """
    return PeakQuantileForecaster(
        lead_steps=tuple(sorted({int(lead) for lead in leads})),
        quantiles=tuple(sorted({float(q) for q in levels})),
        **dict(params or {}),
    )


def _none(reason: str, leads: tuple[int, ...], levels: tuple[float, ...]) -> PeakFit:
    logger.warning("no peak model this training: %s", reason)
    return PeakFit(None, reason, leads, levels)
