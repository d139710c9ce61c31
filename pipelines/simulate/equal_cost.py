"""Policies compared at equal cost: frontiers interpolated at each other's costs.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/equal_cost.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pipelines.simulate.frontier import Point, benefit_at, gap_at_cost, points_beaten

BUDGETS: Final[tuple[float, ...]] = (1.02, 1.05, 1.10)
"""Cost ratios to the oracle's GPU-hours at which every policy's best gap is reported."""


def best_gap_at_budgets(
    points: Sequence[Point], budgets: Sequence[float] = BUDGETS
) -> dict[str, float]:
    """Return ``{"<=1.05": best gap at cost <= 1.05, ...}`` (NaN where none is that cheap)."""
    return {f"<={b:.2f}": benefit_at(points, b) for b in budgets}


def equal_cost_rows(
    first: tuple[str, Sequence[Point]], second: tuple[str, Sequence[Point]]
) -> list[dict[str, float]]:
    """Both policies' best gap at every cost either one offers, cheapest first.

    Returns:
        Rows ``{"cost_ratio": x, <first>: gap, <second>: gap}``; a gap is NaN where
        the policy has no setting that cheap.
    """
    (a, pa), (b, pb) = first, second
    costs = sorted({x for x, y in [*pa, *pb] if math.isfinite(x) and math.isfinite(y)})
    return [{"cost_ratio": x, a: gap_at_cost(pa, x), b: gap_at_cost(pb, x)} for x in costs]


def compare_policies(
    subject: str, policies: Mapping[str, Sequence[Point]], budgets: Sequence[float] = BUDGETS
) -> dict[str, Any]:
    """Compare ``subject`` with every other policy at equal cost.

    Args:
        subject: the policy judged (e.g. ``foresight``); a key of ``policies``.
        policies: policy name -> its ``(cost ratio, gap closed)`` points.
        budgets: cost ratios for the best-gap-at-cost figures.

    Returns:
        ``best_gap_at_cost`` for every policy; per other policy ``equal_cost`` rows,
        ``beaten`` (subject's wins over the other's points, of those compared) and
        ``beaten_by`` (the other way round), and ``wins_at_budgets``: at how many
        budgets the subject's best gap is at least the other's (of those where the
        other reaches one).

    Raises:
        KeyError: ``subject`` is not a policy.
    """
    mine = policies[subject]
    best = {name: best_gap_at_budgets(pts, budgets) for name, pts in policies.items()}
    against: dict[str, Any] = {}
    for name, pts in policies.items():
        if name == subject:
            continue
        beaten, compared = points_beaten(mine, pts)
        lost, compared_back = points_beaten(pts, mine)
        wins = judged = 0
        for key, theirs in best[name].items():
            if not math.isfinite(theirs):
                continue
            judged += 1
            ours = best[subject][key]
            wins += int(math.isfinite(ours) and ours >= theirs - 1e-12)
        against[name] = {
            "equal_cost": equal_cost_rows((subject, mine), (name, pts)),
            "beaten": [beaten, compared],
            "beaten_by": [lost, compared_back],
            "wins_at_budgets": [wins, judged],
        }
    return {"subject": subject, "best_gap_at_cost": best, "against": against}
