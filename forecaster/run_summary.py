"""What a reviewer reads first about a training: a few figures, two small tables, a note.

Details: docs/forecasting.md, "Notes from the code", `forecaster/run_summary.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.gate import CHALLENGER, GateDecision, served_means, verdict
from forecaster.metrics import relative_mase
from forecaster.peak.heldout import BUFFER
from forecaster.run_metrics import HORIZON_COLUMN
from forecaster.types import MODEL, PERSISTENCE, UID, quantile_column

PREFIX = "summary"


@dataclass(frozen=True)
class RunSummary:
    """A training's summary, ready to log.

    Attributes:
        metrics: ``summary/...`` metric key to value.
        horizons: one row per horizon (point accuracy and coverage), ``summary.json``.
        checks: one row per gate check (status, detail, figures), ``gate.json``.
        description: a few Markdown lines for the run's note.
    """

    metrics: dict[str, float]
    horizons: pd.DataFrame
    checks: pd.DataFrame
    description: str


def summarise(
    scores: pd.DataFrame,
    selection: Mapping[str, str],
    decision: GateDecision,
    *,
    levels: Sequence[float],
    served: Sequence[float],
) -> RunSummary:
    """Summarise a training's held-out scores and gate decision.

    Args:
        scores: held-out scores per ``unique_id, model, horizon``.
        selection: each series' champion model.
        levels: the quantile levels forecast; coverage is reported above the median.
        served: the levels the gate scored the peak model at.
    """
    upper = [lv for lv in levels if lv > 0.5]
    horizons = horizon_table(scores, selection, upper)
    metrics: dict[str, float] = {}
    for row in horizons.to_dict("records"):
        label = row[HORIZON_COLUMN]
        metrics[f"{PREFIX}/mase_vs_persistence_{label}"] = row["mase_vs_persistence"]
        metrics[f"{PREFIX}/mase_ratio_of_means_{label}"] = row["mase_ratio_of_means"]
    if decision.relative is not None:
        metrics[f"{PREFIX}/mase_vs_persistence"] = decision.relative.geomean
    peak = served_means(decision.peak_losses, served)
    if CHALLENGER in peak and peak.get(BUFFER, 0.0) > 0.0:
        metrics[f"{PREFIX}/peak_pinball_vs_buffer"] = peak[CHALLENGER] / peak[BUFFER]
    chosen = _champion_rows(scores, selection)
    for lv in upper:
        column = f"coverage_{quantile_column(lv)}"
        if column in chosen.columns:
            metrics[f"{PREFIX}/{column}"] = float(chosen[column].mean())
    metrics[f"{PREFIX}/promoted"] = float(decision.promote)
    metrics[f"{PREFIX}/checks_failed"] = float(len(decision.failed))
    finite = {k: float(v) for k, v in metrics.items() if np.isfinite(v)}
    checks = pd.DataFrame(
        [
            {
                "check": c.name,
                "status": c.status,
                "challenger": c.challenger,
                "reference": c.reference,
                "detail": c.detail,
            }
            for c in decision.checks
        ]
    )
    text = describe(decision, horizons, finite, peak)
    return RunSummary(finite, horizons, checks, text)


def horizon_table(
    scores: pd.DataFrame, selection: Mapping[str, str], upper: Sequence[float]
) -> pd.DataFrame:
    """One row per horizon: how the champion's held-out point forecasts fare.

    Columns: the champion's and persistence's mean MASE over series, the relative
    measures of :func:`forecaster.metrics.relative_mase` (geometric mean, ratio of
    means, worst cell and its series, cells counted) and the mean coverage of each
    ``upper`` quantile.
    """
    chosen = _champion_rows(scores, selection)
    coverage = [f"coverage_{quantile_column(lv)}" for lv in upper]
    rows = []
    for label, cells in scores.groupby(HORIZON_COLUMN, sort=False):
        relative = relative_mase(cells, selection, PERSISTENCE)
        mine = chosen[chosen[HORIZON_COLUMN].eq(label)]
        base = cells[cells[MODEL].eq(PERSISTENCE)]
        row: dict[str, object] = {
            HORIZON_COLUMN: str(label),
            "champion_mase": float(mine["mase"].mean()),
            "persistence_mase": float(base["mase"].mean()) if len(base) else np.nan,
            "mase_vs_persistence": relative.geomean if relative else np.nan,
            "mase_ratio_of_means": relative.ratio_of_means if relative else np.nan,
            "worst_cell": relative.worst if relative else np.nan,
            "worst_series": relative.worst_cell[0] if relative and relative.worst_cell else "",
            "cells": relative.cells if relative else 0,
        }
        row.update({c: float(mine[c].mean()) for c in coverage if c in mine.columns})
        rows.append(row)
    return pd.DataFrame(rows)


def describe(
    decision: GateDecision,
    horizons: pd.DataFrame,
    metrics: Mapping[str, float],
    peak: Mapping[str, float],
) -> str:
    """The run's note: the verdict, why, and the three figures behind it (Markdown)."""
    said = verdict(decision)
    lines = [f"**{said[:1].upper()}{said[1:]}.**"]
    if decision.failed:
        failed = [c for c in decision.checks if c.status == "failed"]
        lines += [f"- {c.name} failed: {c.detail}" for c in failed]
    point = ", ".join(
        f"{r[HORIZON_COLUMN]} {r['mase_vs_persistence']:.3f}x ({r['mase_ratio_of_means']:.3f}x)"
        for r in horizons.to_dict("records")
        if np.isfinite(r["mase_vs_persistence"])
    )
    if point:
        lines.append(
            f"- Point, held-out MASE vs persistence per horizon, geometric mean over series "
            f"(ratio of means): {point}; below 1 beats persistence."
        )
    if CHALLENGER in peak and BUFFER in peak:
        lines.append(
            f"- Peak pinball {peak[CHALLENGER]:.4g} vs the trailing-day buffer's "
            f"{peak[BUFFER]:.4g} at the served levels."
        )
    coverage = [
        f"{k.removeprefix(f'{PREFIX}/coverage_')} {v:.2f}"
        for k, v in metrics.items()
        if k.startswith(f"{PREFIX}/coverage_")
    ]
    if coverage:
        lines.append(f"- Coverage (share of actuals at or below): {', '.join(coverage)}.")
    lines.append(
        "- `summary/...` metrics; `summary.json`, `gate.json`; per backtest window: "
        "`window/...` (step = window)."
    )
    return "\n".join(lines)


def _champion_rows(scores: pd.DataFrame, selection: Mapping[str, str]) -> pd.DataFrame:
    return scores[scores[UID].astype(str).map(selection).eq(scores[MODEL])]
