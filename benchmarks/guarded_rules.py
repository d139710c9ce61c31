"""Rules for the guarded choice replayed offline on its members' backtest rows (#40).

Measures how variants of the guarded choice's rule (``forecaster.models.guarded``)
would score on ``benchmarks/forecast_accuracy.py``'s windows, without rerunning the
walk-forward champion. The members (persistence, gbm, global_gbm: the catalog's
defaults the champion fits for each series' step, wrapped in ``Calibrated`` so every
row carries the member's calibration MAE) are backtested once at that benchmark's
cutoffs of the ``tune`` region (50-75 % of each series) and of the ``test`` region
(75-100 %), each fit on the plan's ``max_train`` as the champion is; every rule is then
a function of those rows. The current rule's test rows are compared with the
committed ``forecast_accuracy.json`` champion cells (the reproduction check).

Score (issue #40's yardstick), per trace family (earth_total, earth_vc, alibaba_lora,
nab): the geometric mean over its series x horizon cells (10 min, 1 h, 3 h) of the
rule's MASE over persistence's, the worst such cell, and the q0.9 coverage.

Variants (:func:`variants`): the margin; the mean of gbm and global_gbm as a member
(its error is the mean of theirs, an upper bound, so only against persistence alone);
errors pooled per path or over steps 1..max(k, band) instead of 1..k; gbm or
global_gbm as the reference instead of persistence; and every member's errors read
over only its last 1, 2 or 4 days of calibration origins (:class:`TailCalibrated`:
the same origins for every member, where today persistence's span a week and the
gbms' about 4.4 days at 10 min).

Leave-one-family-out: for each family, the variant is chosen on the OTHER families'
tune windows only, among variants whose worst tune cell is at most 1.10x persistence,
by the criterion declared before any result was seen, ``regret`` (the mean over those
families of log(variant / best single member)); ``max_regret`` and ``pooled`` are
reported beside it as checks (:data:`CRITERIA`). The chosen variant is then scored on
the held-out family's test windows. Nothing that picks a variant scores it. The
variants chosen on all four families' tune windows are also scored on ``early``
(24 cutoffs over 25-50 % of each series, before the tune region), on which nothing is
chosen: a fresh check (:func:`fresh_check`).

Run: ``python benchmarks/guarded_rules.py [--rows FILE]`` (``--rows`` caches the
members' backtests: about 10 minutes on the 2-core machine). Prints the tables and
writes ``benchmarks/results/guarded_rules.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.forecast_accuracy import (  # noqa: E402
    HORIZONS,
    LEVELS,
    REGIONS,
    RESULTS,
    TEST_WINDOWS,
    default_cutoffs,
    series_or_exit_code,
)
from benchmarks.inputs import add_input_options  # noqa: E402
from forecaster.estimator import Estimator  # noqa: E402
from forecaster.fleet import fleet_backtest  # noqa: E402
from forecaster.metrics import HORIZON, horizon_steps, score_backtest  # noqa: E402
from forecaster.models.catalog import steps_in  # noqa: E402
from forecaster.models.guarded import (  # noqa: E402
    ERROR,
    GUARDED,
    Calibrated,
    guarded_members,
    guarded_of,
)
from forecaster.types import CUTOFF, DEFAULT_LEVELS, DS, MODEL, PERSISTENCE, STEP, UID, Levels  # noqa: E402  # noqa: E402
from pipelines.config.settings import load_settings  # noqa: E402
from pipelines.jobs.history import candidate_models, training_plan  # noqa: E402

OUTPUT = ROOT / "benchmarks" / "results" / "guarded_rules.json"
TUNE_WINDOWS = 36
EARLY_WINDOWS = 24
REGIONS_HERE: dict[str, dict[str, float]] = {
    **REGIONS,
    "early": {"start_frac": 0.25, "end_frac": 0.5},
}
"""forecast_accuracy's regions, plus ``early`` (cutoffs over 25-50 % of each series, every
window before the tune region): fresh windows on which nothing was chosen or seen, where
the variants chosen on the tune region are checked once more."""
"""Tune cutoffs per series: three times the test's, as forecast_accuracy's tune runs."""
GBM, GLOBAL = "gbm", "global_gbm"
PAIR = "gbm_pair"
"""The mean of gbm and global_gbm (mean and quantiles averaged) as a further member;
its error is the mean of theirs, an upper bound of the pair's own MAE."""
Q90 = "q0.9"
TAIL_DAYS = (1, 2, 4)
"""The recent calibration windows (days of origins) the members' errors are also read
over: every member over the same origins (persistence's residuals span a week,
gbm's and global_gbm's about 4.4 days at 10 min), and more recent ones."""


