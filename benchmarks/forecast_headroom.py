"""Headroom above persistence: the best any per-series choice of method could score.

forecast_accuracy reports the champion's mean MASE over persistence's (issue #12's
target is 0.95x). This benchmark asks where that bar lies against what is possible at
all. On forecast_accuracy's very windows and MASE scales (same region, cutoffs, 28-day
training windows, horizons 10 min / 1 h / 3 h) it scores a pool of simple causal
forecasters (:mod:`benchmarks.simple_pool`, 184 configurations), adds every
family and peer that forecast_accuracy's result files measured, and then takes, for
each series x horizon cell, the best of them **in hindsight**: chosen on the very
windows it is scored on.

No forecaster can choose that way, so the figure is not a forecast score: it is a
generous ceiling on what picking one method (or blend) per series and horizon could
reach. Choosing the best of hundreds on 12 windows also rewards luck, which makes the
ceiling higher than what a fair choice would get. If even it stays above a target, no
per-series choice among these methods meets it.

It prints, per trace group (Helios, Alibaba LoRA, NAB) and overall, the summed MASE
of persistence, of the champion, of the best measured family per cell, of the pool's
best per cell and of the best of both, with ratios to persistence. Beside them, the
same choice made fairly: each cell's member chosen on the other half of its windows
(alternate windows), and (on the test region) members chosen on the tune region per
cell, per series and per trace group. And how much of persistence's MASE the worst
tenth of its window scores (a score per window and horizon) carries. Persistence's
cells are checked against the result files' (they must agree: same windows, same
scales), else it stops with an error.

Run: ``python benchmarks/forecast_headroom.py [--region test|tune] [--families
FILE ...] [--plot PNG]`` (the files' region and window count are used, e.g.
``--region tune --families benchmarks/results/forecast_accuracy_tune36.json``);
writes ``benchmarks/results/forecast_headroom.json`` (``--output``); the figure in
docs/forecasting.md is ``--plot docs/img/forecast_headroom.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.forecast_accuracy import (  # noqa: E402
    HORIZONS,
    REGIONS,
    TEST_WINDOWS,
    default_cutoffs,
    load_series,
)
from benchmarks.headroom_plot import draw  # noqa: E402
from benchmarks.inputs import data_dir  # noqa: E402
from benchmarks.simple_pool import Member, pool  # noqa: E402
from forecaster.contract import validate_series  # noqa: E402
from forecaster.metrics import horizon_steps, naive_scale  # noqa: E402
from forecaster.models.catalog import steps_in  # noqa: E402
from forecaster.types import DS, UID, Y  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FAMILIES = (RESULTS / "forecast_accuracy.json", RESULTS / "forecast_accuracy_analog.json")
GROUPS = {"helios": "earth_", "alibaba_lora": "alibaba_lora/", "nab": "nab/"}
TARGET = 0.95
WORST_SHARE = 0.1
SUMMED = ("persistence", "champion", "best_family", "best_pool", "best_of_both", "fair_half")
FAIR = ("fair_cell", "fair_series", "fair_group")
"""Pool members chosen on the tune region, per cell, per series and per trace group."""


@dataclass(frozen=True)
class Window:
    """One rolling-origin window: its training values, actuals and MASE scale."""

    uid: str
    train: npt.NDArray[np.float64]
    actual: npt.NDArray[np.float64]
    scale: float
    steps_per_day: int
    horizons: tuple[tuple[str, int], ...]
    """Each horizon's label and its number of steps."""


