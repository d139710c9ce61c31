"""Plot forecast peak quantiles against realised peaks, and their coverage, on one trace.

Reads the forecasts ``benchmarks/peak_quantile.py --save-forecasts`` wrote and draws,
for one series and lead: the realised lead-time peak over two held-out days with the
model's ACI-calibrated q0.9 / q0.95 and the trailing-day reference's q0.95 (top), and
the trailing-day coverage of each over the whole scored period (bottom).

Run: ``python benchmarks/peak_plot.py forecasts.parquet``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forecaster.types import DS, UID  # noqa: E402

OUTPUT = ROOT / "docs" / "img" / "peak_quantile_earth_total.png"


def draw(frame: pd.DataFrame, uid: str, lead: int, days: int, output: Path) -> None:
    """Draw the two panels for one series and lead and save them as a PNG."""
    g = frame[(frame[UID] == uid) & (frame["lead"] == lead)].sort_values(DS).set_index(DS)
    end = g.index.max()
    window = g[g.index > end - pd.Timedelta(days=days)]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), height_ratios=(3, 2))
    top.plot(window.index, window["peak"], color="black", lw=1.0, label="realised peak")
    top.plot(window.index, window["aci_q0.95"], color="tab:red", lw=1.0, label="model+ACI q0.95")
    top.plot(window.index, window["aci_q0.9"], color="tab:orange", lw=0.8, label="model+ACI q0.9")
    top.plot(
        window.index,
        window["ref_q0.95"],
        color="tab:blue",
        lw=0.8,
        ls="--",
        label="trailing-day reference q0.95",
    )
    top.set_ylabel("GPUs")
    top.set_title(f"{uid}: peak over the next {lead} step(s), last {days} days of the trace")
    top.legend(loc="upper left", fontsize=8)
    steps_per_day = int(pd.Timedelta(days=1) / g.index.to_series().diff().median())
    for col, color, label in (
        ("aci_q0.95", "tab:red", "model+ACI q0.95"),
        ("aci_q0.9", "tab:orange", "model+ACI q0.9"),
        ("ref_q0.95", "tab:blue", "reference q0.95"),
        ("q0.95", "tab:gray", "model raw q0.95"),
    ):
        covered = (g["peak"] <= g[col]).astype(float).where(g["peak"].notna())
        rolling = covered.rolling(steps_per_day, min_periods=steps_per_day // 2).mean()
        bottom.plot(rolling.index, rolling, color=color, lw=1.0, label=label)
    for level in (0.9, 0.95):
        bottom.axhline(level, color="black", lw=0.6, ls=":")
    bottom.set_ylabel("trailing-day coverage")
    bottom.set_ylim(0.7, 1.01)
    bottom.legend(loc="lower left", fontsize=8, ncol=4)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=90)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("forecasts", type=Path)
    parser.add_argument("--series", default="earth_total/demand_gpus")
    parser.add_argument("--lead", type=int, default=1)
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    draw(pd.read_parquet(args.forecasts), args.series, args.lead, args.days, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