def tail_column(days: int) -> str:
    """The column of a member's calibration MAE over its last ``days`` of origins."""
    return f"{ERROR}_{days}d"


class TailCalibrated(Calibrated):
    """:class:`Calibrated`, plus the MAE per step over the last days of origins.

    Args:
        model: the unfitted family prototype.
        day: steps in a day of the series.
    """

    def __init__(self, model: Estimator, day: int = 144) -> None:
        super().__init__(model)
        self.day = day

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast as :class:`Calibrated`, with a :func:`tail_column` per :data:`TAIL_DAYS`."""
        out = super().predict(h, levels)
        fits = getattr(self._fitted(), "fits_", {})
        for days in TAIL_DAYS:
            out[tail_column(days)] = np.nan
        for uid, rows in out.groupby(UID, sort=False, observed=True):
            fit = fits.get(str(uid))
            if fit is None:
                continue
            r = np.abs(np.asarray(fit.residuals, dtype=np.float64))
            if r.ndim != 2 or r.shape[1] == 0:
                continue
            steps = np.minimum(rows[STEP].to_numpy(dtype=np.int64), r.shape[1]) - 1
            for days in TAIL_DAYS:
                # The rows end at the same origin for every member (the last one whose
                # step-1 target is known): the last rows are the same origins.
                tail = r[-(days * self.day + r.shape[1] - 1) :]
                with np.errstate(invalid="ignore"):
                    mae = np.nanmean(tail, axis=0) if np.isfinite(tail).any() else None
                if mae is not None:
                    out.loc[rows.index, tail_column(days)] = mae[steps]
        return out


def family_of(uid: str) -> str:
    """The trace family of a series id (the four Helios VCs are one family)."""
    head = uid.split("/", maxsplit=1)[0]
    return "earth_vc" if head.startswith("earth_vc") else head


@dataclass(frozen=True)
class Rows:
    """One region's member rows: the backtest frame, its scales, the horizon labels."""

    frame: pd.DataFrame
    scales: pd.DataFrame
    labels: dict[str, dict[str, int]]  # per series id: horizon label -> steps


def member_rows(df: pd.DataFrame, region: str, n_windows: int, workers: int) -> Rows:
    """Backtest the guarded choice's members at the benchmark's cutoffs of ``region``.

    The members are the champion's (``candidate_models`` at the plan's horizon), fitted
    on the plan's ``max_train``; forecasts run to the benchmark's longest horizon.
    """
    # By its module's name, so the workers unpickle it when this file runs as a script.
    from benchmarks.guarded_rules import TailCalibrated as Wrapper

    settings = load_settings(root=ROOT)
    steps = df.groupby(UID)[DS].apply(lambda s: s.diff().median())
    frames, scales, labels = [], [], {}
    with ProcessPoolExecutor(max_workers=workers) as executor:
        for step, uids in steps.groupby(steps):
            part = df[df[UID].isin(uids.index)]
            step_ = pd.Timedelta(step)
            by_label = horizon_steps(HORIZONS, step_)
            horizon = max(by_label.values())
            plan = training_plan(settings, step_)
            candidates = candidate_models(settings, step_, plan.horizon)
            members = set(guarded_members([c.model_name for c in candidates]))
            cutoffs = default_cutoffs(
                part, horizon=horizon, n_windows=n_windows, **REGIONS_HERE[region]
            )
            began = time.perf_counter()
            result = fleet_backtest(
                [
                    Wrapper(c, steps_in(pd.Timedelta(days=1), step_))
                    for c in candidates
                    if c.model_name in members
                ],
                part,
                horizon=horizon,
                cutoffs=cutoffs,
                levels=LEVELS,
                max_train=plan.max_train,
                executor=executor,
            )
            print(f"{region} {step_}: {len(uids)} series, {time.perf_counter() - began:.0f} s")
            frames.append(result.frame)
            scales.append(result.scales)
            labels.update({str(u): dict(by_label) for u in uids.index})
    return Rows(pd.concat(frames, ignore_index=True), pd.concat(scales, ignore_index=True), labels)