def main(argv: Sequence[str] | None = None) -> int:
    """Score the pool, merge the measured families, print the ceiling table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--region", choices=sorted(REGIONS), default="test")
    parser.add_argument(
        "--families",
        type=Path,
        action="append",
        default=None,
        help="a forecast_accuracy result file of the same region (repeatable; default: "
        "forecast_accuracy.json and forecast_accuracy_analog.json where they exist)",
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="the shared traces")
    parser.add_argument("--output", type=Path, default=RESULTS / "forecast_headroom.json")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the table as a PNG")
    args = parser.parse_args(argv)
    shared = data_dir(args, ROOT)
    if shared is None:
        print("no shared traces (../shared/data or --data-dir): nothing to measure.")
        return 1
    family_files = args.families or [p for p in FAMILIES if p.is_file()]
    try:
        measured, n_windows = read_families(family_files, args.region)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    df, _ = validate_series(load_series(shared))
    pooled, per_window = score_pool(windows(df, args.region, n_windows))
    halves = half_choices(per_window)
    # On the reported region, the fair counterpart: each choice made on the tune
    # region's windows (all before the test region), then scored here.
    fair = None
    if args.region == "test":
        fair = fair_choices(score_pool(windows(df, "tune", n_windows))[0], pooled)
    agree = persistence_gap(pooled, measured)
    if agree > 1e-9:
        print(
            f"error: persistence differs from the result files by up to {agree:.3g} MASE: "
            "they were not measured on these windows (rerun forecast_accuracy on this data "
            "and region, or pass --families for it)",
            file=sys.stderr,
        )
        return 2
    summary = summarise(pooled, measured, per_window, halves, fair)
    print_table(summary)
    payload = {
        "protocol": {
            "region": args.region,
            "cutoffs_between": REGIONS[args.region],
            "windows": n_windows,
            "horizons": HORIZONS,
            "pool_size": len(pooled.columns),
            "families_from": [p.name for p in family_files],
            "chosen": "per series x horizon cell, in hindsight, on the scored windows",
        },
        "summary": summary,
        "wall_seconds": time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=1))
    print(f"wrote {args.output} ({payload['wall_seconds']:.0f} s)")
    if args.plot is not None:
        draw(summary, args.plot)
        print(f"drew {args.plot}")
    return 0


def windows(df: pd.DataFrame, region: str, n_windows: int = TEST_WINDOWS) -> list[Window]:
    """forecast_accuracy's windows: same cutoffs, 28-day training, naive scales."""
    steps = df.groupby(UID)[DS].apply(lambda s: s.diff().median())
    out: list[Window] = []
    for step, uids in steps.groupby(steps):
        delta = pd.Timedelta(step)
        part = df[df[UID].isin(uids.index)]
        labels = tuple(horizon_steps(HORIZONS, delta).items())
        horizon = max(n for _, n in labels)
        max_train = steps_in(pd.Timedelta(days=28), delta)
        day = steps_in(pd.Timedelta(days=1), delta)
        cutoffs = default_cutoffs(part, horizon=horizon, n_windows=n_windows, **REGIONS[region])
        for uid, group in part.groupby(UID, sort=True):
            ds = pd.DatetimeIndex(group[DS])
            y = group[Y].to_numpy(dtype=np.float64)
            found = ds.searchsorted(pd.DatetimeIndex(cutoffs[str(uid)]), side="right") - 1
            for c in sorted({int(p) for p in found if 1 <= p < len(ds) - 1}):
                train = y[max(0, c + 1 - max_train) : c + 1]
                actual = np.full(horizon, np.nan)
                later = y[c + 1 : c + 1 + horizon]
                actual[: later.size] = later
                out.append(Window(str(uid), train, actual, naive_scale(train), day, labels))
    return out


