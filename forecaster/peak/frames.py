"""From the long frame ``unique_id, ds, y`` to one input per target series (docs/forecasting.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError, InsufficientHistoryError
from forecaster.peak.types import FloatArray, Role
from forecaster.types import DS, SERIES_COLUMNS, UID, SeriesId, Y


@dataclass(frozen=True)
class SeriesInput:
    """One target series and its pool's covariates, aligned on the same timestamps."""

    uid: str
    ds: pd.DatetimeIndex
    y: FloatArray
    covariates: Mapping[Role, FloatArray] = field(default_factory=dict)


def collect_inputs(
    frame: pd.DataFrame,
    targets: Sequence[str],
    covariates: Sequence[tuple[str, Role]],
) -> list[SeriesInput]:
    """Return the target series of a long frame with their pools' covariates.

    Args:
        frame: long frame ``unique_id, ds, y`` (validated: one row per id and time).
        targets: signal names to forecast, e.g. ``("demand_gpus",)``.
        covariates: ``(signal, role)`` pairs; the first signal of a role found in a
            pool fills that role.

    Raises:
        DataValidationError: a column is missing, no target series is present, or a
            series repeats a timestamp.
        InsufficientHistoryError: a target series has fewer than 2 values.
    """
    missing = [c for c in SERIES_COLUMNS if c not in frame.columns]
    if missing:
        raise DataValidationError(
            f"the frame lacks columns {missing}; the peak forecaster takes the long frame "
            f"{list(SERIES_COLUMNS)} (rename your columns or use forecaster.contract)."
        )
    groups = {str(uid): g for uid, g in frame.groupby(UID, sort=True, observed=True)}
    by_pool: dict[str, dict[str, pd.DataFrame]] = {}
    ids = {uid: SeriesId.of(uid) for uid in groups}
    for uid, group in groups.items():
        by_pool.setdefault(ids[uid].pool, {})[ids[uid].signal] = group
    wanted = set(targets)
    inputs = [
        _one_input(uid, groups[uid], by_pool[ids[uid].pool], covariates)
        for uid in groups
        if ids[uid].signal in wanted
    ]
    if not inputs:
        signals = sorted({sid.signal for sid in ids.values()})
        raise DataValidationError(
            f"no target series: expected ids '<pool>/<signal>' with a signal in "
            f"{sorted(wanted)}, found signals {signals}. Pass targets= to name yours."
        )
    return inputs


def _one_input(
    uid: str,
    group: pd.DataFrame,
    pool: Mapping[str, pd.DataFrame],
    covariates: Sequence[tuple[str, Role]],
) -> SeriesInput:
    group = group.sort_values(DS)
    ds = pd.DatetimeIndex(group[DS])
    if ds.has_duplicates:
        raise DataValidationError(
            f"series {uid!r} repeats timestamps; validate the frame first "
            "(forecaster.contract.validate_series keeps the last row)."
        )
    if len(ds) < 2:
        raise InsufficientHistoryError(f"series {uid!r} has {len(ds)} value(s); need >= 2.")
    covs: dict[Role, FloatArray] = {}
    for signal, role in covariates:
        if role in covs or signal not in pool:
            continue
        other = pool[signal].drop_duplicates(DS, keep="last").set_index(DS)[Y]
        covs[role] = other.reindex(ds).to_numpy(dtype=np.float64)
    return SeriesInput(uid, ds, group[Y].to_numpy(dtype=np.float64), covs)


def common_step(inputs: Sequence[SeriesInput]) -> pd.Timedelta:
    """Return the one sampling step of all inputs.

    Raises:
        DataValidationError: when series differ in step or are not on a regular grid.
    """
    steps: dict[str, pd.Timedelta] = {}
    for item in inputs:
        diffs = np.diff(item.ds.to_numpy(dtype="datetime64[ns]").astype(np.int64))
        if diffs.size and (diffs != diffs[0]).any():
            raise DataValidationError(
                f"series {item.uid!r} is not on a regular grid; regularise it first "
                "(forecaster.contract.validate_series fills short gaps)."
            )
        steps[item.uid] = pd.Timedelta(int(diffs[0]), unit="ns")
    distinct = sorted(set(steps.values()))
    if len(distinct) > 1:
        raise DataValidationError(
            f"series differ in step ({[str(s) for s in distinct]}); a peak model serves "
            "one step: fit one forecaster per step."
        )
    return distinct[0]
