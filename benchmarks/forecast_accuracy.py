"""Forecast accuracy on the real traces of ``../shared/data``, side by side with peers.

Protocol (as ``../shared/ANCHORS.md``): 12 cutoffs spread over the last 25 % of each
series, each fit on at most the last 28 days before its cutoff, horizons 10 min, 1 h
and 3 h; MASE scaled by the in-sample MAE of the 1-step naive of each window's
training data. Every Foresight family and the statsforecast peers (AutoETS, MSTL) run
through the same backtest in one process.

The champion is chosen per series and horizon the way training chooses it, but only
from the past: on 8 validation windows that end at or before the first test cutoff.
Its score is then the chosen family's score on the 12 test windows, so the selection
never sees the windows it is scored on.

Run: ``make bench`` (or ``python benchmarks/forecast_accuracy.py [--quick]``). Prints a
table and writes ``benchmarks/results/forecast_accuracy.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.peers import PeerAutoETS, PeerMSTL  # noqa: E402
from forecaster.backtest import Estimator, backtest, rolling_origin_cutoffs  # noqa: E402
from forecaster.contract import validate_series  # noqa: E402
from forecaster.loaders import load_trace, shared_data_dir  # noqa: E402
from forecaster.metrics import HORIZON, horizon_steps, score_backtest  # noqa: E402
from forecaster.models.catalog import default_models, steps_in  # noqa: E402
from forecaster.selection import select_per_series  # noqa: E402
from forecaster.types import DS, MODEL, UID  # noqa: E402

HORIZONS = ["10min", "1h", "3h"]
LEVELS = (0.5, 0.9, 0.95)
TEST_WINDOWS = 12
VALIDATION_WINDOWS = 8
VCS = ("vc6YE", "vcvlY", "vcLJZ", "vcpDC")
SIGNALS = ("allocated_gpus", "pending_gpus", "demand_gpus")
PEERS = ("persistence", "seasonal_naive", "sf_autoets", "sf_mstl")
RESULTS = ROOT / "benchmarks" / "results" / "forecast_accuracy.json"


def load_series(data_dir: Path) -> pd.DataFrame:
    """The benchmark's series, validated, named ``<entity>/<signal>``."""
    frames = [
        load_trace("helios_earth_total", data_dir=data_dir, signals=set(SIGNALS)),
        load_trace("helios_earth_vc", data_dir=data_dir, signals=set(SIGNALS)),
        load_trace("alibaba_lora", data_dir=data_dir, signals={"arrivals", "busy_gpus_est"}),
        load_trace("nab", data_dir=data_dir),
    ]
    raw = pd.concat(frames, ignore_index=True)
    vc_keep = {f"earth_vc_{vc}/{s}" for vc in VCS for s in SIGNALS}
    is_vc = raw[UID].str.startswith("earth_vc_")
    raw = raw[~is_vc | raw[UID].isin(vc_keep)]
    clean, _ = validate_series(raw)
    return clean


def candidates(step: pd.Timedelta, horizon: int) -> list[Estimator]:
    """Foresight's families plus the statsforecast peers for one step."""
    day, week = steps_in(pd.Timedelta(days=1), step), steps_in(pd.Timedelta(weeks=1), step)
    ours: list[Estimator] = list(default_models(step, horizon))
    return [
        *ours,
        PeerAutoETS(season_length=day, horizon=horizon),
        PeerMSTL(season_lengths=(day, week), horizon=horizon),
    ]


def validation_frame(df: pd.DataFrame, horizon: int) -> pd.DataFrame:
    """Each series cut at its first test cutoff: what selection may look at."""
    parts = []
    for _, group in df.groupby(UID, sort=True):
        cutoffs = rolling_origin_cutoffs(len(group), horizon=horizon, n_windows=TEST_WINDOWS)
        parts.append(group.iloc[: cutoffs[0] + 1])
    return pd.concat(parts, ignore_index=True)


