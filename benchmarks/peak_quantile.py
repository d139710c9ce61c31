"""Lead-time peak quantiles on the shared traces: the peak forecaster against a buffer.

Quantity (``../shared/ANCHORS.md``, "Lead-time peak quantiles"): at each origin ``t``
the headroom ``max(D[t+1 .. t+L]) - D[t]``; scored as the peak ``max(D[t+1 .. t+L])``
against the forecast bound (the same pinball loss, shifted by ``D[t]``).

Series: Earth total demand (allocated + pending, pending GPUs and jobs as covariates);
Earth per-VC demand (all 16 VCs train one model; vc6YE, vcvlY, vcLJZ, vcpDC are
scored); Alibaba LoRA ``busy_gpus_est x 20`` (arrivals as covariate); Alibaba openb
allocated + pending (pending GPUs and pods, pod arrivals); the three NAB series
(extra, 5-min steps). Leads 10 and 20 min (1 and 2 steps; NAB 2 and 4), quantiles
0.9 and 0.95. One forecaster per fleet, refitted at every midnight on the data before
it, forecasting every origin of the next day. The Earth total is a class of its own:
pooled with the VCs (``--fleets helios``) its raw pinball was 1.2-1.8x the reference
on the tune window, alone 0.87-0.88x, while rows were weighted by scale over the
series' median scale (two idle VCs dominated the pooled fit); without those weights,
pooled, its combined ratio on tune is 0.865-0.883 against 0.871-0.879 alone.

Reference: the trailing-day empirical quantile of the realised headroom (what
persistence + k sd provisions), raw and with the same ACI calibration as the model.
"combined": per series, lead and quantile, the served bound, as
``forecaster.peak.online.OnlinePeak`` issues it over a continuous run: the model+ACI
bound mixed online with the raw reference, the raw model, the time-of-day reference
and the seasonal references of the same time yesterday and last week
(``forecaster.peak.reference``) by their discounted realised pinball losses
(``forecaster.peak.combine``), snapped to demand and held at the return level
(``forecaster.peak.online.finish``); "combined_without_seasonal" is the same without
the two seasonal references. Every fleet runs the forecaster's defaults (what a
training fits and serves).

Held out by trace family (``benchmarks.families``), by default: the online layer's
constants (ACI's step size, the mix's sharpness and half-life, the snap, the lowest
level held at the return level) are chosen on a grid (``benchmarks.peak_lofo.Grid``,
the served values included) by the mean pinball ratio of "combined" to the reference
on the tune windows of the *other* families, per family; the family is scored on its
holdout window with them. The raw forecasts are computed once (one model per fleet,
so a family's fits never see another's); the grid re-runs only the online layer, for
"combined" and for "combined_without_seasonal" alike. ``--in-sample`` chooses on every
family's tune window instead (the old way, labelled so in the output and the JSON).
The constants production should serve are those chosen on every family's tune window
(the JSON's ``production``, and whether they differ from the served ones).

Outside data: ``--data FILE`` (repeatable, the formats of :mod:`benchmarks.inputs`)
replaces the shared traces; its ``*/demand_gpus`` series are scored, or the series
named with ``--series`` (any id ``<pool>/<signal>`` of the files, e.g. ``x/rate_rps``:
the model then forecasts that signal over every pool of the files that has it). The
files' series of one step are one fleet, at leads 10 and 20 minutes in steps (rounded
up). ``--series`` without ``--data`` scores only the named series of the shared fleets.
A mistake in these options stops the run at once with one line saying what to pass.

Windows (per series, by share of its span): origins from 50 % minus one day are
forecast (the first day warms ACI up and is never scored); "tune" is 50-75 %,
"holdout" 75-100 %. The model's features and hyperparameters were chosen on "tune"
runs of every fleet together (``--until tune``); the online constants per fold as
above; the reported score is "holdout".

Run: ``nice -n 5 python benchmarks/peak_quantile.py --output benchmarks/results/peak_quantile.json``
(the walk-forward about 15 minutes on one free core, the online grid a few more;
forecasts with ``--save-forecasts``). The online layer can be rescored on saved
forecasts without refitting: ``--from-forecasts a.parquet b.parquet``; ``--gamma``,
``--eta``, ``--halflife``, ``--snap`` and ``--min-level`` set the grid.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.families import family_of  # noqa: E402
from benchmarks.inputs import (  # noqa: E402
    INPUT_ERRORS,
    add_input_options,
    data_dir,
    input_error,
    listing,
    load_files,
    pick_series,
    pool_signal_ids,
)
from benchmarks.peak_batch import calibrate, held_levels, seasonal_reference  # noqa: E402
from benchmarks.peak_lofo import (  # noqa: E402
    SERVED,
    WITHOUT_SEASONAL,
    Constants,
    Grid,
    Track,
    choose,
    folds,
    grid_scores,
    mixed,
    objective,
    served,
    with_aci,
)
from benchmarks.progress import Counter, counter  # noqa: E402
from forecaster.contract import validate_series  # noqa: E402
from forecaster.exceptions import DataValidationError, InsufficientHistoryError, SourceError  # noqa: E402
from forecaster.loaders import DEMAND, load_trace  # noqa: E402
from forecaster.peak.fleet import pool_leads  # noqa: E402
from forecaster.peak.model import PeakQuantileForecaster  # noqa: E402
from forecaster.peak.online import EXPERTS, day_rule  # noqa: E402
from forecaster.peak.reference import (  # noqa: E402
    naive_lags,
    seasonal_naive_reference,
    trailing_reference,
)
from forecaster.peak.scale import recent_scale  # noqa: E402
from forecaster.peak.target import lead_peak  # noqa: E402
from forecaster.peak.types import LAST, LEAD, SCALE  # noqa: E402
from forecaster.types import DS, UID, Y, quantile_column  # noqa: E402

QUANTILES = (0.9, 0.95)
SCORED_VCS = ("vc6YE", "vcvlY", "vcLJZ", "vcpDC")
LORA_FACTOR = 20.0
TUNE, HOLDOUT = (0.5, 0.75), (0.75, 1.0)
WINDOWS = {"tune": TUNE, "holdout": HOLDOUT}
RESULTS = ROOT / "benchmarks" / "results" / "peak_quantile.json"
FILE_LEADS = (timedelta(minutes=10), timedelta(minutes=20))
"""Leads of the fleets of ``--data`` files, as the shared traces' (1 and 2 steps of 10 min)."""


