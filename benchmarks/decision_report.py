"""Decision-quality figures from saved runs: equal-cost comparisons, tables, verdict.

Split from ``decision_quality.py`` (which replays) so a saved JSON can be rescored.
Every comparison is at equal cost (:mod:`pipelines.simulate.equal_cost`), and the
verdict is computed from those figures only.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from benchmarks.buffer_lead import CAPS, family_rows, lead_at_caps, targets
from pipelines.simulate.equal_cost import BUDGETS, compare_policies
from pipelines.simulate.frontier import Point, frontier, interpolated

SUBJECT = "foresight"
REFS = ("ref-persistence", "ref-seasonal_naive")
RUNS_FILE = "runs_file"
"""A saved case's key naming the file its runs are in (relative to the results file)."""
RUNS_FROM = "_runs_from"
"""Where a loaded case's runs were read from (in memory only, never written)."""
HEADLINE = ("earth_total", 10, "<=1.05", 0.9)
"""The headline target: Earth total, 10-min lead, best gap at cost <= 1.05 x oracle >= 0.9."""


def minutes(delta: timedelta | pd.Timedelta) -> int:
    """Whole minutes of a duration."""
    return round(pd.Timedelta(delta).total_seconds() / 60)


def points(case: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """Every policy's ``(cost ratio, gap closed)`` points of a case, by policy name."""
    out: dict[str, list[tuple[float, float]]] = {}
    for r in case["runs"]:
        out.setdefault(r["policy"], []).append((_num(r["cost_ratio"]), _num(r["gap_closed"])))
    return out


def at_least_as_good(comparison: Mapping[str, Any], other: str) -> bool:
    """True when the subject matches ``other`` at every budget ``other`` reaches and at
    every one of ``other``'s points (at equal cost).
    """
    row = comparison["against"][other]
    wins, judged = row["wins_at_budgets"]
    beaten, compared = row["beaten"]
    return bool(wins == judged and beaten == compared and compared > 0)


def where_both_reach(subject: Sequence[Point], other: Sequence[Point]) -> dict[str, float]:
    """The subject's margin over ``other`` at every cost both frontiers span.

    The costs are those of every point either policy offers that lie inside both
    policies' cost ranges; at each, both frontiers are interpolated
    (:func:`~pipelines.simulate.frontier.interpolated`). Unlike the ``beaten`` count of
    :func:`compare_policies`, a cost above one policy's costliest setting is not
    compared: "at equal cost, wherever both reach that cost".

    Returns:
        ``{"worst": smallest margin, "at_cost": its cost, "mean": mean margin,
        "costs": how many costs}``; NaN figures and 0 costs where the ranges do not
        overlap.
    """
    mine, theirs = frontier(subject), frontier(other)
    if not mine or not theirs:
        return {"worst": math.nan, "at_cost": math.nan, "mean": math.nan, "costs": 0}
    low = max(mine[0][0], theirs[0][0]) - 1e-12
    high = min(mine[-1][0], theirs[-1][0]) + 1e-12
    offered = [x for x, y in [*subject, *other] if math.isfinite(x) and math.isfinite(y)]
    costs = sorted({x for x in offered if low <= x <= high})
    margins = [(interpolated(mine, x) - interpolated(theirs, x), x) for x in costs]
    if not margins:
        return {"worst": math.nan, "at_cost": math.nan, "mean": math.nan, "costs": 0}
    worst, at = min(margins)
    mean = sum(m for m, _ in margins) / len(margins)
    return {"worst": worst, "at_cost": at, "mean": mean, "costs": len(margins)}


def score(case: dict[str, Any]) -> dict[str, Any]:
    """Add the equal-cost comparison of Foresight with every other policy to a case."""
    comparison = compare_policies(SUBJECT, points(case))
    case["best_gap_at_cost"] = comparison["best_gap_at_cost"]
    case["equal_cost"] = comparison["against"]
    case["foresight_at_least_as_good_as"] = {
        name: at_least_as_good(comparison, name) for name in comparison["against"]
    }
    every = points(case)
    case["where_both_reach"] = {
        ref: where_both_reach(every[SUBJECT], every[ref]) for ref in REFS if ref in every
    }
    case["buffer_lead"] = lead_at_caps(every)
    case.setdefault("family", case["case"])
    return case


def verdict(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdict, from the equal-cost figures only."""
    out: dict[str, Any] = {}
    name, lead, budget, target = HEADLINE
    for c in cases:
        if c["case"] == name and c["lead_minutes"] == lead:
            best = c["best_gap_at_cost"][SUBJECT][budget]
            out[f"{name}_{lead}min_best_gap_at_cost_{budget}"] = best
            out[f"{name}_{lead}min_target_met"] = bool(math.isfinite(best) and best >= target)
    for ref in REFS:
        wins = [c["foresight_at_least_as_good_as"].get(ref, False) for c in cases]
        out[f"foresight_at_least_as_good_as_{ref}"] = {
            "cases_leads": [int(sum(wins)), len(wins)],
            "per_case_lead": {
                f"{c['case']} lead {c['lead_minutes']}": bool(w)
                for c, w in zip(cases, wins, strict=True)
            },
        }
        diffs = [
            c["best_gap_at_cost"][SUBJECT][b] - c["best_gap_at_cost"][ref][b]
            for c in cases
            for b in c["best_gap_at_cost"][SUBJECT]
            if math.isfinite(c["best_gap_at_cost"][SUBJECT][b])
            and math.isfinite(c["best_gap_at_cost"][ref][b])
        ]
        out[f"mean_best_gap_difference_vs_{ref}"] = (
            float(sum(diffs) / len(diffs)) if diffs else math.nan
        )
        # Issue #12's wording: at equal cost wherever both reach it (no best-above-range).
        reach = {
            f"{c['case']} lead {c['lead_minutes']}": c["where_both_reach"][ref]
            for c in cases
            if ref in c.get("where_both_reach", {}) and c["where_both_reach"][ref]["costs"]
        }
        out[f"foresight_not_below_{ref}_where_both_reach"] = {
            "cases_leads": [sum(r["worst"] >= -1e-12 for r in reach.values()), len(reach)],
            "worst_margin": {k: r["worst"] for k, r in reach.items()},
        }
    return out


def case_table(cases: Sequence[dict[str, Any]]) -> Table:
    """One row per case and lead: every policy's best gap closed at each cost budget."""
    table = Table(title="Best gap closed at cost <= budget x oracle GPU-h (equal cost)")
    table.add_column("case")
    table.add_column("lead", justify="right")
    table.add_column("reactive wait GPU-h", justify="right")
    shown = (SUBJECT, *REFS, "static", "reactive-spread")
    short = {"ref-persistence": "ref-pers", "ref-seasonal_naive": "ref-snaive"}
    for policy in shown:
        table.add_column(
            f"{short.get(policy, policy)} " + "/".join(f"{b:.2f}" for b in BUDGETS),
            justify="right",
        )
    for ref in REFS:
        table.add_column(f"F>={short[ref]} pts / budgets", justify="right")
    for c in cases:
        reactive = next(r for r in c["runs"] if r["policy"] == "reactive")
        cells = [
            " / ".join(_f(v, 2) for v in c["best_gap_at_cost"][p].values())
            if p in c["best_gap_at_cost"]
            else "-"
            for p in shown
        ]
        for ref in REFS:
            row = c["equal_cost"][ref]
            cells.append(
                f"{row['beaten'][0]}/{row['beaten'][1]} ; "
                f"{row['wins_at_budgets'][0]}/{row['wins_at_budgets'][1]}"
            )
        table.add_row(
            c["case"], str(c["lead_minutes"]), f"{reactive['waiting_gpu_hours']:,.0f}", *cells
        )
    return table


def equal_cost_table(case: dict[str, Any], other: str) -> Table:
    """Foresight and ``other`` at every cost either offers (one case and lead)."""
    table = Table(title=f"{case['case']} lead {case['lead_minutes']}: {SUBJECT} vs {other}")
    for col in ("cost ratio", SUBJECT, other):
        table.add_column(col, justify="right")
    for row in case["equal_cost"][other]["equal_cost"]:
        table.add_row(_f(row["cost_ratio"], 3), _f(row[SUBJECT], 3), _f(row[other], 3))
    return table


def average_rows(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean best gap at each budget per (lead, policy) over the cases that reach it."""
    rows = [
        {"lead": c["lead_minutes"], "policy": p, "budget": b, "gap": v}
        for c in cases
        for p, by_budget in c["best_gap_at_cost"].items()
        for b, v in by_budget.items()
    ]
    frame = pd.DataFrame(rows)
    out = []
    for (lead, policy, budget), part in frame.groupby(["lead", "policy", "budget"], sort=False):
        values = part["gap"].astype(float)
        out.append(
            {
                "lead_minutes": int(str(lead)),
                "policy": str(policy),
                "budget": str(budget),
                "mean_best_gap": float(values.mean()) if values.notna().any() else math.nan,
                "cases_reaching_budget": int(values.notna().sum()),
                "cases": len(values),
            }
        )
    return out


def average_table(rows: Sequence[dict[str, Any]], lead: int) -> Table:
    """Mean best gap at each budget per policy, one lead time."""
    table = Table(title=f"Mean best gap closed at cost <= budget, lead {lead} min")
    table.add_column("policy")
    for b in BUDGETS:
        table.add_column(f"<= {b:.2f} (cases reaching)", justify="right")
    policies = dict.fromkeys(r["policy"] for r in rows if r["lead_minutes"] == lead)
    for policy in policies:
        cells = []
        for b in BUDGETS:
            row = next(
                (
                    r
                    for r in rows
                    if r["lead_minutes"] == lead
                    and r["policy"] == policy
                    and r["budget"] == f"<={b:.2f}"
                ),
                None,
            )
            cells.append(
                "-"
                if row is None
                else f"{_f(row['mean_best_gap'], 3)} "
                f"({row['cases_reaching_budget']}/{row['cases']})"
            )
        table.add_row(policy, *cells)
    return table


def lead_table(cases: Sequence[dict[str, Any]]) -> Table:
    """Per case and lead: Foresight's lead over the best simple buffer at each cost cap."""
    table = Table(title="Lead over the best simple buffer at cost <= cap x oracle (equal cost)")
    table.add_column("case")
    table.add_column("family")
    table.add_column("lead", justify="right")
    for cap in CAPS:
        table.add_column(f"{cap:g}", justify="right")
    table.add_column("mean (caps)", justify="right")
    table.add_column("worst", justify="right")
    for c in cases:
        row = c["buffer_lead"]
        table.add_row(
            c["case"],
            c["family"],
            str(c["lead_minutes"]),
            *(_f(v["lead"], 3) for v in row["caps"].values()),
            f"{_f(row['mean_lead'], 3)} ({row['caps_both_reach']})",
            _f(row["worst_lead"], 3),
        )
    return table


def family_table(rows: Sequence[dict[str, Any]]) -> Table:
    """Per family and lead: the mean over its cases of the lead at each cap."""
    table = Table(title="Lead over the best simple buffer, mean over the family's cases")
    table.add_column("family")
    table.add_column("lead", justify="right")
    table.add_column("cases", justify="right")
    for cap in CAPS:
        table.add_column(f"{cap:g}", justify="right")
    table.add_column("mean (caps)", justify="right")
    table.add_column("worst", justify="right")
    for r in rows:
        table.add_row(
            r["family"],
            str(r["lead_minutes"]),
            str(r["cases"]),
            *(_f(v, 3) for v in r["lead_at_cap"].values()),
            _f(r["mean_lead"], 3),
            _f(r["worst_lead"], 3),
        )
    return table


def report(
    console: Console,
    cases: list[dict[str, Any]],
    elapsed: float,
    output: Path,
    leads: Sequence[int],
    *,
    mode: str = "",
    not_held_out: Sequence[str] = (),
) -> int:
    """Print the tables and the verdict, write the JSON.

    ``mode`` says how the constants were chosen (held out by family or in-sample);
    ``not_held_out`` lists what the served path still uses as chosen in-sample.
    """
    if mode:
        console.print(f"Constants: {mode}")
    console.print(case_table(cases))
    for c in cases:
        if c["case"] == HEADLINE[0] and c["lead_minutes"] == HEADLINE[1]:
            for ref in REFS:
                console.print(equal_cost_table(c, ref))
    averages = average_rows(cases)
    for lead in leads:
        console.print(average_table(averages, lead))
    console.print(lead_table(cases))
    families = family_rows(cases)
    console.print(family_table(families))
    judged = verdict(cases)
    judged["issue_40_targets"] = targets(cases, families)
    console.print(f"Verdict: {json.dumps(judged, indent=1)}")
    for item in not_held_out:
        console.print(f"Not held out (chosen in-sample before, not re-chosen per family): {item}")
    if cases:
        console.print(f"Accounting: {json.dumps(cases[0]['accounting'])}")
    console.print(f"Replay elapsed {elapsed:.0f} s (shared machine: 2 cores used by several jobs).")
    payload = {
        "protocol": (
            "see benchmarks/decision_quality.py: reactive packed is the reactive reference; "
            "gap closed and cost ratio are against the oracle; comparisons at equal cost"
        ),
        "mode": mode,
        "not_held_out": list(not_held_out),
        "budgets": list(BUDGETS),
        "caps": list(CAPS),
        "families": families,
        "elapsed_seconds": elapsed,
        "verdict": judged,
        "averages": averages,
        "cases": cases,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    payload["cases"] = [_runs_beside(c, output) for c in cases]
    output.write_text(json.dumps(payload, indent=1, default=str))
    console.print(f"Written {output} (each case names the file its runs are in)")
    return 0


def runs_dir(output: Path) -> Path:
    """Where a results file keeps its cases' runs: ``<stem>_runs`` beside it."""
    return output.with_name(f"{output.stem}_runs")


def _runs_beside(case: dict[str, Any], output: Path) -> dict[str, Any]:
    """The case as the results file holds it: its runs in a file of their own.

    The runs are most of a case's bytes (every setting of every policy); the file keeps
    the figures read from them and names where they are. A case whose runs were read
    from a file (:func:`saved_cases`) keeps naming that file; the others are written to
    :func:`runs_dir`.
    """
    out = {k: v for k, v in case.items() if k not in ("runs", RUNS_FROM)}
    source = case.get(RUNS_FROM)
    # Runs read from the file being rewritten must move out first: they would be lost.
    if source is None or Path(source).resolve() == output.resolve():
        folder = runs_dir(output)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{case['case'].replace('/', '_')}_lead{case['lead_minutes']}.json"
        path.write_text(json.dumps({"runs": case["runs"]}, default=str))
        source = path
    out[RUNS_FILE] = os.path.relpath(Path(source).resolve(), output.resolve().parent)
    return out


def saved_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a results file, each with its runs (read from the file it names).

    Files written before the runs moved out hold them inline; a file may also name such
    a file, whose case of the same name and lead is then read.
    """
    saved = json.loads(path.read_text())
    return [_with_runs(case, path) for case in saved["cases"]]


def _with_runs(case: dict[str, Any], path: Path) -> dict[str, Any]:
    """A saved case of ``path`` with its runs, and where they were read from."""
    if "runs" in case:
        return {**case, RUNS_FROM: path.resolve()}
    source = (path.parent / case[RUNS_FILE]).resolve()
    held = json.loads(source.read_text())
    if "cases" in held:  # a results file with its runs inline: its case of that name and lead
        key = (case["case"], case["lead_minutes"])
        held = next(c for c in held["cases"] if (c["case"], c["lead_minutes"]) == key)
    return {**case, "runs": held["runs"], RUNS_FROM: source}


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"