def run_group(
    df: pd.DataFrame, step: pd.Timedelta, executor: ProcessPoolExecutor
) -> dict[str, Any]:
    """Backtest one step's series: test windows (all models), validation (ours)."""
    labels = horizon_steps(HORIZONS, step)
    horizon = max(labels.values())
    max_train = steps_in(pd.Timedelta(days=28), step)
    models = candidates(step, horizon)
    ours = [m for m in models if m.model_name not in {"sf_autoets", "sf_mstl"}]
    started = time.perf_counter()
    test = backtest(
        models,
        df,
        horizon=horizon,
        n_windows=TEST_WINDOWS,
        levels=LEVELS,
        max_train=max_train,
        executor=executor,
        progress=_progress(f"test {step}"),
    )
    val = backtest(
        ours,
        validation_frame(df, horizon),
        horizon=horizon,
        n_windows=VALIDATION_WINDOWS,
        levels=LEVELS,
        max_train=max_train,
        executor=executor,
        progress=_progress(f"validation {step}"),
    )
    return {
        "test_scores": score_backtest(test.frame, test.scales, LEVELS, labels),
        "val_scores": score_backtest(val.frame, val.scales, LEVELS, labels),
        "fit_seconds": dict(test.fit_seconds),
        "failures": test.failures,
        "seconds": time.perf_counter() - started,
        "n_series": df[UID].nunique(),
    }


def champion_scores(test: pd.DataFrame, val: pd.DataFrame) -> pd.DataFrame:
    """The test scores of the family each series would have chosen on validation."""
    rows = []
    for label in HORIZONS:
        chosen = select_per_series(val, horizon=label)
        at = test[test[HORIZON] == label]
        pick = at[at[MODEL].eq(at[UID].map(chosen))].assign(
            family=lambda f: f[MODEL], **{MODEL: "champion"}
        )
        rows.append(pick)
    return pd.concat(rows, ignore_index=True)


def summarise(scores: pd.DataFrame, fit_seconds: dict[str, float]) -> dict[str, Any]:
    """Mean MASE per model and horizon, the champion against the best peer."""
    models = sorted(scores[MODEL].unique())
    mean_mase = {m: {h: _mean(scores, m, h, "mase") for h in [*HORIZONS, "all"]} for m in models}
    coverage = {m: {h: _mean(scores, m, h, "coverage_q0.9") for h in HORIZONS} for m in models}
    peers_all = {p: mean_mase[p]["all"] for p in PEERS if p in mean_mase}
    best_peer = min(peers_all, key=lambda p: peers_all[p])
    wide = scores.pivot_table(index=[UID, HORIZON], columns=MODEL, values="mase")
    peer_cols = [p for p in PEERS if p in wide.columns]
    per_cell_best = wide[peer_cols].min(axis=1)
    ok = wide["champion"].notna() & per_cell_best.notna()
    champion_cov = coverage["champion"]
    return {
        "mean_mase": mean_mase,
        "mean_coverage_q0.9": coverage,
        "best_peer": best_peer,
        "champion_mean_mase": mean_mase["champion"]["all"],
        "best_peer_mean_mase": peers_all[best_peer],
        "champion_over_best_peer": mean_mase["champion"]["all"] / peers_all[best_peer],
        "champion_over_per_cell_best_peer": float(
            wide.loc[ok, "champion"].mean() / per_cell_best[ok].mean()
        ),
        "champion_beats_per_cell_best_peer_share": float(
            (wide.loc[ok, "champion"] < per_cell_best[ok] - 1e-12).mean()
        ),
        "champion_mean_coverage_q0.9": float(np.nanmean(list(champion_cov.values()))),
        "targets": {"champion_over_best_peer_max": 0.85, "coverage_q0.9_range": [0.87, 0.93]},
        "fit_seconds": fit_seconds,
    }