@dataclass(frozen=True)
class Fleet:
    """One trace file: its frame, the signals forecast, the leads and scored series."""

    name: str
    frame: pd.DataFrame
    targets: tuple[str, ...]
    leads: tuple[int, ...]
    scored: tuple[str, ...]


def load_fleets(data_dir: Path) -> list[Fleet]:
    """The benchmark's fleets, validated, from the shared traces."""
    helios_signals = {"demand_gpus", "pending_gpus", "pending_jobs"}
    total = load_trace("helios_earth_total", data_dir=data_dir, signals=helios_signals)
    vc_frame = load_trace("helios_earth_vc", data_dir=data_dir, signals=helios_signals)
    lora = load_trace("alibaba_lora", data_dir=data_dir, signals={"busy_gpus_est", "arrivals"})
    busy = lora[UID] == "alibaba_lora/busy_gpus_est"
    lora.loc[busy, Y] *= LORA_FACTOR
    lora.loc[busy, UID] = "alibaba_lora/demand_gpus"
    openb = load_trace(
        "alibaba_openb",
        data_dir=data_dir,
        signals={"demand_gpus", "pending_gpus", "pending_pods", "arrivals_pods"},
    )
    nab = load_trace("nab", data_dir=data_dir)
    nab_targets = tuple(sorted(nab[UID].str.split("/").str[-1].unique()))
    vcs = tuple(f"earth_vc_{vc}/demand_gpus" for vc in SCORED_VCS)
    earth = "earth_total/demand_gpus"
    raw = [
        ("helios", pd.concat([total, vc_frame]), ("demand_gpus",), (1, 2), (earth, *vcs)),
        ("helios_total", total, ("demand_gpus",), (1, 2), (earth,)),
        ("helios_vc", vc_frame, ("demand_gpus",), (1, 2), vcs),
        ("alibaba_lora", lora, ("demand_gpus",), (1, 2), ("alibaba_lora/demand_gpus",)),
        ("alibaba_openb", openb, ("demand_gpus",), (1, 2), ("alibaba_openb/demand_gpus",)),
        ("nab", nab, nab_targets, (2, 4), tuple(f"nab/{t}" for t in nab_targets)),
    ]
    fleets = []
    for name, frame, targets, leads, scored in raw:
        clean, _ = validate_series(frame.reset_index(drop=True))
        fleets.append(Fleet(name, clean, targets, leads, scored))
    return fleets


