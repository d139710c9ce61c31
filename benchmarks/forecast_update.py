"""Updating the trained champion between trainings against refitting it, held out.

The forecast job used to refit the champion's choice on every series each run; it now
updates the fits made at the training (parameters, trees, the fleet's regressors and
calibration residuals kept; the forecast starts from the newest observation, see
:meth:`forecaster.champion.ChampionForecaster.update`). This measures what that costs
in accuracy, both ways in one process on the same origins.

Protocol: per fleet (the series of one step covering the same days: one trace),
``--cutoffs`` training cutoffs spread over its last 25 %. At each, the default
champion (the default settings' plan: the guarded choice of persistence, gbm and
global_gbm, ``forecaster.models.guarded``) is fitted on the last ``max_train_days``
before the cutoff, as ``foresight train`` fits it. Then, at each origin ``--after``
later (the forecast job's runs between two daily trainings), every series is
forecast from the history up to the origin (cut to the same ``max_train_days``) two
ways: *update* (the job's path now) and *refit* (the champion's choices refitted on
that history, the fleet model learnt again: the job's path before). Neither sees
anything after the origin. Scores: MASE at each horizon (the mean absolute error over
steps ``1..h``, scaled by the in-sample MAE of the 1-step naive of the origin's
history), averaged over the cells (series x origin) all three ways scored, and
reported relative to persistence's on the same cells.

Run: ``python benchmarks/forecast_update.py [--quick] [--data FILE] [--output FILE]``
(the shared traces of ``../shared/data`` by default). Prints a table and writes
``benchmarks/results/forecast_update.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.forecast_accuracy import series_or_exit_code  # noqa: E402
from benchmarks.inputs import add_input_options  # noqa: E402
from forecaster.champion import ChampionForecaster  # noqa: E402
from forecaster.metrics import horizon_steps, naive_scale  # noqa: E402
from forecaster.models.guarded import GUARDED, with_combinations  # noqa: E402
from forecaster.training import recent_history  # noqa: E402
from forecaster.types import DS, MEAN, STEP, UID, Y  # noqa: E402
from pipelines.config.settings import load_settings  # noqa: E402
from pipelines.jobs.history import candidate_models, training_plan  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "forecast_update.json"
AFTER = ("1h", "6h", "23h")
"""Default origins after each training: the job's runs until the next daily training."""
WAYS = ("update", "refit", "persistence")


def origins_after(
    series: pd.DataFrame, cutoff: pd.Timestamp, after: Sequence[pd.Timedelta]
) -> list[pd.Timestamp]:
    """The origins ``after`` the cutoff that the data holds."""
    last = pd.Timestamp(series[DS].max())
    return [cutoff + a for a in after if cutoff + a <= last]


def scored(
    forecast: pd.DataFrame,
    actual: pd.DataFrame,
    history: pd.DataFrame,
    horizons: dict[str, int],
    way: str,
    origin: pd.Timestamp,
) -> list[dict[str, Any]]:
    """MASE of each series' forecast from ``origin`` at each horizon label."""
    rows = []
    for uid, rows_of in forecast.groupby(UID, sort=False):
        past = history.loc[history[UID] == uid, Y].to_numpy(dtype=np.float64)
        scale = naive_scale(past)
        truth = actual[actual[UID] == uid].set_index(DS)[Y]
        made = rows_of.sort_values(STEP)
        for label, h in horizons.items():
            first = made.iloc[:h]
            y = truth.reindex(first[DS]).to_numpy(dtype=np.float64)
            if len(first) < h or not np.isfinite(y).all() or not np.isfinite(scale) or scale <= 0:
                continue
            error = float(np.mean(np.abs(y - first[MEAN].to_numpy(dtype=np.float64))))
            rows.append(
                {
                    "way": way,
                    UID: uid,
                    "origin": origin.isoformat(),
                    "horizon": label,
                    "mase": error / scale,
                }
            )
    return rows


def persistence_forecast(history: pd.DataFrame, h: int, step: pd.Timedelta) -> pd.DataFrame:
    """The last value of each series repeated ``h`` steps (the reference)."""
    last = history.groupby(UID, sort=True).tail(1)
    steps = np.arange(1, h + 1)
    return pd.concat(
        [
            pd.DataFrame(
                {UID: row[UID], DS: row[DS] + step * steps, STEP: steps, MEAN: float(row[Y])}
            )
            for _, row in last.iterrows()
        ],
        ignore_index=True,
    )


