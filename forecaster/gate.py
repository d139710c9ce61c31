"""The promotion gate as one typed decision: every check, its result and why.

Details: docs/forecasting.md, "Notes from the code", `forecaster/gate.py`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np
import pandas as pd

from forecaster.metrics import RelativeMase
from forecaster.peak.heldout import LEVEL, METHOD, PINBALL
from forecaster.peak.types import LEAD
from forecaster.selection import PromotionDecision
from forecaster.types import quantile_column

CheckName = Literal["point", "point_guard", "peak_vs_buffer", "peak_vs_incumbent"]
CheckStatus = Literal["passed", "failed", "skipped"]
GUARD_LIMIT: Final = 1.10
"""Most a cell's held-out MASE may be, relative to persistence's (issue #12's guard)."""
CHALLENGER: Final = "challenger"
INCUMBENT: Final = "incumbent"
"""Method names of the peak losses frame (beside ``forecaster.peak.heldout.BUFFER``)."""


@dataclass(frozen=True)
class Check:
    """One check of the gate.

    Attributes:
        status: ``passed``, ``failed`` or ``skipped`` (did not apply).
        detail: one sentence: the figures compared, or why it was skipped.
        challenger: the new version's figure (lower is better); None when skipped.
        reference: what it was held against; None when skipped.
    """

    name: CheckName
    status: CheckStatus
    detail: str
    challenger: float | None = None
    reference: float | None = None


@dataclass(frozen=True)
class GateDecision:
    """Whether a version replaces the champion, with every check's result.

    Attributes:
        point: the point forecasts' comparison with the champion's.
        checks: the result of each check, in the order of :data:`CheckName`.
        relative: the champion's held-out MASE relative to persistence's; None when
            persistence was not scored.
        peak_losses: held-out pinball of the peak models and the buffer
            (:func:`forecaster.peak.heldout.peak_losses`); empty when not scored.
        first: the registry held no champion: failed checks are reported, not blocking.
    """

    point: PromotionDecision
    checks: tuple[Check, ...]
    relative: RelativeMase | None = None
    peak_losses: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    first: bool = False

    @property
    def promote(self) -> bool:
        """True when no check failed, or for the first version (docs/forecasting.md)."""
        return not self.failed or self.first

    @property
    def failed(self) -> tuple[CheckName, ...]:
        """The names of the checks that failed, in order."""
        return tuple(c.name for c in self.checks if c.status == "failed")

    def check(self, name: CheckName) -> Check:
        """Return the result of one check.

        Raises:
            KeyError: the decision has no such check.
        """
        for item in self.checks:
            if item.name == name:
                return item
        raise KeyError(f"the gate has no check {name!r}; it has {[c.name for c in self.checks]}")

    @property
    def reason(self) -> str:
        """The failed checks and why (or that every check passed), in one paragraph."""
        if self.failed:
            why = "; ".join(f"{c.name}: {c.detail}" for c in self.checks if c.status == "failed")
            if self.first:
                return (
                    f"promoted as the first version although it failed {', '.join(self.failed)} "
                    f"(nothing else could serve): {why}"
                )
            return f"failed {', '.join(self.failed)}: {why}"
        done = "; ".join(f"{c.name}: {c.detail}" for c in self.checks)
        return f"every check passed or did not apply: {done}"


def point_check(decision: PromotionDecision) -> Check:
    """The point forecasts against the champion's (``promotion_gate``'s decision)."""
    if decision.champion_score is None and decision.promote:
        return Check("point", "skipped", decision.reason)
    return Check(
        "point",
        "passed" if decision.promote else "failed",
        decision.reason,
        decision.challenger_score,
        decision.champion_score,
    )


def guard_check(relative: RelativeMase | None, limit: float = GUARD_LIMIT) -> Check:
    """No series x horizon cell of held-out MASE above ``limit`` times persistence's."""
    if relative is None or relative.worst_cell is None:
        return Check("point_guard", "skipped", "persistence was not scored on these cells")
    uid, horizon = relative.worst_cell
    figures = (
        f"worst cell {uid} at {horizon} is {relative.worst:.3f}x persistence's MASE "
        f"(limit {limit:.2f}x; {relative.cells} cells, geometric mean {relative.geomean:.3f}x)"
    )
    passed = relative.worst <= limit
    return Check("point_guard", "passed" if passed else "failed", figures, relative.worst, limit)


def compare_peak(
    name: CheckName, losses: pd.DataFrame, served: Sequence[float], against: str
) -> Check:
    """The challenger's peak pinball at the served levels against method ``against``.

    Both are averaged over the served levels and every lead (each cell is already a
    mean over series and origins in scale units); the challenger passes when its
    mean is not above ``against``'s (a tie passes: the same model refitted on the
    same data must not block its own retraining).
    """
    mean = served_means(losses, served)
    if CHALLENGER not in mean or against not in mean:
        return Check(name, "failed", f"no held-out origin scored both the peak model and {against}")
    new, old = mean[CHALLENGER], mean[against]
    levels = ", ".join(quantile_column(q) for q in served)
    n = int(losses[losses[METHOD] == CHALLENGER]["n_origins"].sum())
    where = f"at {levels} over {n:,} held-out origin x lead pairs"
    if new <= old:
        detail = f"peak pinball {new:.4g} <= {against}'s {old:.4g} {where}"
        return Check(name, "passed", detail, new, old)
    detail = f"peak pinball {new:.4g} is worse than {against}'s {old:.4g} {where}"
    return Check(name, "failed", detail, new, old)


def served_means(losses: pd.DataFrame, served: Sequence[float]) -> dict[str, float]:
    """Each method's pinball averaged over the served levels and the leads."""
    if losses.empty:
        return {}
    rows = losses[np.isin(losses[LEVEL].to_numpy(dtype=np.float64), list(served))]
    return {str(m): float(v) for m, v in rows.groupby(METHOD)[PINBALL].mean().items()}


def gate_metrics(decision: GateDecision, served: Sequence[float]) -> dict[str, float]:
    """MLflow metrics of a decision: ``gate/...`` and the held-out figures it used.

    ``gate/promote`` and ``gate/<check>`` are 1 (passed) or 0 (failed); a skipped
    check has no metric. ``heldout/peak_pinball/<method>/lead<L>/q<level>`` and
    ``heldout/peak_pinball/<method>/served`` are the peak losses;
    ``heldout/mase_vs_persistence/...`` the champion's MASE relative to persistence.
    """
    out: dict[str, float] = {"gate/promote": float(decision.promote)}
    for item in decision.checks:
        if item.status != "skipped":
            out[f"gate/{item.name}"] = float(item.status == "passed")
    losses = decision.peak_losses
    for row in losses.itertuples(index=False):
        key = f"lead{int(getattr(row, LEAD))}/{quantile_column(float(getattr(row, LEVEL)))}"
        out[f"heldout/peak_pinball/{getattr(row, METHOD)}/{key}"] = float(getattr(row, PINBALL))
    for method, value in served_means(losses, served).items():
        out[f"heldout/peak_pinball/{method}/served"] = value
    relative = decision.relative
    if relative is not None:
        prefix = "heldout/mase_vs_persistence"
        out[f"{prefix}/cells"] = float(relative.cells)
        out[f"{prefix}/cells_left_out"] = float(relative.left_out)
        for key in ("geomean", "ratio_of_means", "worst"):
            value = float(getattr(relative, key))
            if np.isfinite(value):
                out[f"{prefix}/{key}"] = value
    return out


def gate_tags(decision: GateDecision) -> dict[str, str]:
    """MLflow tags of a decision: the reason, the failed checks, each check's status."""
    tags = {
        "foresight.gate": decision.reason[:5000],
        "foresight.gate.failed": ",".join(decision.failed) or "none",
    }
    for item in decision.checks:
        tags[f"foresight.gate.{item.name}"] = f"{item.status}: {item.detail}"[:5000]
    return tags


def verdict(decision: GateDecision) -> str:
    """``promoted to @champion`` or ``not promoted (failed: <checks>)``, for one-line reports."""
    if decision.promote and decision.failed:
        return (
            f"promoted to @champion as the first version although it failed "
            f"{', '.join(decision.failed)} (nothing else could serve; the next must pass)"
        )
    if decision.promote:
        return "promoted to @champion"
    return f"not promoted (failed: {', '.join(decision.failed)})"


def check_lines(decision: GateDecision) -> list[str]:
    """One line per check: ``<name> <status>: <detail>``."""
    return [f"{c.name} {c.status}: {c.detail}" for c in decision.checks]


def relative_line(relative: RelativeMase | None) -> str | None:
    """The champion's held-out MASE relative to persistence in one line; None if unscored."""
    if relative is None or not relative.cells:
        return None
    return (
        f"held-out MASE vs persistence: geometric mean {relative.geomean:.3f}x over "
        f"{relative.cells} series x horizon cells ({relative.left_out} left out: "
        f"persistence's or the champion's MASE 0 or undefined), ratio of means "
        f"{relative.ratio_of_means:.3f}x, worst cell {relative.worst:.3f}x"
    )