def file_fleets(raw: pd.DataFrame, ids: Sequence[str]) -> list[Fleet]:
    """Fleets of ``--data`` files scoring ``ids``: one per step, the ids' signals as targets.

    Raises:
        DataValidationError: an id is not ``<pool>/<signal>``, or the files' series
            break the data contract.
    """
    pool_signal_ids(ids, "the peak model needs (it forecasts a signal over the pools)")
    frame, _ = validate_series(raw.reset_index(drop=True))
    steps = frame.groupby(UID)[DS].apply(lambda d: d.diff().median())
    fleets = []
    for step, of_step in steps.groupby(steps, sort=True):
        scored = tuple(u for u in ids if u in of_step.index)
        if not scored:
            continue
        targets = tuple(sorted({u.rpartition("/")[2] for u in scored}))
        leads = pool_leads(FILE_LEADS, pd.Timedelta(step))
        part = frame[frame[UID].isin(of_step.index)].reset_index(drop=True)
        name = "files" if steps.nunique() == 1 else f"files_{pd.Timedelta(step)}"
        fleets.append(Fleet(name, part, targets, leads, scored))
    return fleets


def read_fleets(args: argparse.Namespace) -> list[Fleet]:
    """The fleets the options name: of ``--data`` files, else the shared ones.

    Everything a user can get wrong is checked here, before any fit.

    Raises:
        DataValidationError: an unknown or malformed series id, no series to score,
            or data the contract rejects.
        SourceError: a file is missing, empty or unreadable; no shared traces.
    """
    if args.data:
        raw = load_files(list(args.data))
        ids = pick_series(raw[UID].astype(str).unique(), args.series, signal=DEMAND)
        return file_fleets(raw, ids)
    shared = data_dir(args, ROOT)
    if shared is None:
        raise SourceError("no shared traces (../shared/data or --data-dir DIR); pass --data FILE")
    fleets = [f for f in load_fleets(shared) if f.name in args.fleets]
    if not args.series:
        return fleets
    scored = sorted({u for f in fleets for u in f.scored})
    unknown = [u for u in args.series if u not in scored]
    if unknown:
        raise DataValidationError(
            f"--series {unknown[0]!r} is not scored by the fleets {' '.join(args.fleets)} "
            f"(they score {listing(scored)}); to score a series of your own pass --data FILE"
        )
    kept = [replace(f, scored=tuple(u for u in f.scored if u in args.series)) for f in fleets]
    return [f for f in kept if f.scored]


def window_bounds(ds: pd.Series, share: float) -> pd.Timestamp:
    """The timestamp at ``share`` of a series' span."""
    first, last = ds.min(), ds.max()
    return pd.Timestamp(first + (last - first) * share)


def walk_forward(
    fleet: Fleet,
    params: dict[str, Any],
    until: float,
    quantiles: Sequence[float] = QUANTILES,
    progress: Counter | None = None,
) -> pd.DataFrame:
    """Forecast every origin from 50 % of each span minus a day, refitting at midnight."""
    frame = fleet.frame
    spans = frame.groupby(UID)[DS]
    starts = {u: window_bounds(d, TUNE[0]) - pd.Timedelta(days=1) for u, d in spans}
    ends = {u: window_bounds(d, until) for u, d in spans}
    cutoffs: set[pd.Timestamp] = set()
    for uid in fleet.scored:
        days = pd.date_range(starts[uid].floor("D"), ends[uid], freq="D")
        cutoffs |= set(days)
    parts = []
    for done, cutoff in enumerate(sorted(cutoffs), start=1):
        model = PeakQuantileForecaster(
            lead_steps=fleet.leads,
            quantiles=tuple(quantiles),
            targets=fleet.targets,
            **params,
        )
        model.fit(frame[frame[DS] < cutoff])
        upto = frame[
            (frame[DS] < cutoff + pd.Timedelta(days=1)) & frame[UID].isin(_pool_ids(frame, fleet))
        ]
        pred = model.predict_peak(upto, since=cutoff)
        parts.append(pred[pred[UID].isin(fleet.scored)])
        if progress is not None:
            progress(done, len(cutoffs))
    out = pd.concat(parts, ignore_index=True)
    keep = [(out[UID] == u) & (out[DS] >= starts[u]) & (out[DS] <= ends[u]) for u in fleet.scored]
    return out[np.logical_or.reduce(keep)].reset_index(drop=True)


