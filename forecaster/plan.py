"""What a training evaluates and on which data: the plan shared by training and its replays.

Details: docs/forecasting.md, "Notes from the code", `forecaster/plan.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from forecaster.cutoffs import Refits
from forecaster.types import UID, Levels

ChampionRule = Literal["median", "guarded", "select"]
"""How the champion forecasts a series: ``median`` of every family's forecast,
``guarded`` (persistence unless a family's own out-of-sample errors beat it, see
:mod:`forecaster.models.guarded`), or the one family ``select`` picks on the selection
windows (the median and the guarded choice are among them)."""

COMBINATION_RULES: frozenset[str] = frozenset({"median", "guarded"})
"""Rules that give every series one combination of the families: nothing to select."""


@dataclass(frozen=True)
class TrainingPlan:
    """What a training evaluates and how.

    Attributes:
        horizon: steps ahead every candidate is backtested for.
        horizons: labelled horizons the scores are reported at (``{"1h": 12}``).
        selection_horizon: the label models are selected and gated on (the one that
            matters to the policy, about a node's lead time); ``None`` averages all.
        n_windows: rolling-origin cutoffs selection is made on.
        max_train: most recent observations each fit sees.
        heldout_windows: later cutoffs, unseen by selection, that the champion is
            scored and gated on (at least 1).
        champion: ``median`` (every series forecast by the median of the families; no
            selection), ``guarded`` (persistence unless a family's calibration errors
            beat it; no selection) or ``select`` (one family per series, picked on the
            selection windows).
        peak_leads: lead steps of the global peak-quantile model the training also
            fits (the pools' lead times in steps); empty: no peak model.
        peak_levels: quantile levels of the peak model (the pools' provisioning
            quantiles and ``levels``).
        served_levels: the levels pools provision at, where the promotion gate scores
            the peak model (:mod:`forecaster.gate`); empty: every ``peak_levels``.
        peak_params: other hyperparameters of the peak model
            (``PeakQuantileForecaster``'s keyword arguments); empty: its defaults.
        heldout_refits: ``first`` (default): under ``median`` and ``guarded`` the
            candidates are fitted at a series' first held-out cutoff and updated to the
            later ones, as the forecast job advances a champion between trainings;
            ``each``: refitted at every held-out window (twice the fits).
    """

    horizon: int
    horizons: Mapping[str, int]
    selection_horizon: str | None
    n_windows: int
    levels: Levels
    max_train: int | None = None
    heldout_windows: int = 2
    champion: ChampionRule = "guarded"
    peak_leads: tuple[int, ...] = ()
    peak_levels: Levels = ()
    served_levels: Levels = ()
    peak_params: Mapping[str, Any] = field(default_factory=dict)
    heldout_refits: Refits = "first"

    def __post_init__(self) -> None:
        if self.heldout_windows < 1 or self.n_windows < 1:
            raise ValueError(
                f"a training plan needs n_windows >= 1 and heldout_windows >= 1, got "
                f"{self.n_windows} and {self.heldout_windows}: the champion must be scored "
                "on windows its selection never saw"
            )
        unknown = sorted(set(self.served_levels) - set(self.peak_levels))
        if unknown:
            raise ValueError(
                f"served_levels {unknown} are not among peak_levels {list(self.peak_levels)}: "
                "the peak model must forecast every level the gate scores it at"
            )

    @property
    def gated_levels(self) -> tuple[float, ...]:
        """The levels the gate scores the peak model at: ``served_levels``, else all."""
        return tuple(self.served_levels or self.peak_levels)


def recent_history(df: pd.DataFrame, max_train: int | None) -> pd.DataFrame:
    """Return each series' last ``max_train`` observations (all when ``None``)."""
    if max_train is None:
        return df
    return df.groupby(UID, sort=False, observed=True).tail(max_train).reset_index(drop=True)
