"""The served peak bound's online constants, chosen with the scored family left out.

The online layer (:mod:`forecaster.peak.online`) has constants that were chosen on
benchmark windows: ACI's step size, the mix's sharpness and half-life, the snap to
demand and the lowest level held at the level demand returns to after an idle spell.
Chosen on the traces they are then scored on, they flatter the score. Here every
one of them is chosen on a small grid by the peak benchmark's objective, the mean
over cells (series x lead x level) of the served bound's pinball loss over the
trailing-day buffer's, computed on the *tune* windows of the other families only
(:mod:`benchmarks.families`); the family is then scored on its holdout window with
the constants its fold chose.

The raw model forecasts are computed once (their fits never see another family:
one model per fleet); the grid re-runs only the online layer, the same computation
as :class:`forecaster.peak.online.OnlinePeak` over a continuous run (a test in
``tests/forecaster/peak/test_online.py`` holds the two equal), split where it can be:
ACI per step size, the mix per (step size, sharpness, half-life), and the snap and
the held level, which feed nothing back, over each mix.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from benchmarks.peak_batch import calibrate, combine_bounds
from benchmarks.progress import Counter
from forecaster.peak.calibration import TUNED_GAMMA, calibrates
from forecaster.peak.calibration import WINDOW as ACI_WINDOW
from forecaster.peak.combine import TUNED_ETA, TUNED_HALFLIFE, TUNED_SNAP
from forecaster.peak.online import EXPERTS, Expert, Mixed, finish
from forecaster.peak.recovery import MIN_LEVEL
from forecaster.peak.types import FloatArray


@dataclass(frozen=True)
class Constants:
    """The online layer's tuned constants (see :class:`forecaster.peak.online.OnlinePeak`)."""

    gamma: float
    eta: float
    halflife: float
    snap: float
    min_level: float

    def as_dict(self) -> dict[str, float]:
        """The constants by name."""
        return asdict(self)


SERVED: Final = Constants(TUNED_GAMMA, TUNED_ETA, TUNED_HALFLIFE, TUNED_SNAP, MIN_LEVEL)
"""The constants :mod:`forecaster.peak` serves now."""


def axis(served: float, *others: float) -> tuple[float, ...]:
    """The values of one constant tried: the served one first, then the others not equal to it."""
    return (served, *(v for v in others if v != served))


@dataclass(frozen=True)
class Grid:
    """The values tried per constant; each axis starts with the served value.

    ``min_level`` 1.0 never holds a level (every level is below it).
    """

    gamma: tuple[float, ...] = field(default_factory=lambda: axis(TUNED_GAMMA, 0.002, 0.005))
    eta: tuple[float, ...] = field(default_factory=lambda: axis(TUNED_ETA, 30.0, 100.0, 300.0))
    halflife: tuple[float, ...] = field(
        default_factory=lambda: axis(TUNED_HALFLIFE, 72.0, 144.0, 576.0)
    )
    snap: tuple[float, ...] = field(default_factory=lambda: axis(TUNED_SNAP, 0.0, 0.5, 1.0, 2.0))
    min_level: tuple[float, ...] = field(default_factory=lambda: axis(MIN_LEVEL, 0.5, 0.75, 1.0))

    def __len__(self) -> int:
        return (
            len(self.gamma)
            * len(self.eta)
            * len(self.halflife)
            * len(self.snap)
            * len(self.min_level)
        )

    def as_dict(self) -> dict[str, list[float]]:
        """The values per constant."""
        return {name: list(values) for name, values in asdict(self).items()}


WITHOUT_SEASONAL: Final[tuple[Expert, ...]] = tuple(
    e for e in EXPERTS if e not in ("yesterday", "last_week")
)
"""The experts before the seasonal references (the ablation beside the served mix)."""


@dataclass(frozen=True)
class Track:
    """One scored series and lead: its origins, in order, and what the online layer reads.

    Arrays shaped ``(origin,)`` or ``(origin, level)``; ``experts`` holds the
    references' bounds by expert name (``reference``, ``time_of_day``,
    ``yesterday``, ``last_week``); ``windows`` the origins of each scored window.
    """

    uid: str
    family: str
    lead: int
    levels: tuple[float, ...]
    last: FloatArray
    scale: FloatArray
    peak: FloatArray
    raw: FloatArray
    returning: FloatArray
    experts: Mapping[str, FloatArray]
    windows: Mapping[str, npt.NDArray[np.bool_]] = field(default_factory=dict)


def with_aci(track: Track, gamma: float, every_level: bool = False) -> FloatArray:
    """The calibrated expert: the raw bound plus ACI's offset (raw where ACI cannot)."""
    out = np.array(track.raw, dtype=np.float64)
    for k, q in enumerate(track.levels):
        if every_level or calibrates(q, ACI_WINDOW):
            out[:, k] = calibrate(
                track.raw[:, k], track.peak, track.scale, q, track.lead, gamma, ACI_WINDOW
            )
    return out