def _pool_ids(frame: pd.DataFrame, fleet: Fleet) -> set[str]:
    """Series of the scored series' pools (targets plus covariates): all a predict needs."""
    pools = {u.rpartition("/")[0] for u in fleet.scored}
    ids = frame[UID].unique()
    return {u for u in ids if u.rpartition("/")[0] in pools}


def build_tracks(
    fleet: Fleet,
    pred: pd.DataFrame,
    spans: dict[str, tuple[pd.Timestamp, pd.Timestamp]],
    quantiles: Sequence[float] = QUANTILES,
) -> list[tuple[Track, pd.DataFrame]]:
    """Per scored series and lead: what the online layer reads, and the origins' frame.

    The references are computed over each whole series (they read actuals only, and
    only before each origin); ``windows`` marks the tune and holdout origins.
    """
    levels = tuple(quantiles)
    out = []
    for (uid, steps), group in pred.groupby([UID, LEAD], sort=True):
        series = fleet.frame[fleet.frame[UID] == uid].sort_values(DS)
        y = series[Y].to_numpy(dtype=np.float64)
        lead = int(steps)
        step = pd.Timedelta(series[DS].diff().median())
        day = int(pd.Timedelta(days=1) / step)
        g = group.sort_values(DS).reset_index(drop=True)
        at = pd.DatetimeIndex(series[DS]).get_indexer(pd.DatetimeIndex(g[DS]))
        g["peak"] = lead_peak(y, lead)[at]
        g["ref_scale"] = recent_scale(y, day)[at]
        experts = {
            "reference": trailing_reference(y, lead, day, levels)[at],
            "time_of_day": seasonal_reference(y, lead, day, levels)[at],
        }
        for name, lag in zip(("yesterday", "last_week"), naive_lags(day), strict=True):
            experts[name] = (
                seasonal_naive_reference(y, lag, lead, day, levels)[at]
                if lag >= lead
                else np.full((len(g), len(levels)), np.nan)
            )
        first, last = spans[str(uid)]
        windows = {}
        for name, (lo, hi) in WINDOWS.items():
            start, end = (first + (last - first) * share for share in (lo, hi))
            windows[name] = ((g[DS] >= start) & ((g[DS] < end) | (hi >= 1.0))).to_numpy()
        track = Track(
            uid=str(uid),
            family=family_of(str(uid)),
            lead=lead,
            levels=levels,
            last=g[LAST].to_numpy(dtype=np.float64),
            scale=g[SCALE].to_numpy(dtype=np.float64),
            peak=g["peak"].to_numpy(dtype=np.float64),
            raw=g[[quantile_column(q) for q in levels]].to_numpy(dtype=np.float64),
            returning=held_levels(y, day_rule(day))[at],
            experts=experts,
            windows=windows,
        )
        out.append((track, g))
    return out


def scored_frame(
    tracks: Sequence[tuple[Track, pd.DataFrame]],
    chosen: dict[str, Constants],
    chosen_without: dict[str, Constants],
    every_level: bool = False,
) -> pd.DataFrame:
    """Every method's bounds per origin, the served mix at each family's fold constants.

    Columns per level ``q<level>``: the raw model, ``aci_`` (model + ACI), ``ref_``
    (trailing-day buffer), ``refaci_`` (it + ACI), ``sref_`` (time-of-day), ``yref_``
    (same time yesterday), ``wref_`` (same time last week), ``comb_`` (served, every
    expert) and ``comb4_`` (served without the two seasonal references, its own folds).
    """
    parts = []
    for track, frame in tracks:
        g = frame.copy()
        constants, without = chosen[track.family], chosen_without[track.family]
        aci = with_aci(track, constants.gamma, every_level)
        served_mix = mixed(track, aci, constants.eta, constants.halflife)
        comb = served(track, served_mix, constants.snap, constants.min_level)
        aci4 = with_aci(track, without.gamma, every_level)
        mix4 = mixed(track, aci4, without.eta, without.halflife, WITHOUT_SEASONAL)
        comb4 = served(track, mix4, without.snap, without.min_level)
        reference = track.experts["reference"]
        ref_scale = g["ref_scale"].to_numpy(dtype=np.float64)
        for k, q in enumerate(track.levels):
            col = quantile_column(q)
            g[f"aci_{col}"] = calibrate(
                track.raw[:, k], track.peak, track.scale, q, track.lead, constants.gamma
            )
            g[f"ref_{col}"] = reference[:, k]
            g[f"refaci_{col}"] = calibrate(
                reference[:, k], track.peak, ref_scale, q, track.lead, constants.gamma
            )
            g[f"sref_{col}"] = track.experts["time_of_day"][:, k]
            g[f"yref_{col}"] = track.experts["yesterday"][:, k]
            g[f"wref_{col}"] = track.experts["last_week"][:, k]
            g[f"comb_{col}"] = comb[:, k]
            g[f"comb4_{col}"] = comb4[:, k]
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def cell_scores(frame: pd.DataFrame, q: float, column: str) -> dict[str, float]:
    """Pinball, mean buffer, mean shortfall and coverage of one bound column.

    ``coverage`` is the share of peaks at or under the bound, ``coverage_strict`` the
    share strictly under it. They differ where the peak often equals the bound: on a
    pool whose demand is flat at most origins the peak equals current demand with
    probability above ``q``, and a bound at demand (the right ``q`` quantile there)
    covers more than ``q``. A bound is a calibrated ``q`` quantile when
    ``coverage_strict <= q <= coverage`` (the definition of a quantile where the
    distribution has an atom); see :func:`calibrated`.
    """
    ok = np.isfinite(frame["peak"]) & np.isfinite(frame[column])
    peak, bound, last = (frame.loc[ok, c].to_numpy() for c in ("peak", column, LAST))
    diff = peak - bound
    return {
        "pinball": float(np.mean(np.maximum(q * diff, (q - 1.0) * diff))),
        "buffer": float(np.mean(bound - last)),
        "shortfall": float(np.mean(np.maximum(diff, 0.0))),
        "coverage": float(np.mean(diff <= 0.0)),
        "coverage_strict": float(np.mean(diff < 0.0)),
        "n": int(ok.sum()),
    }


