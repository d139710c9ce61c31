"""Cost against waiting: the decision-quality ratios and the frontier plot (docs/simulate.md)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pipelines.simulate.result import SimResult

TITLE_CHARS = 95
"""Characters per title line that fit the 9-inch figure at the medium font size."""

Point = tuple[float, float]
"""(x, y) of one replay on a frontier plot."""

_COLORS = ("tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:cyan", "tab:olive")
_MARKERS = {
    "reactive": ("tab:orange", "o"),
    "reactive-spread": ("tab:red", "D"),
    "static": ("tab:gray", "s"),
    "oracle": ("k", "*"),
    "reference": ("tab:blue", "^"),
    "reference-seasonal": ("tab:cyan", "v"),
    "foresight": ("tab:green", "X"),
}


def gap_closed(wait_reactive: float, wait_policy: float, wait_oracle: float) -> float:
    """Return the share of reactive's excess waiting over the oracle a policy removes."""
    span = wait_reactive - wait_oracle
    if span <= 1e-12:
        return math.nan
    return (wait_reactive - wait_policy) / span


def cost_ratio(policy: SimResult, oracle: SimResult) -> float:
    """Return GPU-hours provisioned by ``policy`` over the oracle's (NaN if it has none)."""
    if oracle.gpu_hours_provisioned <= 0:
        return math.nan
    return policy.gpu_hours_provisioned / oracle.gpu_hours_provisioned


def frontier(points: Sequence[Point]) -> list[Point]:
    """Return the upper-left hull of ``(cost, benefit)`` points: the best benefit at each cost.

    A point stays only if no cheaper-or-equal point reaches at least its benefit.
    """
    best: list[Point] = []
    for x, y in sorted(p for p in points if math.isfinite(p[0]) and math.isfinite(p[1])):
        if not best or y > best[-1][1]:
            best.append((x, y))
    return best


def benefit_at(points: Sequence[Point], cost: float) -> float:
    """Return the best benefit a family reaches at ``cost`` or less (NaN if none)."""
    reachable = [y for x, y in frontier(points) if x <= cost + 1e-12]
    return max(reachable) if reachable else math.nan


def interpolated(points: Sequence[Point], cost: float) -> float:
    """Return the family's benefit at ``cost`` on its frontier, linearly interpolated.

    The frontier is made monotone first (a costlier point never counts for less than a
    cheaper one); NaN outside the family's cost range, where it says nothing.
    """
    hull = frontier(points)
    if not hull or not hull[0][0] - 1e-12 <= cost <= hull[-1][0] + 1e-12:
        return math.nan
    xs = np.array([p[0] for p in hull])
    ys = np.array([p[1] for p in hull])
    return float(np.interp(cost, xs, ys))


def gap_at_cost(points: Sequence[Point], cost: float) -> float:
    """Return the best benefit a family reaches at ``cost``, for an equal-cost comparison.

    Inside the family's cost range: its frontier linearly interpolated at ``cost``.
    Above it: the frontier's best (a costlier budget never buys less). Below it: NaN,
    the family has no setting that cheap, which a comparison counts as a loss.
    """
    hull = frontier(points)
    if not hull or cost < hull[0][0] - 1e-12:
        return math.nan
    if cost >= hull[-1][0]:
        return hull[-1][1]
    return interpolated(points, cost)


def points_beaten(subject: Sequence[Point], other: Sequence[Point]) -> tuple[int, int]:
    """Count ``other``'s points that ``subject`` matches or beats at the same cost.

    Every finite point of ``other`` is compared, at its cost, with ``subject``'s
    frontier (:func:`gap_at_cost`). A point cheaper than anything ``subject`` offers is
    compared and lost: a family with no cheap setting cannot beat one that has it.

    Returns:
        ``(beaten, compared)``.
    """
    beaten = compared = 0
    for x, y in other:
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        compared += 1
        mine = gap_at_cost(subject, x)
        beaten += int(math.isfinite(mine) and mine >= y - 1e-12)
    return beaten, compared


def plot_frontier(
    families: Mapping[str, Sequence[Point]],
    singles: Mapping[str, Point],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    labels: Mapping[str, Sequence[str]] | None = None,
) -> Figure:
    """Plot each family's points joined by a line, and single policies as markers.

    Args:
        families: family name -> its points in knob order (e.g. quantile ascending).
        singles: policy name -> its one point (reactive, static, oracle...).
        xlabel: the x axis (e.g. GPU-hours provisioned, or the cost ratio).
        ylabel: the y axis (e.g. waiting GPU-hours, or the gap closed).
        labels: family name -> one annotation per point (e.g. ``q0.9``).

    Returns:
        A figure on an Agg canvas (save with :func:`forecaster.plotting.save_png`).
    """
    fig = Figure(figsize=(9.0, 6.0), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    everything = [p for pts in families.values() for p in pts] + list(singles.values())
    finite = [p for p in everything if math.isfinite(p[0]) and math.isfinite(p[1])]
    span_x = (max(p[0] for p in finite) - min(p[0] for p in finite)) if finite else 1.0
    span_y = (max(p[1] for p in finite) - min(p[1] for p in finite)) if finite else 1.0
    placed: list[tuple[float, float]] = []
    for i, (name, points) in enumerate(families.items()):
        if not points:
            continue
        xs, ys = np.array([p[0] for p in points]), np.array([p[1] for p in points])
        color = _COLORS[i % len(_COLORS)]
        ax.plot(xs, ys, marker=".", color=color, linewidth=1.2, label=name)
        texts = (labels or {}).get(name, ())
        for j, (text, x, y) in enumerate(zip(texts, xs, ys, strict=False)):
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            # Skip a label that would sit on another one: the line and legend say the rest.
            near = any(
                abs(x - px) < 0.06 * (span_x or 1.0) and abs(y - py) < 0.05 * (span_y or 1.0)
                for px, py in placed
            )
            if near:
                continue
            placed.append((x, y))
            ax.annotate(
                text,
                (x, y),
                fontsize=7,
                color=color,
                xytext=(4, 4 if (i + j) % 2 == 0 else -10),
                ha="left",
                textcoords="offset points",
            )
    for name, (x, y) in singles.items():
        color, marker = _MARKERS.get(name, _MARKERS.get(name.split(" ")[0], ("tab:olive", "P")))
        ax.scatter([x], [y], color=color, marker=marker, s=60, zorder=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    if title:
        # Wrapped to the figure's width: a long accounting line was clipped at the sides.
        lines = [textwrap.fill(line, TITLE_CHARS) for line in title.splitlines()]
        ax.set_title("\n".join(lines), fontsize="medium")
    return fig