def mixed(
    track: Track,
    calibrated_bound: FloatArray,
    eta: float,
    halflife: float,
    experts: Sequence[Expert] = EXPERTS,
) -> FloatArray:
    """The experts' online mix per origin and level, before :func:`served`."""
    bounds = {"calibrated": calibrated_bound, "raw": track.raw, **track.experts}
    out = np.empty_like(track.raw)
    for k, q in enumerate(track.levels):
        columns = [bounds[name][:, k] for name in experts]
        out[:, k] = combine_bounds(columns, track.peak, track.scale, q, track.lead, eta, halflife)
    return out


def served(track: Track, mix: FloatArray, snap: float, min_level: float) -> FloatArray:
    """The served bounds from a mix: :func:`forecaster.peak.online.finish` per origin."""
    parts = Mixed(mix, track.last, track.scale, track.experts["reference"])
    levels = np.asarray(track.levels)
    return finish(parts, levels, track.returning, snap=snap, min_level=min_level)


def pinball_mean(peak: FloatArray, bound: FloatArray, level: float) -> float:
    """Mean pinball loss of ``bound`` as the ``level`` quantile of ``peak`` where both are known."""
    ok = np.isfinite(peak) & np.isfinite(bound)
    diff = peak[ok] - bound[ok]
    return float(np.mean(np.maximum(level * diff, (level - 1.0) * diff))) if ok.any() else np.nan


def grid_scores(
    tracks: Sequence[Track],
    grid: Grid,
    experts: Sequence[Expert] = EXPERTS,
    every_level: bool = False,
    progress: Counter | None = None,
) -> pd.DataFrame:
    """Pinball ratio of the served bound to the trailing-day buffer, per constants and cell.

    Returns:
        One row per constants, series, lead, level and window: the constants' fields,
        ``uid, family, lead, q, window, pinball, reference, ratio``.
    """
    rows: list[dict[str, Any]] = []
    reference = {
        (i, k, w): pinball_mean(t.peak[m], t.experts["reference"][m, k], q)
        for i, t in enumerate(tracks)
        for k, q in enumerate(t.levels)
        for w, m in t.windows.items()
    }
    mixes = list(itertools.product(grid.gamma, grid.eta, grid.halflife))
    for done, (gamma, eta, halflife) in enumerate(mixes, start=1):
        for i, track in enumerate(tracks):
            mix = mixed(track, with_aci(track, gamma, every_level), eta, halflife, experts)
            for snap, min_level in itertools.product(grid.snap, grid.min_level):
                bounds = served(track, mix, snap, min_level)
                constants = Constants(gamma, eta, halflife, snap, min_level).as_dict()
                for k, q in enumerate(track.levels):
                    for window, mask in track.windows.items():
                        loss = pinball_mean(track.peak[mask], bounds[mask, k], q)
                        ref = reference[(i, k, window)]
                        rows.append(
                            {
                                **constants,
                                "uid": track.uid,
                                "family": track.family,
                                "lead": track.lead,
                                "q": q,
                                "window": window,
                                "pinball": loss,
                                "reference": ref,
                                "ratio": loss / ref if ref > 0 else np.nan,
                            }
                        )
        if progress is not None:
            progress(done, len(mixes))
    return pd.DataFrame(rows)


CONSTANT_NAMES: Final = tuple(Constants.__dataclass_fields__)


def objective(scores: pd.DataFrame, exclude: str | None = None, window: str = "tune") -> pd.Series:
    """Mean pinball ratio per constants on ``window``, the ``exclude`` family left out.

    Indexed by the constants in the grid's order (served values first).
    """
    rows = scores[(scores["window"] == window) & np.isfinite(scores["ratio"])]
    if exclude is not None:
        rows = rows[rows["family"] != exclude]
    if rows.empty:
        raise ValueError(f"no {window} cells to choose on without family {exclude!r}")
    return rows.groupby(list(CONSTANT_NAMES), sort=False)["ratio"].mean()


def choose(scores: pd.DataFrame, exclude: str | None = None, window: str = "tune") -> Constants:
    """The constants of least :func:`objective` (the first in grid order on a tie)."""
    values = objective(scores, exclude, window)
    best = values.index[int(np.argmin(values.to_numpy()))]
    return Constants(**dict(zip(CONSTANT_NAMES, map(float, best), strict=True)))


def folds(scores: pd.DataFrame, window: str = "tune") -> dict[str, Constants]:
    """Per family, the constants chosen on the other families' ``window`` cells."""
    return {f: choose(scores, f, window) for f in sorted(scores["family"].unique())}