METHODS = {
    "model": "",
    "model_aci": "aci_",
    "reference": "ref_",
    "reference_aci": "refaci_",
    "time_of_day_reference": "sref_",
    "yesterday_reference": "yref_",
    "last_week_reference": "wref_",
    "combined_without_seasonal": "comb4_",
    "combined": "comb_",
}
RATIOS = tuple(m for m in METHODS if m != "reference")
"""Methods whose pinball is reported over the trailing-day buffer's."""


def score(
    frame: pd.DataFrame,
    spans: dict[str, tuple[pd.Timestamp, pd.Timestamp]],
    fleet_of: dict[str, str],
    window: tuple[float, float],
    quantiles: Sequence[float] = QUANTILES,
) -> list[dict[str, Any]]:
    """Per series x lead x quantile scores of every method on one window of each span."""
    cells = []
    for (uid, lead), group in frame.groupby([UID, LEAD], sort=True):
        first, last = spans[str(uid)]
        start, end = (first + (last - first) * share for share in window)
        sel = group[(group[DS] >= start) & ((group[DS] < end) | (window[1] >= 1.0))]
        for q in quantiles:
            col = quantile_column(q)
            cell: dict[str, Any] = {
                "fleet": fleet_of[str(uid)],
                "family": family_of(str(uid)),
                "series": uid,
                "lead": int(lead),
            }
            cell["q"] = q
            for method, prefix in METHODS.items():
                cell[method] = cell_scores(sel, q, f"{prefix}{col}")
            ref, ref_aci = cell["reference"]["pinball"], cell["reference_aci"]["pinball"]
            for method in RATIOS:
                cell[f"ratio_{method}"] = cell[method]["pinball"] / ref if ref > 0 else np.nan
            cell["ratio_aci_vs_reference_aci"] = (
                cell["model_aci"]["pinball"] / ref_aci if ref_aci > 0 else np.nan
            )
            cells.append(cell)
    return cells


COVERAGE_TOLERANCE = 0.03
"""Issue #12's calibration target: coverage within +-0.03 of nominal."""


def calibrated(scores: dict[str, float], q: float, tie_aware: bool) -> bool:
    """Whether a cell's coverage is within the tolerance of nominal.

    Plain: ``|coverage - q| <= 0.03``. Tie-aware: ``q`` lies within 0.03 of the interval
    ``[coverage_strict, coverage]``, so a bound exactly at an atom of the peak's
    distribution counts as the quantile it is.
    """
    low = scores["coverage_strict"] if tie_aware else scores["coverage"]
    return low - COVERAGE_TOLERANCE <= q <= scores["coverage"] + COVERAGE_TOLERANCE