def score_pool(scored: list[Window]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each member's mean MASE per (series, horizon), and every member's window MASE.

    A member is kept in a cell only where it forecast every window persistence did
    (a member short of history on some windows would be judged on easier ones).
    Windows without a MASE scale (a flat training window) are left out, as
    forecast_accuracy leaves them out.
    """
    rows: list[tuple[str, str, str, int, float]] = []
    members: dict[int, dict[str, Member]] = {}
    order: dict[str, int] = {}
    for window in scored:
        if not np.isfinite(window.scale):
            continue
        number = order[window.uid] = order.get(window.uid, -1) + 1
        chosen = members.setdefault(window.steps_per_day, pool(window.steps_per_day))
        for name, member in chosen.items():
            err = np.abs(member(window.train, window.actual.size) - window.actual)
            for label, steps in window.horizons:
                head = err[:steps]
                mase = float(np.nanmean(head)) / window.scale if np.isfinite(head).any() else np.nan
                rows.append((window.uid, label, name, number, mase))
    frame = pd.DataFrame(rows, columns=[UID, "horizon", "member", "window", "mase"])
    counts = frame.groupby([UID, "horizon", "member"])["mase"].agg(["mean", "count"])
    need = counts.xs("persistence", level="member")["count"]
    complete = counts["count"] == need.reindex(counts.index.droplevel("member")).to_numpy()
    table = counts.loc[complete, "mean"].unstack("member")
    return table, frame


def half_choices(frame: pd.DataFrame) -> pd.Series:
    """Per cell, the mean MASE when each window is forecast by the member chosen on the
    other half of the cell's windows (alternate windows), a fair choice in one region."""
    wide = frame.set_index([UID, "horizon", "window", "member"])["mase"].unstack("member")
    out: dict[tuple[str, str], float] = {}
    for cell, sub in wide.groupby(level=[UID, "horizon"]):
        parity = sub.index.get_level_values("window").to_numpy() % 2
        scored: list[npt.NDArray[np.float64]] = []
        for side in (0, 1):
            chose_on, used_on = sub[parity == side], sub[parity != side]
            eligible = chose_on.notna().all() & used_on.notna().all()
            if used_on.empty or not eligible.any():
                continue
            pick = chose_on.loc[:, eligible].mean().idxmin()
            scored.append(used_on[pick].to_numpy(dtype=np.float64))
        if scored:
            out[(str(cell[0]), str(cell[1]))] = float(np.concatenate(scored).mean())
    return pd.Series(out, dtype=np.float64).rename_axis([UID, "horizon"])


def read_families(paths: list[Path], region: str) -> tuple[pd.DataFrame, int]:
    """The MASE of every model of forecast_accuracy result files, per (series, horizon),
    and the files' number of windows per series.

    A model name already taken by an earlier file gets ``@<file stem>``.

    Raises:
        ValueError: a file is missing, was measured on another region, or the files
            differ in their number of windows.
    """
    wide: pd.DataFrame | None = None
    n_windows: int | None = None
    for path in paths:
        if not path.is_file():
            raise ValueError(f"--families {path} does not exist; give a forecast_accuracy JSON")
        result = json.loads(path.read_text())
        protocol = result.get("protocol", {})
        if protocol.get("region", "test") != region:
            raise ValueError(
                f"{path} was measured on region {protocol.get('region', 'test')!r}; this run "
                f"needs {region!r} (pass --region to match, or a file of this region)"
            )
        count = int(protocol.get("test_windows", TEST_WINDOWS))
        if n_windows is not None and count != n_windows:
            raise ValueError(
                f"{path} has {count} windows per series, an earlier file {n_windows}; "
                "pass files of one forecast_accuracy protocol"
            )
        n_windows = count
        cells = pd.DataFrame(result["cells"])[[UID, "model", "horizon", "mase"]]
        table = cells.pivot_table(index=[UID, "horizon"], columns="model", values="mase")
        if wide is not None:
            table = table.rename(
                columns={m: f"{m}@{path.stem}" for m in table.columns if m in wide.columns}
            )
        wide = table if wide is None else wide.join(table, how="outer")
    if wide is None or n_windows is None:
        raise ValueError("no forecast_accuracy result file to read (pass --families FILE)")
    return wide, n_windows


def fair_choices(tune: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    """Test MASE of pool members chosen on the tune region, per cell, series and group.

    ``fair_cell`` takes each cell's best member on tune; ``fair_series`` one member per
    series (best mean ratio to persistence over its horizons); ``fair_group`` one member
    per trace group (best summed MASE). Only members scored on every window of the cell
    in both regions are eligible; where none is, the choice is persistence.
    """
    tune = tune.reindex(index=test.index, columns=test.columns)
    ok = tune.notna() & test.notna()
    tune_ok = tune.where(ok)
    ratio = tune_ok.div(tune_ok["persistence"], axis=0)
    uid = test.index.get_level_values(UID)
    picks = {
        "fair_cell": tune_ok.idxmin(axis=1),
        "fair_series": _pick(ratio, uid, "mean"),
        "fair_group": _pick(tune_ok, _groups(uid), "sum"),
    }
    out = pd.DataFrame(index=test.index)
    for name, pick in picks.items():
        chosen = pick.fillna("persistence")
        out[name] = [test.at[cell, member] for cell, member in chosen.items()]
        out[f"{name}_member"] = chosen
    return out


def _pick(frame: pd.DataFrame, keys: Any, how: str) -> pd.Series:
    """Per row, the member with the best aggregate over the rows sharing its key."""
    complete = frame.notna().groupby(keys).all()
    totals = frame.groupby(keys).agg(how).where(complete)
    best = totals.idxmin(axis=1)
    return pd.Series(best.reindex(keys).to_numpy(), index=frame.index)


def _groups(uids: pd.Index) -> pd.Index:
    return pd.Index(
        [next((g for g, p in GROUPS.items() if str(u).startswith(p)), "other") for u in uids]
    )


def persistence_gap(pooled: pd.DataFrame, measured: pd.DataFrame) -> float:
    """The largest gap between the pool's persistence and the files' (0 when they agree)."""
    both = pooled[["persistence"]].join(measured[["persistence"]], rsuffix="_file", how="inner")
    if both.empty:
        return float("inf")
    return float((both["persistence"] - both["persistence_file"]).abs().max())


def summarise(
    pooled: pd.DataFrame,
    measured: pd.DataFrame,
    per_window: pd.DataFrame,
    halves: pd.Series,
    fair: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Summed MASE per group of persistence, champion and the hindsight bests."""
    cells = pd.DataFrame(
        {
            "persistence": pooled["persistence"],
            "champion": measured["champion"].reindex(pooled.index),
            "best_family": measured.min(axis=1).reindex(pooled.index),
            "best_pool": pooled.min(axis=1),
            "pool_member": pooled.idxmin(axis=1),
            "family": measured.idxmin(axis=1).reindex(pooled.index),
        }
    )
    cells = cells[cells["persistence"].notna()]
    cells["best_of_both"] = cells[["best_family", "best_pool"]].min(axis=1)
    cells["fair_half"] = halves.reindex(cells.index)
    summed = [*SUMMED]
    if fair is not None:
        cells = cells.join(fair)
        summed += FAIR
    cell_group = _groups(cells.index.get_level_values(UID))
    window_group = _groups(pd.Index(per_window[UID]))
    groups: dict[str, Any] = {}
    for name in [*GROUPS, "all"]:
        part = cells if name == "all" else cells[cell_group == name]
        windows_of = per_window if name == "all" else per_window[window_group == name]
        sums = {c: float(part[c].sum()) for c in summed}
        groups[name] = {
            "cells": len(part),
            "summed_mase": sums,
            "over_persistence": {c: sums[c] / sums["persistence"] for c in summed},
            "worst_tenth_share": worst_share(windows_of),
        }
    total = groups["all"]["summed_mase"]
    helios = groups["helios"]["summed_mase"]
    others_need = TARGET * total["persistence"] - helios["best_of_both"]
    others_best = total["best_of_both"] - helios["best_of_both"]
    others_persist = total["persistence"] - helios["persistence"]
    others_need_now = TARGET * total["persistence"] - helios["champion"]
    return {
        "groups": groups,
        "target": TARGET,
        "ceiling_over_persistence": total["best_of_both"] / total["persistence"],
        "others_need_with_helios_at_ceiling": {
            "summed_mase": others_need,
            "over_their_persistence": others_need / others_persist,
            "their_ceiling": others_best,
        },
        "others_need_with_helios_at_champion": {
            "summed_mase": others_need_now,
            "over_their_persistence": others_need_now / others_persist,
            "their_champion": total["champion"] - helios["champion"],
        },
        "cells": [
            {"series": str(uid), "horizon": str(h), **_clean(row)}
            for (uid, h), row in cells.iterrows()
        ],
    }


def worst_share(per_window: pd.DataFrame) -> float:
    """Share of persistence's summed window MASE (a score per window and horizon) that
    the worst tenth of those scores holds."""
    values = per_window.loc[per_window["member"] == "persistence", "mase"].dropna()
    if values.empty:
        return float("nan")
    ordered = np.sort(values.to_numpy())[::-1]
    top = max(1, round(WORST_SHARE * ordered.size))
    return float(ordered[:top].sum() / ordered.sum())


def print_table(summary: dict[str, Any]) -> None:
    """Summed MASE (and its ratio to persistence) per measure and trace group."""
    groups = summary["groups"]
    measures = list(next(iter(groups.values()))["summed_mase"])
    head = f"{'summed MASE':<16}" + "".join(
        f"{name + ' (' + str(g['cells']) + ')':>20}" for name, g in groups.items()
    )
    print(head)
    print("-" * len(head))
    for measure in measures:
        line = f"{measure:<16}"
        for group in groups.values():
            total, ratio = group["summed_mase"][measure], group["over_persistence"][measure]
            line += f"{total:>13.1f} {ratio:>5.3f}x"
        print(line)
    need = summary["others_need_with_helios_at_ceiling"]
    print(
        f"\nhindsight ceiling / persistence {summary['ceiling_over_persistence']:.3f} "
        f"(target {summary['target']}); with Helios at its ceiling the other cells would "
        f"need {need['summed_mase']:.1f} summed MASE ({need['over_their_persistence']:.2f}x "
        f"their persistence), their ceiling is {need['their_ceiling']:.1f}"
    )
    now = summary["others_need_with_helios_at_champion"]
    print(
        f"with Helios at the champion's, they would need {now['summed_mase']:.1f} "
        f"({now['over_their_persistence']:.2f}x their persistence); the champion has "
        f"{now['their_champion']:.1f} there"
    )
    shares = ", ".join(f"{n} {g['worst_tenth_share']:.2f}" for n, g in summary["groups"].items())
    print(f"share of persistence's MASE in its worst tenth of window scores: {shares}")


def _clean(row: pd.Series) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}


if __name__ == "__main__":
    raise SystemExit(main())
