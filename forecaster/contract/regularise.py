"""Per-series cleaning: dedupe, missing values, snap to the step grid, bounded gap fill."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.contract.parse import as_ns, format_ns, format_step
from forecaster.types import DS, UID, Y

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MAX_GRID_GROWTH = 10
"""A grid may hold at most this many times the rows (plus 1000) before the step is suspect."""


class SeriesProblem(Exception):  # noqa: N818 -- internal signal, never escapes the package
    """One series cannot be cleaned; collected so that one error names them all."""

    def __init__(self, message: str, *, insufficient: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.insufficient = insufficient


@dataclass(frozen=True)
class Grid:
    """A regular time grid: step ``i`` is at ``anchor + i * step_ns`` nanoseconds."""

    anchor: int
    step_ns: int

    def at(self, i: int) -> str:
        """The ISO time of grid index ``i``."""
        return format_ns(self.anchor + i * self.step_ns)


def mode_step(ds: pd.Series | pd.DatetimeIndex) -> pd.Timedelta | None:
    """The most common difference of the distinct timestamps (smallest on a tie)."""
    ns = np.unique(as_ns(ds))
    if len(ns) < 2:
        return None
    diffs, counts = np.unique(np.diff(ns), return_counts=True)
    return pd.Timedelta(int(diffs[np.argmax(counts)]), unit="ns")


def clean_one_series(
    uid: str,
    group: pd.DataFrame,
    *,
    step: pd.Timedelta | None,
    max_gap_steps: int,
    min_length: int,
    nonnegative: bool,
) -> tuple[pd.DataFrame, list[str], pd.Timedelta]:
    """Clean one series' rows (``ds`` parsed to UTC, ``y`` float).

    Returns:
        The clean ``unique_id, ds, y`` rows, the notes of what was changed, the step.

    Raises:
        SeriesProblem: the series cannot be made regular and long enough.
    """
    notes: list[str] = []
    group = _dedupe(group, notes)
    y = _mark_missing(group[Y].to_numpy(dtype=np.float64, copy=True), nonnegative, notes)
    if step is None:
        step = mode_step(group[DS])
        if step is None:
            raise SeriesProblem(
                f"has {len(group)} timestamp(s), so its step is unknown; needs at least "
                f"{max(2, min_length)}. Provide more history or drop the series.",
                insufficient=True,
            )
    grid, start, values = _regularise(as_ns(group[DS]), y, step, notes)
    start, values = _fill_gaps(values, start, grid, max_gap_steps, notes)
    if len(values) < min_length:
        done = f" after cleaning ({'; '.join(notes)})" if notes else ""
        raise SeriesProblem(
            f"has {len(values)} observations{done}; needs at least {min_length}. Provide "
            "more history, raise max_gap_steps, or drop the series.",
            insufficient=True,
        )
    ns = grid.anchor + (start + np.arange(len(values), dtype=np.int64)) * grid.step_ns
    ds = pd.to_datetime(ns, unit="ns", utc=True)
    return pd.DataFrame({UID: uid, DS: ds, Y: values}), notes, step


def _dedupe(group: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    no_ds = group[DS].isna()
    if no_ds.any():
        notes.append(f"dropped {int(no_ds.sum())} rows without a ds")
        group = group.loc[~no_ds]
    if not group[DS].is_monotonic_increasing:
        notes.append("sorted rows by ds")
        # Stable, so "keep the last duplicate" means the last one in input order.
        group = group.sort_values(DS, kind="stable")
    repeated = group[DS].duplicated(keep="last")
    if repeated.any():
        notes.append(f"dropped {int(repeated.sum())} rows with a repeated ds, keeping the last")
        group = group.loc[~repeated]
    return group


def _mark_missing(y: FloatArray, nonnegative: bool, notes: list[str]) -> FloatArray:
    n_nan, n_inf = int(np.isnan(y).sum()), int(np.isinf(y).sum())
    if n_nan or n_inf:
        kinds = [f"{n} {kind}" for n, kind in ((n_nan, "NaN"), (n_inf, "infinite")) if n]
        notes.append(f"treated {' and '.join(kinds)} y values as missing")
        y[~np.isfinite(y)] = np.nan
    if nonnegative:
        negative = np.less(y, 0.0, where=~np.isnan(y), out=np.zeros(len(y), dtype=bool))
        if negative.any():
            notes.append(f"treated {int(negative.sum())} negative y values as missing")
            y[negative] = np.nan
    return y


def _grid_anchor(t: IntArray, step_ns: int) -> int:
    """The grid phase (mod step) that most timestamps already sit on."""
    residues, counts = np.unique(t % step_ns, return_counts=True)
    if len(t) == 1 or counts.max() > 1:
        return int(residues[np.argmax(counts)])
    return 0


def _regularise(
    t: IntArray, y: FloatArray, step: pd.Timedelta, notes: list[str]
) -> tuple[Grid, int, FloatArray]:
    """Snap to the grid, average collisions, insert missing steps (as NaN)."""
    step_ns = int(step.value)
    grid = Grid(anchor=_grid_anchor(t, step_ns), step_ns=step_ns)
    idx = (t - grid.anchor + grid.step_ns // 2) // grid.step_ns
    off_grid = int(np.count_nonzero(grid.anchor + idx * grid.step_ns != t))
    if off_grid:
        notes.append(f"snapped {off_grid} timestamps to the {format_step(step)} grid")
    occupied, inverse = np.unique(idx, return_inverse=True)
    n_grid = int(occupied[-1] - occupied[0] + 1)
    if n_grid > MAX_GRID_GROWTH * len(t) + 1000:
        raise SeriesProblem(
            f"a {format_step(step)} step would spread {len(t)} rows over {n_grid} steps, so the "
            "step looks wrong. Pass freq= with the sampling interval of the series."
        )
    if len(occupied) < len(idx):
        notes.append(f"averaged {len(idx) - len(occupied)} samples into occupied steps")
        finite = np.isfinite(y)
        sums = np.bincount(inverse, weights=np.where(finite, y, 0.0))
        counts = np.bincount(inverse, weights=finite.astype(np.float64))
        y = np.divide(sums, counts, out=np.full(len(occupied), np.nan), where=counts > 0)
    values = np.full(n_grid, np.nan)
    values[occupied - occupied[0]] = y
    if n_grid > len(occupied):
        notes.append(f"inserted {n_grid - len(occupied)} missing steps")
    return grid, int(occupied[0]), values


def _missing_runs(values: FloatArray) -> list[tuple[int, int]]:
    """Return ``(start, stop)`` of every run of NaN in ``values``."""
    missing = np.concatenate([[False], np.isnan(values), [False]])
    edges = np.flatnonzero(np.diff(missing.astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _fill_gaps(
    values: FloatArray, start: int, grid: Grid, max_gap_steps: int, notes: list[str]
) -> tuple[int, FloatArray]:
    """Trim missing ends, cut before the last long gap, interpolate the short ones."""
    finite = np.isfinite(values)
    if not finite.any():
        raise SeriesProblem(
            "has no usable y values (all missing, non-finite or negative). Check the source "
            "of the series or drop it.",
            insufficient=True,
        )
    first = int(np.argmax(finite))
    last = len(values) - 1 - int(np.argmax(finite[::-1]))
    if first:
        notes.append(f"trimmed {first} missing steps at the start")
    if last < len(values) - 1:
        notes.append(f"trimmed {len(values) - 1 - last} missing steps at the end")
    values = values[first : last + 1]
    start += first

    runs = _missing_runs(values)
    long_runs = [(a, b) for a, b in runs if b - a > max_gap_steps]
    if long_runs:
        a, b = long_runs[-1]
        notes.append(
            f"kept only the {len(values) - b} steps after the last gap longer than "
            f"max_gap_steps={max_gap_steps} ({b - a} missing steps from {grid.at(start + a)} "
            f"to {grid.at(start + b - 1)}); dropped the {b} steps before it"
        )
        values = values[b:]
        start += b
        runs = [(x - b, z - b) for x, z in runs if x >= b]
    if runs:
        pos = np.arange(len(values))
        ok = ~np.isnan(values)
        values = np.interp(pos, pos[ok], values[ok])
        filled = sum(z - x for x, z in runs)
        notes.append(
            f"filled {filled} missing steps in {len(runs)} gaps of at most {max_gap_steps} "
            "steps by linear interpolation"
        )
    return start, values