GPU_FLEETS = ("helios", "helios_total", "helios_vc", "alibaba_lora", "alibaba_openb")
DEFAULT_FLEETS = ("helios_total", "helios_vc", "alibaba_lora", "alibaba_openb", "nab")


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Average ratios and coverage per family, over the GPU traces' cells and over all."""
    out: dict[str, Any] = {}
    groups = {
        f: [c for c in cells if c["family"] == f] for f in sorted({c["family"] for c in cells})
    }
    groups["gpu_traces"] = [c for c in cells if c["fleet"] in GPU_FLEETS]
    groups["all"] = cells
    for name, group in groups.items():
        if not group:
            continue
        entry: dict[str, Any] = {"cells": len(group)}
        levels = sorted({c["q"] for c in group})
        for key in (*(f"ratio_{m}" for m in RATIOS), "ratio_aci_vs_reference_aci"):
            values = np.array([c[key] for c in group], dtype=float)
            values = values[np.isfinite(values)]
            entry[f"mean_{key}"] = float(values.mean()) if values.size else None
            entry[f"geomean_{key}"] = float(np.exp(np.log(values).mean())) if values.size else None
            entry[f"max_{key}"] = float(values.max()) if values.size else None
        for method in METHODS:
            err = [abs(c[method]["coverage"] - c["q"]) for c in group]
            entry[f"mean_abs_coverage_error_{method}"] = float(np.mean(err))
            entry[f"max_abs_coverage_error_{method}"] = float(np.max(err))
            entry[f"mean_coverage_{method}"] = float(
                np.mean([c[method]["coverage"] for c in group])
            )
            for tie_aware, key in ((False, "calibrated"), (True, "calibrated_tie_aware")):
                ok = [calibrated(c[method], c["q"], tie_aware) for c in group]
                entry[f"cells_{key}_{method}"] = int(sum(ok))
        for key in ("ratio_model_aci", "ratio_combined", "ratio_combined_without_seasonal"):
            for q in levels:
                sub = [c[key] for c in group if c["q"] == q and np.isfinite(c[key])]
                entry[f"mean_{key}_q{q:g}"] = float(np.mean(sub)) if sub else None
        for q in levels:
            cov = [c["combined"]["coverage"] for c in group if c["q"] == q]
            entry[f"mean_coverage_combined_q{q:g}"] = float(np.mean(cov))
        out[name] = entry
    return out


TARGET_RATIO = 0.85
"""Issue #40's bar: the served bound's pinball at most this times the buffer's, per family."""


