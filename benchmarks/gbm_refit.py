"""Gradient boosting's final forecast from the fold models vs refit on all the history.

Subject: :class:`forecaster.models.gbm.GradientBoosting` with ``refit=False`` (the
default: the final forecast is the fold models' forecast from the last origin, one
fit per anchor) against ``refit=True`` (each used anchor refitted on all the history
for the final forecast, the former behaviour: twice the fits), and the default
champion (the median of the families) with either one as its gradient boosting.

Protocol: ``benchmarks/forecast_accuracy.py``'s, on the same real traces: 12
rolling-origin test windows per series, horizons 10 min / 1 h / 3 h, at most 28 days
of training, levels 0.5/0.9/0.95, mean MASE per model and horizon. Both variants (and
the other families the medians need) are backtested side by side in one run, on the
same windows, so the only difference is the final fit. Nothing is tuned here.

Run: ``python benchmarks/gbm_refit.py`` (``--series`` for a subset); prints a table and
writes ``benchmarks/results/gbm_refit.json``.
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

from benchmarks.forecast_accuracy import HORIZONS, LEVELS, TEST_WINDOWS, read_input  # noqa: E402
from benchmarks.inputs import add_input_options, keep_series  # noqa: E402
from forecaster.backtest import Estimator, backtest  # noqa: E402
from forecaster.contract import validate_series  # noqa: E402
from forecaster.metrics import HORIZON, horizon_steps, score_backtest  # noqa: E402
from forecaster.models.catalog import default_models, steps_in  # noqa: E402
from forecaster.models.combination import MEDIAN, median_of  # noqa: E402
from forecaster.types import CUTOFF, DS, MODEL, STEP, UID  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gbm_refit.json"
REFIT = "gbm_refit"
MEDIAN_REFIT = "median_refit"


def models_for(step: pd.Timedelta, horizon: int) -> list[Estimator]:
    """The default families plus the gradient boosting refitted (alias ``gbm_refit``)."""
    families: list[Estimator] = list(default_models(step, horizon))
    gbm = next(m for m in families if m.model_name == "gbm")
    refit = type(gbm)(**{**gbm.get_params(), "refit": True, "alias": REFIT})
    return [*families, refit]


def with_medians(frame: pd.DataFrame, families: Sequence[str]) -> pd.DataFrame:
    """Add the median of the families with each gradient boosting variant."""
    keys = [UID, CUTOFF, STEP]
    default = [f for f in families if f != REFIT]
    refit = [f if f != "gbm" else REFIT for f in default]
    out = [frame]
    for name, members in ((MEDIAN, default), (MEDIAN_REFIT, refit)):
        rows = median_of([frame[frame[MODEL].isin(members)]], keys)
        out.append(rows.assign(**{MODEL: name}))
    return pd.concat(out, ignore_index=True)


def run_group(df: pd.DataFrame, step: pd.Timedelta, executor: ProcessPoolExecutor) -> pd.DataFrame:
    """Backtest one step's series; return the scores and the fit seconds per model."""
    labels = horizon_steps(HORIZONS, step)
    horizon = max(labels.values())
    models = models_for(step, horizon)
    result = backtest(
        models,
        df,
        horizon=horizon,
        n_windows=TEST_WINDOWS,
        levels=LEVELS,
        max_train=steps_in(pd.Timedelta(days=28), step),
        executor=executor,
    )
    frame = with_medians(result.frame, [m.model_name for m in models])
    scores = score_backtest(frame, result.scales, LEVELS, labels)
    return scores.assign(fit_s=scores[MODEL].map(result.fit_seconds))


def summarise(scores: pd.DataFrame) -> dict[str, Any]:
    """Mean MASE per model and horizon; each variant pair's ratio and cell wins."""
    mean = scores.groupby([MODEL, HORIZON])["mase"].mean().unstack(HORIZON)[HORIZONS]
    mean["all"] = scores.groupby(MODEL)["mase"].mean()
    wide = scores.pivot_table(index=[UID, HORIZON], columns=MODEL, values="mase")
    pairs: dict[str, Any] = {}
    for new, old in (("gbm", REFIT), (MEDIAN, MEDIAN_REFIT)):
        ok = wide[new].notna() & wide[old].notna()
        pairs[f"{new}_vs_{old}"] = {
            "mean_mase_ratio": {h: float(mean.loc[new, h] / mean.loc[old, h]) for h in mean},
            "cells": int(ok.sum()),
            "cells_better": int((wide.loc[ok, new] < wide.loc[ok, old] - 1e-12).sum()),
            "cells_worse": int((wide.loc[ok, new] > wide.loc[ok, old] + 1e-12).sum()),
        }
    fit = scores.drop_duplicates([UID, MODEL]).groupby(MODEL)["fit_s"].sum()
    return {
        "mean_mase": {m: {h: float(v) for h, v in row.items()} for m, row in mean.iterrows()},
        "pairs": pairs,
        "fit_seconds": {m: float(v) for m, v in fit.items() if np.isfinite(v)},
    }


def print_table(summary: dict[str, Any]) -> None:
    """Mean MASE per model and horizon, then each pair's ratio."""
    head = f"{'model':<16}" + "".join(f"{h:>9}" for h in [*HORIZONS, "all"]) + f"{'fit s':>9}"
    print(head)
    print("-" * len(head))
    for model, by_h in summary["mean_mase"].items():
        line = f"{model:<16}" + "".join(f"{by_h[h]:>9.4f}" for h in [*HORIZONS, "all"])
        print(line + f"{summary['fit_seconds'].get(model, float('nan')):>9.1f}")
    for pair, found in summary["pairs"].items():
        ratios = ", ".join(f"{h} {r:.4f}" for h, r in found["mean_mase_ratio"].items())
        print(
            f"{pair}: mean MASE ratio {ratios}; cells better {found['cells_better']}, "
            f"worse {found['cells_worse']} of {found['cells']}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison on the shared traces (or ``--data``)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=RESULTS)
    add_input_options(parser, "series ids")
    args = parser.parse_args(argv)
    raw = read_input(args)
    if raw is None:
        print("no shared traces (../shared/data or --data-dir); pass --data FILE instead.")
        return 1
    raw = keep_series(raw, list(args.series or []) or None)
    df, _ = validate_series(raw)
    steps = df.groupby(UID)[DS].apply(lambda s: s.diff().median())
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as executor:
        scores = pd.concat(
            [
                run_group(df[df[UID].isin(uids.index)], pd.Timedelta(step), executor)
                for step, uids in steps.groupby(steps)
            ],
            ignore_index=True,
        )
    summary = summarise(scores)
    print_table(summary)
    payload = {
        "protocol": {
            "horizons": HORIZONS,
            "test_windows": TEST_WINDOWS,
            "max_train_days": 28,
            "levels": list(LEVELS),
            "series": sorted(df[UID].unique()),
            "compared": "gbm (refit=False, default) vs gbm_refit (refit=True); median of "
            "the default families with each",
        },
        "summary": summary,
        "cells": scores.replace({np.nan: None}).to_dict(orient="records"),
        "wall_seconds": time.perf_counter() - started,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {args.output} ({payload['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