def with_pair(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus :data:`PAIR` rows where both gbm and global_gbm forecast."""
    keys = [UID, DS, CUTOFF, STEP]
    a = frame[frame[MODEL] == GBM].set_index(keys)
    b = frame[frame[MODEL] == GLOBAL].set_index(keys)
    both = a.index.intersection(b.index)
    values = [c for c in frame.columns if c not in {*keys, MODEL, "y"}]
    pair = (a.loc[both, values] + b.loc[both, values]) / 2.0
    pair["y"] = a.loc[both, "y"]
    pair[MODEL] = PAIR
    return pd.concat([frame, pair.reset_index()[list(frame.columns)]], ignore_index=True)


# --- rules -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A variant: the members chosen among, the margin, and how errors are pooled.

    ``pool``: ``cumulative`` (today: mean error over steps 1..k), ``path`` (one choice
    per series and cutoff, on the mean error over all forecast steps), or ``band``
    (mean error over steps 1..max(k, band)).
    """

    members: tuple[str, ...]
    margin: float
    pool: str = "cumulative"
    band: int = 0
    reference: str = PERSISTENCE
    tail: int = 0  # days of calibration origins the errors are read over; 0: all

    @property
    def name(self) -> str:
        short = {PERSISTENCE: "P", GBM: "gbm", GLOBAL: "glob", PAIR: "pair"}
        pool = self.pool if self.pool != "band" else f"band{self.band}"
        ref = "" if self.reference == PERSISTENCE else f" ref {short[self.reference]}"
        tail = f" last{self.tail}d" if self.tail else ""
        members = "+".join(short[m] for m in self.members)
        return f"{members} m{self.margin:.2f} {pool}{ref}{tail}"


def pooled(rows: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """``rows`` with :data:`ERROR` replaced so that ``guarded_of``'s cumulative mean over
    steps 1..k is the pooled error the rule asks for."""
    out = rows.copy()
    if rule.tail:
        out[ERROR] = out[tail_column(rule.tail)]
    if rule.pool == "cumulative":
        return out
    group = out.groupby([UID, CUTOFF, MODEL], sort=False, observed=True)[ERROR]
    if rule.pool == "path":
        out[ERROR] = group.transform("mean")
        return out
    # band: steps 1..band all get the mean over 1..band, later steps keep their own,
    # so the cumulative mean at k is the mean over 1..max(k, band).
    head = out[STEP] <= rule.band
    out[ERROR] = out[ERROR].where(
        ~head,
        out[ERROR]
        .where(head)
        .groupby([out[UID], out[CUTOFF], out[MODEL]], sort=False, observed=True)
        .transform("mean"),
    )
    return out


def apply_rule(frame: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """The rule's rows (model ``guarded``) from the members' rows."""
    rows = frame[frame[MODEL].isin(list(rule.members))]
    return guarded_of(
        [pooled(rows, rule)], [UID, CUTOFF], reference=rule.reference, margin=rule.margin
    )


def variants() -> list[Rule]:
    """Every variant scored (today's default: P+gbm+glob, margin 0.10, cumulative)."""
    today = (PERSISTENCE, GBM, GLOBAL)
    out = [Rule(today, m) for m in (0.0, 0.05, 0.10, 0.15, 0.20)]
    # The pair's error is the mean of its two members' (an upper bound), never below
    # the better one's: beside them it is never chosen, so it is tried against
    # persistence alone.
    out += [Rule((PERSISTENCE, PAIR), m) for m in (0.0, 0.05, 0.10)]
    out += [Rule(today, m, "path") for m in (0.0, 0.05, 0.10, 0.15)]
    out += [Rule(today, m, "band", b) for b in (6, 12, 18) for m in (0.0, 0.05, 0.10)]
    out += [Rule(today, m, reference=r) for r in (GBM, GLOBAL) for m in (0.0, 0.05, 0.10)]
    out += [Rule(today, m, tail=d) for d in TAIL_DAYS for m in (0.0, 0.05, 0.10, 0.15)]
    out += [Rule(today, m, "band", 12, tail=d) for d in TAIL_DAYS for m in (0.0, 0.05, 0.10)]
    return out


# --- scoring -----------------------------------------------------------------------


def score(rows: Rows, frame: pd.DataFrame) -> pd.DataFrame:
    """``unique_id, model, horizon, mase, coverage_q0.9`` of ``frame``'s rows."""
    parts = []
    for labels, uids in _by_labels(rows.labels).items():
        part = frame[frame[UID].isin(uids)]
        parts.append(score_backtest(part, rows.scales, LEVELS, dict(labels)))
    return pd.concat(parts, ignore_index=True)[[UID, MODEL, HORIZON, "mase", "coverage_q0.9"]]


def _by_labels(labels: dict[str, dict[str, int]]) -> dict[tuple[tuple[str, int], ...], list[str]]:
    out: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for uid, by_label in labels.items():
        out.setdefault(tuple(sorted(by_label.items())), []).append(uid)
    return out


def family_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Per family and model: geometric mean ratio to persistence, worst cell, q0.9 coverage.

    Cells where persistence's MASE is 0 or missing are left out (as in the #40 table).
    """
    wide = scores.pivot_table(index=[UID, HORIZON], columns=MODEL, values="mase")
    cov = scores.pivot_table(index=[UID, HORIZON], columns=MODEL, values="coverage_q0.9")
    ok = wide[PERSISTENCE].notna() & (wide[PERSISTENCE] > 0)
    ratio = wide[ok].div(wide.loc[ok, PERSISTENCE], axis=0)
    fam = pd.Series([family_of(str(u)) for u, _ in ratio.index], index=ratio.index)
    out = []
    for name, group in [*ratio.groupby(fam), ("all", ratio)]:
        for model in ratio.columns:
            r = group[model].dropna()
            c = cov.loc[cov.index.isin(group.index), model].dropna()
            out.append(
                {
                    "family": name,
                    "model": model,
                    "gmean": float(np.exp(np.log(r).mean())) if len(r) else math.nan,
                    "worst": float(r.max()) if len(r) else math.nan,
                    "coverage_q0.9": float(c.mean()) if len(c) else math.nan,
                    "cells": len(r),
                }
            )
    return pd.DataFrame(out)


def scored_rules(rows: Rows, rules: Sequence[Rule]) -> pd.DataFrame:
    """Every single member and every rule scored on ``rows`` (one family table)."""
    frame = with_pair(rows.frame)
    parts = [frame]
    for rule in rules:
        guarded = apply_rule(frame, rule)
        guarded[MODEL] = rule.name
        parts.append(guarded)
    stacked = pd.concat(parts, ignore_index=True)
    extra = [c for c in stacked.columns if c.startswith(ERROR)]
    return family_table(score(rows, stacked.drop(columns=extra)))


# --- leave one family out ----------------------------------------------------------

SINGLES = (PERSISTENCE, GBM, GLOBAL, PAIR)


def regret(table: pd.DataFrame, families: Sequence[str]) -> pd.Series:
    """Per model: mean over ``families`` of log(gmean / best single member's gmean)."""
    t = table[table["family"].isin(families)].pivot(index="model", columns="family", values="gmean")
    best = t.loc[[s for s in SINGLES if s in t.index]].min(axis=0)
    return np.log(t.div(best, axis=1)).mean(axis=1)


CRITERIA = ("regret", "max_regret", "pooled")
"""How a fold picks its variant on the other families' tune windows: ``regret`` (the
declared one, fixed before any result was seen), the mean over those families of
log(variant / best single member); ``max_regret``, its largest; ``pooled``, the
geometric mean over all their cells. Each among variants whose worst tune cell is at
most 1.10x persistence."""


def choose(
    table: pd.DataFrame, families: Sequence[str], names: Sequence[str], criterion: str = "regret"
) -> str:
    """The variant best on ``families`` by ``criterion`` whose worst cell is <= 1.10."""
    rows = table[table["family"].isin(families)]
    worst = rows.groupby("model")["worst"].max()
    if criterion == "pooled":
        weight = rows["cells"].to_numpy(dtype=np.float64)
        logs = np.log(rows["gmean"].to_numpy(dtype=np.float64)) * weight
        value = pd.Series(logs, index=rows.index).groupby(rows["model"]).sum()
    elif criterion == "max_regret":
        t = rows.pivot(index="model", columns="family", values="gmean")
        best = t.loc[[s for s in SINGLES if s in t.index]].min(axis=0)
        value = np.log(t.div(best, axis=1)).max(axis=1)
    else:
        value = regret(table, families)
    ok = [n for n in names if worst.get(n, math.inf) <= 1.10]
    return min(ok or list(names), key=lambda n: (float(value[n]), n))


def leave_one_out(
    tune: pd.DataFrame,
    test: pd.DataFrame,
    names: Sequence[str],
    committed: pd.DataFrame | None,
    criterion: str = "regret",
) -> list[dict[str, Any]]:
    """Per family: the variant chosen on the others' tune windows, scored held out.

    ``committed``: :func:`family_table` of the committed benchmark (its champion and
    its best single family, peers included, beside the replay's).
    """
    families = sorted(f for f in tune["family"].unique() if f != "all")
    out = []
    for held in families:
        others = [f for f in families if f != held]
        pick = choose(tune, others, names, criterion)
        row = test[test["family"] == held].set_index("model")
        entry: dict[str, Any] = {
            "family": held,
            "criterion": criterion,
            "chosen": pick,
            "chosen_gmean": float(row.loc[pick, "gmean"]),
            "chosen_worst": float(row.loc[pick, "worst"]),
            "chosen_coverage_q0.9": float(row.loc[pick, "coverage_q0.9"]),
            "today_gmean": float(row.loc[TODAY, "gmean"]),
            "today_worst": float(row.loc[TODAY, "worst"]),
            "today_coverage_q0.9": float(row.loc[TODAY, "coverage_q0.9"]),
            "singles": {s: float(row.loc[s, "gmean"]) for s in SINGLES if s in row.index},
        }
        if committed is not None:
            c = committed[committed["family"] == held].set_index("model")
            entry["committed_champion_gmean"] = float(c.loc["champion", "gmean"])
            single = c.drop(index=["champion"])["gmean"]
            entry["committed_best_single"] = [str(single.idxmin()), float(single.min())]
        out.append(entry)
    return out


TODAY = Rule((PERSISTENCE, GBM, GLOBAL), 0.10).name


# --- reproduction ------------------------------------------------------------------


def committed_cells(path: Path) -> pd.DataFrame:
    """The committed benchmark's cells (``unique_id, model, horizon, mase, coverage``)."""
    data = json.loads(path.read_text())
    cells = pd.DataFrame(data["cells"])
    return cells[[UID, MODEL, HORIZON, "mase", "coverage_q0.9"]]


def reproduction(test_rows: Rows, committed: pd.DataFrame) -> dict[str, Any]:
    """Today's rule replayed on the test rows against the committed champion's cells."""
    frame = apply_rule(test_rows.frame, Rule((PERSISTENCE, GBM, GLOBAL), 0.10))
    both = pd.concat([test_rows.frame, frame])
    mine = score(test_rows, both.drop(columns=[c for c in both.columns if c.startswith(ERROR)]))
    out: dict[str, Any] = {}
    for ours, theirs in (
        (GUARDED, "champion"),
        (PERSISTENCE, PERSISTENCE),
        (GBM, GBM),
        (GLOBAL, GLOBAL),
    ):
        a = mine[mine[MODEL] == ours].set_index([UID, HORIZON])
        b = committed[committed[MODEL] == theirs].set_index([UID, HORIZON])
        both = a.index.intersection(b.index)
        rel = (a.loc[both, "mase"] / b.loc[both, "mase"] - 1.0).abs().dropna()
        cov = (a.loc[both, "coverage_q0.9"] - b.loc[both, "coverage_q0.9"]).abs().dropna()
        out[f"{ours} vs committed {theirs}"] = {
            "cells": len(both),
            "max_relative_mase_difference": float(rel.max()),
            "cells_differing_over_1e-9": int((rel > 1e-9).sum()),
            "max_coverage_difference": float(cov.max()),
        }
    return out


def committed_family_table(committed: pd.DataFrame) -> pd.DataFrame:
    """:func:`family_table` of the committed benchmark's cells."""
    return family_table(committed)


# --- main --------------------------------------------------------------------------


def load_rows(args: argparse.Namespace, df: pd.DataFrame) -> dict[str, Rows]:
    """The members' rows per region, from ``--rows`` where it holds them, else backtested."""
    windows = {"test": TEST_WINDOWS, "tune": args.tune_windows, "early": args.early_windows}
    cached: dict[str, tuple[Any, ...]] = {}
    if args.rows is not None and args.rows.exists():
        cached = pickle.loads(args.rows.read_bytes())  # plain tuples: no class by module
    rows = {region: Rows(*parts) for region, parts in cached.items() if region in windows}
    for region, n in windows.items():
        if region not in rows and n > 0:
            rows[region] = member_rows(df, region, n, args.workers)
    if args.rows is not None and set(rows) != set(cached):
        plain = {k: (r.frame, r.scales, r.labels) for k, r in rows.items()}
        args.rows.write_bytes(pickle.dumps(plain))
    return rows


def fresh_check(tables: dict[str, pd.DataFrame], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per criterion, the variant chosen on every family's tune windows, on test and early."""
    families = sorted(f for f in tables["tune"]["family"].unique() if f != "all")
    out = []
    for criterion in CRITERIA:
        pick = choose(tables["tune"], families, names, criterion)
        for model in (pick, TODAY):
            entry: dict[str, Any] = {"criterion": criterion, "model": model}
            for region in ("test", "early"):
                if region not in tables:
                    continue
                t = tables[region][tables[region]["model"] == model].set_index("family")
                entry[region] = {
                    f: [
                        float(t.loc[f, "gmean"]),
                        float(t.loc[f, "worst"]),
                        float(t.loc[f, "coverage_q0.9"]),
                    ]
                    for f in [*families, "all"]
                }
            out.append(entry)
    return out


def print_tables(tables: dict[str, pd.DataFrame], names: Sequence[str]) -> None:
    """Per region: every variant's geometric mean (worst cell) per family."""
    for region, table in tables.items():
        g = table.pivot(index="model", columns="family", values="gmean")
        w = table.pivot(index="model", columns="family", values="worst")
        cov = table.pivot(index="model", columns="family", values="coverage_q0.9")
        print(f"\n{region}: geometric mean MASE / persistence (worst cell), q0.9 coverage")
        cols = list(g.columns)
        print(f"{'model':<30}" + "".join(f"{c:>22}" for c in cols))
        for model in [*SINGLES, *names]:
            if model not in g.index:
                continue
            print(
                f"{model:<30}"
                + "".join(
                    f"{g.loc[model, c]:>8.3f} ({w.loc[model, c]:.2f}) {cov.loc[model, c]:.3f}"
                    for c in cols
                )
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Backtest the members (or read them), score every variant, leave families out."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tune-windows", type=int, default=TUNE_WINDOWS)
    parser.add_argument(
        "--early-windows",
        type=int,
        default=EARLY_WINDOWS,
        help="cutoffs per series over 25-50 %% (a fresh check of the tune choice; 0: none)",
    )
    parser.add_argument("--rows", type=Path, help="pickle caching the members' backtests")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--committed", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="forecast_accuracy's 3 series")
    add_input_options(parser, "series ids")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    df = series_or_exit_code(parser.prog, args)
    if isinstance(df, int):
        return df
    rows = load_rows(args, df)
    rules = variants()
    names = [r.name for r in rules]
    tables = {region: scored_rules(r, rules) for region, r in rows.items()}
    print_tables(tables, names)
    committed = committed_cells(args.committed) if args.committed.exists() else None
    check = reproduction(rows["test"], committed) if committed is not None else {}
    committed_table = committed_family_table(committed) if committed is not None else None
    print("\nreproduction (test rows, today's rule, against the committed cells):")
    for k, v in check.items():
        print(f"  {k}: {v}")
    held = {
        c: leave_one_out(tables["tune"], tables["test"], names, committed_table, c)
        for c in CRITERIA
    }
    for criterion, entries in held.items():
        print(f"\nleave one family out, {criterion} on the other families' tune windows:")
        print(
            f"{'family':<14}{'chosen':<40}{'held out':>9}{'worst':>7}{'cov':>7}{'today':>8}"
            + "".join(f"{s:>12}" for s in SINGLES)
            + "  committed best single"
        )
        for e in entries:
            best = e.get("committed_best_single", ["-", math.nan])
            print(
                f"{e['family']:<14}{e['chosen']:<40}{e['chosen_gmean']:>9.3f}"
                f"{e['chosen_worst']:>7.2f}{e['chosen_coverage_q0.9']:>7.3f}"
                f"{e['today_gmean']:>8.3f}"
                + "".join(f"{e['singles'].get(s, math.nan):>12.3f}" for s in SINGLES)
                + f"  {best[0]} {best[1]:.3f}"
            )
    fresh = fresh_check(tables, names)
    print("\nchosen on every family's tune windows; test and early (25-50 %, fresh) regions:")
    for e in fresh:
        for region in ("test", "early"):
            if region in e:
                cells = "  ".join(
                    f"{f} {v[0]:.3f} ({v[1]:.2f}) {v[2]:.3f}" for f, v in e[region].items()
                )
                print(f"{e['criterion']:<11}{e['model']:<40}{region:<6}{cells}")
    payload = {
        "protocol": {
            "members": "persistence, gbm, global_gbm: candidate_models at the plan's horizon, "
            "Calibrated, fitted on the plan's max_train",
            "test_windows": TEST_WINDOWS,
            "tune_windows": args.tune_windows,
            "early_windows": args.early_windows,
            "horizons": HORIZONS,
            "regions": REGIONS_HERE,
            "score": "per family, geometric mean over series x horizon cells of MASE over "
            "persistence's (cells with persistence MASE 0 left out)",
            "choice": "per held-out family, on the other families' tune windows, among "
            "variants whose worst tune cell is <= 1.10x persistence: regret (declared "
            "before any result: mean log ratio to the best single member), max_regret, "
            "pooled (geometric mean over all their cells)",
            "today": TODAY,
        },
        "variants": names,
        "tables": {k: v.to_dict(orient="records") for k, v in tables.items()},
        "reproduction": check,
        "leave_one_family_out": held,
        "chosen_on_every_family": fresh,
        "wall_seconds": time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {args.output} ({payload['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