def print_table(summary: dict[str, Any]) -> None:
    """Mean MASE and q0.9 coverage per model and horizon."""
    head = f"{'model':<16}" + "".join(f"{h:>9}" for h in [*HORIZONS, "all"])
    head += "".join(f"{'cov ' + h:>11}" for h in HORIZONS) + f"{'fit s':>9}"
    print(head)
    print("-" * len(head))
    for model, by_h in summary["mean_mase"].items():
        line = f"{model:<16}" + "".join(f"{by_h[h]:>9.3f}" for h in [*HORIZONS, "all"])
        cov = summary["mean_coverage_q0.9"][model]
        line += "".join(f"{cov[h]:>11.3f}" for h in HORIZONS)
        line += f"{summary['fit_seconds'].get(model, float('nan')):>9.1f}"
        print(line)
    print(
        f"\nchampion mean MASE {summary['champion_mean_mase']:.3f} / best peer "
        f"({summary['best_peer']}) {summary['best_peer_mean_mase']:.3f} = "
        f"{summary['champion_over_best_peer']:.3f} (target <= 0.85); vs per-cell best peer "
        f"{summary['champion_over_per_cell_best_peer']:.3f}; champion q0.9 coverage "
        f"{summary['champion_mean_coverage_q0.9']:.3f} (target 0.87-0.93)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; ``--quick`` keeps 3 series for a smoke run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 series only (smoke run)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    data_dir = shared_data_dir(ROOT)
    if data_dir is None:
        print("../shared/data is absent: the real traces are needed for this benchmark.")
        return 1
    df = load_series(data_dir)
    if args.quick:
        keep = [
            "earth_total/demand_gpus",
            "alibaba_lora/arrivals",
            "nab/rds_cpu_utilization_e47b3b",
        ]
        df = df[df[UID].isin(keep)]
    steps = df.groupby(UID)[DS].apply(lambda s: s.diff().median())
    started = time.perf_counter()
    groups = []
    with ProcessPoolExecutor(max_workers=args.workers) as executor:
        for step, uids in steps.groupby(steps):
            groups.append(run_group(df[df[UID].isin(uids.index)], pd.Timedelta(step), executor))
    test = pd.concat([g["test_scores"] for g in groups], ignore_index=True)
    val = pd.concat([g["val_scores"] for g in groups], ignore_index=True)
    scores = pd.concat([test, champion_scores(test, val)], ignore_index=True)
    fit_seconds: dict[str, float] = {}
    for g in groups:
        for model, seconds in g["fit_seconds"].items():
            fit_seconds[model] = fit_seconds.get(model, 0.0) + seconds
    summary = summarise(scores, fit_seconds)
    print_table(summary)
    failures = pd.concat(
        [g["failures"] for g in groups if not g["failures"].empty] or [pd.DataFrame()],
        ignore_index=True,
    )
    payload = {
        "protocol": {
            "horizons": HORIZONS,
            "test_windows": TEST_WINDOWS,
            "validation_windows": VALIDATION_WINDOWS,
            "max_train_days": 28,
            "levels": list(LEVELS),
            "series": sorted(df[UID].unique()),
            "quick": args.quick,
        },
        "summary": summary,
        "cells": scores.replace({np.nan: None}).to_dict(orient="records"),
        "validation_cells": val.replace({np.nan: None}).to_dict(orient="records"),
        "failures": failures.astype(str).to_dict(orient="records"),
        "wall_seconds": time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {args.output} ({payload['wall_seconds']:.0f} s)")
    return 0


def _mean(scores: pd.DataFrame, model: str, horizon: str, col: str) -> float:
    rows = scores[scores[MODEL] == model]
    if horizon != "all":
        rows = rows[rows[HORIZON] == horizon]
    values = rows[col].to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def _progress(label: str) -> Any:
    def report(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total} series", end="" if done < total else "\n", flush=True)

    return report


if __name__ == "__main__":
    raise SystemExit(main())
