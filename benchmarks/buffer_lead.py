"""Foresight's lead over the best simple buffer at equal cost, per case and per family.

A simple buffer is what a user could script in an afternoon: persistence or the
seasonal naive plus ``k`` standard deviations of its errors, a static size of the
prehistory's mean plus ``k`` standard deviations, and the hindsight static size the
benchmark has always shown. At each cost cap (1.01x to 1.5x the oracle's GPU-hours),
each policy's best gap closed at that cost or less is read off its frontier
(:func:`pipelines.simulate.frontier.benefit_at`); the lead is Foresight's minus the
best buffer's. A cap counts only where both reach it (each has a setting that cheap),
so neither wins by sitting where the other has no point. A setting that closes less
than none of the gap (waits more than reactive: a static size below demand waits
for ever, as the carried backlog grows) is no buffer anyone would run, and is not
counted as reaching its cost, for Foresight as for the buffers: a lead is never
taken over a setting worse than doing nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pipelines.simulate.frontier import Point, benefit_at

CAPS: Final[tuple[float, ...]] = (1.01, 1.02, 1.05, 1.1, 1.2, 1.5)
"""Cost caps, as multiples of the oracle's GPU-hours."""
SUBJECT: Final = "foresight"
BUFFERS: Final[tuple[str, ...]] = ("ref-persistence", "ref-seasonal_naive", "static-ksd", "static")
"""The simple buffers Foresight is judged against (those a case has)."""
TARGET_MEAN_LEAD: Final = 0.05
"""Issue #40: the mean lead over the caps both reach, per family, at lead 10 min."""


def lead_at_caps(
    policies: Mapping[str, Sequence[Point]],
    caps: Sequence[float] = CAPS,
    buffers: Sequence[str] = BUFFERS,
) -> dict[str, Any]:
    """Foresight's lead over the best buffer at each cap, and its mean and worst where both reach.

    Args:
        policies: policy name -> its ``(cost ratio, gap closed)`` points; must hold
            ``foresight`` and at least one buffer.

    Returns:
        ``caps``: per cap ``{"foresight", "best_buffer", "buffer", "lead"}`` (NaN and
        ``""`` where one of them does not reach the cap); ``mean_lead`` and
        ``worst_lead`` over the caps both reach (NaN when none) and ``caps_both_reach``.

    Raises:
        KeyError: no ``foresight`` points or no buffer among ``policies``.
    """
    usable = {name: [(x, y) for x, y in pts if y >= 0] for name, pts in policies.items()}
    mine = usable[SUBJECT]
    present = [b for b in buffers if b in policies]
    if not present:
        raise KeyError(f"none of the buffers {list(buffers)} is among {sorted(policies)}")
    rows: dict[str, dict[str, Any]] = {}
    leads: list[float] = []
    for cap in caps:
        ours = benefit_at(mine, cap)
        theirs = {b: benefit_at(usable[b], cap) for b in present}
        reached = {b: v for b, v in theirs.items() if math.isfinite(v)}
        best_name = max(reached, key=lambda b: reached[b]) if reached else ""
        best = reached.get(best_name, math.nan)
        lead = ours - best if math.isfinite(ours) and math.isfinite(best) else math.nan
        if math.isfinite(lead):
            leads.append(lead)
        rows[f"{cap:g}"] = {
            SUBJECT: ours,
            "best_buffer": best,
            "buffer": best_name,
            "lead": lead,
        }
    return {
        "caps": rows,
        "mean_lead": sum(leads) / len(leads) if leads else math.nan,
        "worst_lead": min(leads) if leads else math.nan,
        "caps_both_reach": len(leads),
    }


def family_rows(cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per family and lead time: the mean over its cases of each cap's lead and of the mean lead.

    Each case needs ``family``, ``lead_minutes`` and ``buffer_lead`` (:func:`lead_at_caps`).
    ``worst_lead`` is the lowest lead at any cap of any of the family's cases.
    """
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for c in cases:
        groups.setdefault((str(c["family"]), int(c["lead_minutes"])), []).append(c)
    out = []
    for (family, lead), members in sorted(groups.items()):
        per_cap = {}
        for cap in members[0]["buffer_lead"]["caps"]:
            values = [m["buffer_lead"]["caps"][cap]["lead"] for m in members]
            per_cap[cap] = _mean(values)
        out.append(
            {
                "family": family,
                "lead_minutes": lead,
                "cases": len(members),
                "lead_at_cap": per_cap,
                "mean_lead": _mean([m["buffer_lead"]["mean_lead"] for m in members]),
                "worst_lead": _min([m["buffer_lead"]["worst_lead"] for m in members]),
            }
        )
    return out


def targets(
    cases: Sequence[Mapping[str, Any]], families: Sequence[Mapping[str, Any]], lead: int = 10
) -> dict[str, Any]:
    """Issue #40's decision targets from these figures: which are met.

    - ``mean_lead_per_family``: every family's mean lead >= +0.05 at ``lead`` minutes;
    - ``never_below``: no case at any lead time has a negative lead at any cap.
    """
    at_lead = [f for f in families if f["lead_minutes"] == lead]
    short = {
        f["family"]: f["mean_lead"]
        for f in at_lead
        if not (math.isfinite(f["mean_lead"]) and f["mean_lead"] >= TARGET_MEAN_LEAD)
    }
    below = {
        f"{c['case']} lead {c['lead_minutes']}": c["buffer_lead"]["worst_lead"]
        for c in cases
        if math.isfinite(c["buffer_lead"]["worst_lead"]) and c["buffer_lead"]["worst_lead"] < 0
    }
    return {
        "mean_lead_per_family": {
            "target": TARGET_MEAN_LEAD,
            "lead_minutes": lead,
            "met": bool(at_lead) and not short,
            "short": short,
        },
        "never_below": {"met": not below, "below": below},
    }


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _min(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return min(finite) if finite else math.nan
