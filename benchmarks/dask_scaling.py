"""Training on Dask with 1 and 2 workers: the speed-up and each worker's throughput.

Subject: one whole training as ``benchmarks/training_scale.py`` times it (the scheduled
``train`` job's path: backtest, scoring, champion fit, MLflow run and registration),
fanned out to a Dask ``LocalCluster`` of ``W`` single-threaded worker processes, for
``W`` = 1 and 2 on the same seeded series. The runs alternate (1, 2, 2, 1 by default)
so that a change in the machine's load falls on both counts alike; each run gets a
fresh cluster, started before the clock starts.

Recorded per run: wall seconds, series per second, the CPU seconds the workers spent
(read from each worker process) and this process's own (the driver: splitting,
scoring, MLflow), and the load average before and after. The table gives, per worker
count, the median wall time, the speed-up over one worker and the efficiency
(speed-up / workers), and each worker's throughput (series per worker CPU second).
A training is not all fan-out: what the driver does alone bounds the speed-up
(Amdahl), so the driver's share is printed beside it.

Run: ``python benchmarks/dask_scaling.py [--series 100] [--order 1,2,2,1]``; writes
``benchmarks/results/dask_scaling.json``. On a shared 2-core machine two workers
compete with the driver and with anything else running: measure on a quiet machine
and compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.training_scale import (  # noqa: E402
    console,
    cpu_seconds,
    job_plan,
    load1,
    synthetic,
    time_training,
)

RESULTS = ROOT / "benchmarks" / "results" / "dask_scaling.json"


@dataclass(frozen=True)
class Run:
    """One training on ``workers`` Dask workers."""

    workers: int
    series: int
    seconds: float
    worker_cpu_s: float
    driver_cpu_s: float
    load_before: float
    load_after: float
    failures: int


def worker_cpu(client: Any) -> float:
    """CPU seconds spent so far by every worker process of ``client``'s cluster."""

    def own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    return float(sum(client.run(own).values()))


def parse_order(text: str) -> list[int]:
    """``"1,2,2,1"`` -> ``[1, 2, 2, 1]``; each a worker count of 1 or more."""
    try:
        order = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--order takes worker counts separated by commas, e.g. 1,2,2,1; got {text!r}"
        ) from None
    if not order or min(order) < 1:
        raise argparse.ArgumentTypeError(f"--order needs worker counts of 1 or more, got {text!r}")
    return order


def one_run(workers: int, n_series: int) -> Run:
    """Start a cluster of ``workers``, train on it once, stop it."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None
    )
    try:
        with Client(cluster) as client:  # type: ignore[no-untyped-call]
            before = worker_cpu(client)
            driver_before = cpu_seconds()
            measured = time_training(
                "full",
                "dask",
                synthetic(n_series),
                job_plan(),
                workers=workers,
                dask_address=cluster.scheduler_address,
            )
            spent = worker_cpu(client) - before
            driver = cpu_seconds() - driver_before
    finally:
        cluster.close()  # type: ignore[no-untyped-call]
    return Run(
        workers,
        n_series,
        measured.seconds,
        round(spent, 1),
        round(driver, 1),
        measured.load_before,
        measured.load_after,
        measured.failures,
    )


def summary(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per worker count: median wall, speed-up over the fewest workers, efficiency."""
    counts = sorted({run.workers for run in runs})
    wall = {w: statistics.median(r.seconds for r in runs if r.workers == w) for w in counts}
    base = counts[0]
    rows = []
    for w in counts:
        mine = [r for r in runs if r.workers == w]
        speedup = wall[base] / wall[w] * 1.0
        worker_cpu_s = statistics.median(r.worker_cpu_s for r in mine)
        driver_cpu_s = statistics.median(r.driver_cpu_s for r in mine)
        rows.append(
            {
                "workers": w,
                "runs": len(mine),
                "median_s": round(wall[w], 2),
                "series_per_s": round(mine[0].series / wall[w], 3),
                "speedup": round(speedup, 3),
                "efficiency": round(speedup * base / w, 3),
                "series_per_worker_cpu_s": round(mine[0].series / worker_cpu_s, 3)
                if worker_cpu_s > 0
                else None,
                "driver_share": round(driver_cpu_s / (driver_cpu_s + worker_cpu_s), 3)
                if driver_cpu_s + worker_cpu_s > 0
                else None,
            }
        )
    return rows


def report(runs: Sequence[Run], rows: Sequence[dict[str, Any]]) -> None:
    """Print each run and the summary."""
    from rich.table import Table

    detail = Table(title="Dask training runs, in the order run")
    for column in ("workers", "series", "wall s", "worker cpu s", "driver cpu s", "load"):
        detail.add_column(column, justify="right")
    for run in runs:
        detail.add_row(
            str(run.workers),
            f"{run.series:,}",
            f"{run.seconds:.1f}",
            f"{run.worker_cpu_s:.1f}",
            f"{run.driver_cpu_s:.1f}",
            f"{run.load_before:.2f} -> {run.load_after:.2f}",
        )
    console.print(detail)
    table = Table(title="Scaling across Dask workers (median of each count's runs)")
    for column in (
        "workers",
        "median s",
        "series/s",
        "speed-up",
        "efficiency",
        "series per worker cpu s",
        "driver share of cpu",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row["workers"]),
            f"{row['median_s']:.1f}",
            f"{row['series_per_s']:.3f}",
            f"{row['speedup']:.2f}x",
            f"{row['efficiency']:.0%}",
            "-"
            if row["series_per_worker_cpu_s"] is None
            else f"{row['series_per_worker_cpu_s']:.3f}",
            "-" if row["driver_share"] is None else f"{row['driver_share']:.0%}",
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, run the trainings in order, print, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100, help="series per training")
    parser.add_argument(
        "--order", type=parse_order, default=[1, 2, 2, 1], help="worker counts, run in turn"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.series < 1:
        parser.error(f"--series needs at least 1 series, got {args.series}")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    runs = []
    for index, workers in enumerate(args.order, start=1):
        console.print(
            f"run {index}/{len(args.order)}: {workers} worker(s), {args.series} series "
            f"(load {load1()})"
        )
        began = time.perf_counter()
        runs.append(one_run(workers, args.series))
        console.print(
            f"  {runs[-1].seconds:.1f} s ({time.perf_counter() - began:.1f} s with the cluster)"
        )
    rows = summary(runs)
    report(runs, rows)
    result = {
        "what": "one whole training (full set) on a Dask LocalCluster of W single-threaded "
        "worker processes",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": [asdict(run) for run in runs],
        "summary": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