def run_group(
    df: pd.DataFrame,
    step: pd.Timedelta,
    executor: Executor,
    cutoffs: int,
    after: Sequence[pd.Timedelta],
    console: Console,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Score update and refit at every origin of every cutoff of one fleet."""
    settings = load_settings(root=ROOT)
    plan = training_plan(settings, step)
    horizons = horizon_steps(list(settings.horizons), step)
    h = max(horizons.values())
    candidates = candidate_models(settings, step, plan.horizon)
    start, end = pd.Timestamp(df[DS].min()), pd.Timestamp(df[DS].max())
    span = end - start
    rows: list[dict[str, Any]] = []
    seconds = {"update": 0.0, "refit": 0.0}
    for i in range(cutoffs):
        # Spread over the last 25 %, leaving a day for the origins and their actuals.
        cutoff = (start + span * (0.75 + 0.2 * i / max(1, cutoffs - 1))).floor(step)
        train = recent_history(df[df[DS] <= cutoff], plan.max_train)
        uids = sorted(str(u) for u in train[UID].unique())
        prototype = ChampionForecaster(
            dict.fromkeys(uids, GUARDED), with_combinations(candidates), default=GUARDED
        )
        champion = prototype.unfitted().fit(train, executor)
        console.print(f"step {step}: trained at {cutoff} on {len(uids)} series")
        for origin in origins_after(df, cutoff, after):
            history = recent_history(df[df[DS] <= origin], plan.max_train)
            history = history[history[UID].isin(uids)]
            actual = df[(df[DS] > origin) & (df[DS] <= origin + h * step)]
            started = time.perf_counter()
            updated = champion.update(history).predict(h)
            seconds["update"] += time.perf_counter() - started
            started = time.perf_counter()
            refitted = prototype.unfitted().fit(history, executor).predict(h)
            seconds["refit"] += time.perf_counter() - started
            made = {
                "update": updated,
                "refit": refitted,
                "persistence": persistence_forecast(history, h, step),
            }
            for way, forecast in made.items():
                rows += scored(forecast, actual, history, horizons, way, origin)
    return rows, seconds


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean MASE per way and horizon on the cells all three ways scored, and the ratios."""
    cells = rows.pivot_table(
        index=[UID, "origin", "horizon"], columns="way", values="mase", aggfunc="first"
    ).dropna()
    out = cells.groupby(level="horizon")[list(WAYS)].mean()
    out["update_vs_persistence"] = out["update"] / out["persistence"]
    out["refit_vs_persistence"] = out["refit"] / out["persistence"]
    out["update_vs_refit"] = out["update"] / out["refit"]
    out["cells"] = cells.groupby(level="horizon").size()
    return out


def table(result: pd.DataFrame, order: Sequence[str]) -> Table:
    """One line per horizon: both ways' MASE relative to persistence, and their ratio."""
    out = Table(title="update vs refit between trainings: held-out MASE / persistence's")
    for name in ("horizon", "cells", "update", "refit", "update / refit"):
        out.add_column(name, justify="right")
    for label in order:
        if label not in result.index:
            continue
        row = result.loc[label]
        out.add_row(
            label,
            str(int(row["cells"])),
            f"{row['update_vs_persistence']:.4f}",
            f"{row['refit_vs_persistence']:.4f}",
            f"{row['update_vs_refit']:.4f}",
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 series only (smoke run)")
    parser.add_argument("--cutoffs", type=int, default=2, help="trainings per fleet")
    parser.add_argument(
        "--after",
        nargs="+",
        default=list(AFTER),
        help="origins after each training, as offsets (default %(default)s)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=RESULTS)
    add_input_options(parser, "series ids")
    args = parser.parse_args(argv)
    df = series_or_exit_code(parser.prog, args)
    if isinstance(df, int):
        return df
    after = [pd.Timedelta(a) for a in args.after]
    console = Console()
    # A fleet is the series of one step that cover the same days (one trace): the
    # traces of one step lie years apart, and a cutoff must fall where its fleet has data.
    spans = df.groupby(UID)[DS].agg(
        step=lambda s: s.diff().median(), first=lambda s: s.min().floor("D"), last="max"
    )
    spans["last"] = spans["last"].dt.floor("D")
    rows: list[dict[str, Any]] = []
    seconds = {"update": 0.0, "refit": 0.0}
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as executor:
        for (step, _, _), fleet in spans.groupby(["step", "first", "last"]):
            part = df[df[UID].isin(fleet.index)]
            group = run_group(part, pd.Timedelta(step), executor, args.cutoffs, after, console)
            made, spent = group
            rows += made
            for way, s in spent.items():
                seconds[way] += s
    frame = pd.DataFrame(rows)
    result = summary(frame)
    order = list(load_settings(root=ROOT).horizons)
    console.print(table(result, order))
    console.print(
        f"forecast seconds: update {seconds['update']:.1f}, refit {seconds['refit']:.1f} "
        f"(all origins, {args.workers} workers for the refits)"
    )
    document = {
        "protocol": {
            "cutoffs_per_fleet": args.cutoffs,
            "origins_after_training": list(args.after),
            "champion": "default settings (guarded: persistence, gbm, global_gbm)",
            "series": sorted(df[UID].unique().tolist()),
        },
        "by_horizon": {
            str(label): {k: float(v) for k, v in result.loc[label].items()}
            for label in order
            if label in result.index
        },
        "forecast_seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.perf_counter() - started, 1),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