def print_cells(cells: list[dict[str, Any]], title: str) -> None:
    """Print one row per cell: the buffer, the served mix and the experts' ratios."""
    print(f"\n## {title}")
    print(
        "| family | series | L | q | buffer: pinball / coverage | served: buffer / pinball"
        " / coverage | ratio served | without seasonal | model+ACI | time-of-day"
        " | yesterday | last week |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        r, k = c["reference"], c["combined"]
        ratios = " | ".join(
            f"{c[f'ratio_{m}']:.3f}"
            for m in (
                "combined",
                "combined_without_seasonal",
                "model_aci",
                "time_of_day_reference",
                "yesterday_reference",
                "last_week_reference",
            )
        )
        print(
            f"| {c['family']} | {c['series']} | {c['lead']} | {c['q']:g}"
            f" | {r['pinball']:.3f} / {r['coverage']:.3f}"
            f" | {k['buffer']:.2f} / {k['pinball']:.3f} / {k['coverage']:.3f} | {ratios} |"
        )


def print_families(
    summary: dict[str, Any],
    chosen: dict[str, Constants],
    chosen_without: dict[str, Constants],
    title: str,
) -> None:
    """Print one row per family: served ratio by level, coverage, the constants chosen."""
    print(f"\n## {title}")
    print(
        "| family | cells | ratio served (q0.9 / q0.95 / mean / max cell) | target"
        f" <= {TARGET_RATIO:g} | without seasonal | coverage q0.9 / q0.95 | cells within"
        " +-0.03 (tie-aware) | constants (gamma, eta, half-life, snap, min level)"
        " | without seasonal |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, e in summary.items():
        levels = sorted(
            float(k.rsplit("_q", 1)[1]) for k in e if k.startswith("mean_coverage_combined_q")
        )
        by_q = " / ".join(f"{e[f'mean_ratio_combined_q{q:g}']:.3f}" for q in levels)
        cov = " / ".join(f"{e[f'mean_coverage_combined_q{q:g}']:.3f}" for q in levels)
        mean = e["mean_ratio_combined"]
        met = "met" if mean is not None and mean <= TARGET_RATIO else "not met"
        met = met if name in chosen else "-"  # the GPU traces and all cells: no family
        fold = _constants_text(chosen.get(name))
        fold_without = _constants_text(chosen_without.get(name))
        print(
            f"| {name} | {e['cells']} | {by_q} / {mean:.3f} / {e['max_ratio_combined']:.3f}"
            f" | {met} | {e['mean_ratio_combined_without_seasonal']:.3f} | {cov}"
            f" | {e['cells_calibrated_combined']} ({e['cells_calibrated_tie_aware_combined']})"
            f" | {fold} | {fold_without} |"
        )


def _constants_text(constants: Constants | None) -> str:
    if constants is None:
        return "-"
    c = constants
    return f"{c.gamma:g}, {c.eta:g}, {c.halflife:g}, {c.snap:g}, {c.min_level:g}"


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``name=value`` pairs (values parsed as JSON where they parse) for the forecaster."""
    params: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value
    return params


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--until", choices=("tune", "holdout"), default="holdout")
    parser.add_argument(
        "--fleets",
        nargs="*",
        choices=(*GPU_FLEETS, "nab"),
        default=DEFAULT_FLEETS,
        help="fleets of the shared traces to run (not with --data)",
    )
    parser.add_argument("--param", nargs="*", default=[], help="forecaster name=value")
    parser.add_argument(
        "--quantiles",
        type=float,
        nargs="+",
        default=list(QUANTILES),
        help="levels forecast and scored (e.g. 0.98 0.99 0.995 0.999 for the tail)",
    )
    parser.add_argument(
        "--aci-every-level",
        action="store_true",
        help="calibrate the combination's expert by ACI at every level, the extreme ones too",
    )
    grid = Grid()
    for name, help_text in (
        ("gamma", "ACI step sizes tried"),
        ("eta", "combination sharpnesses tried"),
        ("halflife", "combination loss half-lives tried, in steps"),
        ("snap", "scale units a mix is set to demand within, tried"),
        ("min-level", "lowest levels held at the return level tried (1: never)"),
    ):
        field_name = name.replace("-", "_")
        parser.add_argument(
            f"--{name}",
            type=float,
            nargs="+",
            default=list(getattr(grid, field_name)),
            help=f"{help_text} (the first is the served value's place in a tie)",
        )
    parser.add_argument(
        "--in-sample",
        action="store_true",
        help="choose the constants on every family's tune window, the scored one's too (the "
        "old way, labelled in-sample); default: leave the scored family out",
    )
    parser.add_argument(
        "--from-forecasts",
        type=Path,
        nargs="*",
        default=None,
        help="rescore the model forecasts saved by --save-forecasts instead of refitting",
    )
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--save-forecasts", type=Path, default=None)
    add_input_options(parser, "series ids to score", f"every */{DEMAND} series")
    args = parser.parse_args(argv)
    params = parse_params(args.param)
    levels = tuple(sorted(set(args.quantiles)))
    if not all(0.0 < q < 1.0 for q in levels):
        parser.error(f"--quantiles must lie in (0, 1); got {list(args.quantiles)}")
    grid = Grid(
        gamma=tuple(args.gamma),
        eta=tuple(args.eta),
        halflife=tuple(args.halflife),
        snap=tuple(args.snap),
        min_level=tuple(args.min_level),
    )
    try:
        fleets = read_fleets(args)
    except INPUT_ERRORS as exc:
        return input_error(parser.prog, exc)
    until = TUNE[1] if args.until == "tune" else HOLDOUT[1]
    preds, spans, fleet_of, seconds = [], {}, {}, {}
    saved = (
        pd.concat([pd.read_parquet(p) for p in args.from_forecasts], ignore_index=True)
        if args.from_forecasts
        else None
    )
    if saved is not None:
        missing = [quantile_column(q) for q in levels if quantile_column(q) not in saved.columns]
        if missing:
            parser.error(
                f"the saved forecasts have no {missing}; pass the --quantiles they were saved with"
            )
    for fleet in fleets:
        t0 = time.perf_counter()
        if saved is None:
            progress = counter(f"{fleet.name} walk-forward", "days")
            try:
                pred = walk_forward(fleet, params, until, levels, progress)
            except DataValidationError as exc:
                if not args.data:
                    raise  # the shared traces are long enough: a fault, not a mistake
                # Before the first cutoff there may be no row at all (no target series).
                why = f" ({exc})" if isinstance(exc, InsufficientHistoryError) else ""
                return input_error(
                    parser.prog,
                    DataValidationError(
                        f"--data: too little history to fit on before the first forecast, at "
                        f"50 % of each series' span minus a day{why}; give longer series"
                    ),
                )
        else:
            pred = saved[saved[UID].isin(fleet.scored)]
            pred = pred.drop(columns=[c for c in ("peak", "ref_scale") if c in pred.columns])
            pred = pred[[c for c in pred.columns if "_q" not in c]].reset_index(drop=True)
        seconds[fleet.name] = round(time.perf_counter() - t0, 1)
        print(f"{fleet.name}: {len(pred)} forecasts in {seconds[fleet.name]} s", flush=True)
        preds.append((fleet, pred))
        for uid, ds in fleet.frame.groupby(UID)[DS]:
            spans[str(uid)] = (ds.min(), ds.max())
            fleet_of[str(uid)] = fleet.name
    if args.save_forecasts is not None:
        pd.concat([p for _, p in preds], ignore_index=True).to_parquet(args.save_forecasts)
    windows = {"tune": TUNE} if args.until == "tune" else dict(WINDOWS)
    payload = heldout_run(preds, spans, fleet_of, grid, levels, windows, args)
    payload["params"] = params
    if saved is None:
        payload["fit_seconds"] = seconds
    else:
        payload["forecasts_rescored"] = [str(p) for p in args.from_forecasts]
    if args.output is not None:
        payload["protocol"] = __doc__
        args.output.write_text(json.dumps(payload, indent=1, default=str))
        print(f"wrote {args.output}")
    return 0


def heldout_run(
    preds: Sequence[tuple[Fleet, pd.DataFrame]],
    spans: dict[str, tuple[pd.Timestamp, pd.Timestamp]],
    fleet_of: dict[str, str],
    grid: Grid,
    levels: Sequence[float],
    windows: dict[str, tuple[float, float]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Choose the online constants per fold (or in-sample), score every window, report."""
    t0 = time.perf_counter()
    tracks = [t for fleet, pred in preds for t in build_tracks(fleet, pred, spans, levels)]
    only = [track for track, _ in tracks]
    every = args.aci_every_level
    scores = grid_scores(only, grid, EXPERTS, every, counter("online grid", "mixes"))
    scores_without = grid_scores(
        only, grid, WITHOUT_SEASONAL, every, counter("online grid without seasonal", "mixes")
    )
    families = sorted({t.family for t in only})
    if args.in_sample:
        mode = "in-sample: constants chosen on every family's tune window, the scored one's too"
        chosen = {f: choose(scores) for f in families}
        chosen_without = {f: choose(scores_without) for f in families}
    else:
        mode = "leave-one-family-out: each family's constants chosen on the others' tune windows"
        chosen, chosen_without = folds(scores), folds(scores_without)
    production = choose(scores)
    frame = scored_frame(tracks, chosen, chosen_without, every)
    print(f"\nmode: {mode}")
    payload: dict[str, Any] = {
        "mode": mode,
        "quantiles": list(levels),
        "aci_every_level": every,
        "grid": grid.as_dict(),
        "grid_size": len(grid),
        "served_constants": SERVED.as_dict(),
        "production": {
            "constants": production.as_dict(),
            "changed": production != SERVED,
            "tune_objective": float(objective(scores).loc[astuple(production)]),
            "served_tune_objective": float(objective(scores).loc[astuple(SERVED)]),
        },
        "folds": {
            f: {
                "constants": chosen[f].as_dict(),
                "without_seasonal": chosen_without[f].as_dict(),
            }
            for f in families
        },
        "windows": {},
    }
    for name, window in windows.items():
        cells = score(frame, spans, fleet_of, window, levels)
        summary = summarise(cells)
        print_cells(cells, f"{name} window {window} ({mode})")
        print_families(summary, chosen, chosen_without, f"{name} window {window}, by family")
        payload["windows"][name] = {"summary": summary, "cells": cells}
    p = payload["production"]
    print(
        f"\nproduction constants (chosen on every family's tune window): {p['constants']}"
        f" ({'changed' if p['changed'] else 'unchanged'}; tune objective"
        f" {p['tune_objective']:.4f}, served {p['served_tune_objective']:.4f})"
    )
    payload["online_seconds"] = round(time.perf_counter() - t0, 1)
    return payload


if __name__ == "__main__":
    raise SystemExit(main())
