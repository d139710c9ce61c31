"""Fetched samples to storable ones, per the series contract, one series at a time.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/cleaning.py`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.types import DS, UID, Y


@dataclass(frozen=True)
class Cleaned:
    """The storable samples of a fetch and what was done to each series.

    Attributes:
        frame: ``unique_id, ds, y`` with finite, allowed values and unique timestamps.
        notes: per series, what was removed (only series that were changed).
        rejected: per series without a single storable sample, why.
    """

    frame: pd.DataFrame
    notes: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)


def clean_samples(frame: pd.DataFrame) -> Cleaned:
    """Drop what the contract calls missing, and dedupe, naming each series touched.

    No series can be negative: every Foresight signal counts or is a percentage.

    Args:
        frame: a source's long frame ``unique_id, ds, y`` (``ds`` tz-aware).
    """
    if frame.empty:
        return Cleaned(frame.loc[:, [UID, DS, Y]].copy())
    notes: dict[str, str] = {}
    rejected: dict[str, str] = {}
    kept = []
    for key, group in frame.groupby(UID, sort=True):
        uid = str(key)
        values = pd.to_numeric(group[Y], errors="coerce").to_numpy(dtype=np.float64)
        missing = ~np.isfinite(values)
        negative = ~missing & (values < 0)
        duplicated = group[DS].duplicated(keep="last").to_numpy()
        keep = ~(missing | negative | duplicated)
        said = []
        if duplicated.any():
            said.append(f"{int(duplicated.sum())} repeated timestamps (kept the last value)")
        if missing.any():
            said.append(f"{int(missing.sum())} NaN or infinite values")
        if negative.any():
            said.append(f"{int(negative.sum())} negative values of a count")
        if said:
            notes[uid] = "dropped " + ", ".join(said)
        if not keep.any():
            rejected[uid] = (
                f"no storable sample among {len(group)} fetched ({notes.get(uid, 'empty')}); "
                "check the series' query and its exporter"
            )
            continue
        clean = group.loc[keep, [UID, DS, Y]].copy()
        clean[Y] = values[keep]
        kept.append(clean)
    if not kept:
        return Cleaned(frame.iloc[0:0].loc[:, [UID, DS, Y]].copy(), notes, rejected)
    out = pd.concat(kept, ignore_index=True).sort_values([UID, DS], kind="stable")
    return Cleaned(out.reset_index(drop=True), notes, rejected)
