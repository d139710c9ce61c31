"""One forecast-job cycle as the fleet grows: where a 5-minute cadence's time goes.

Subject: :func:`pipelines.jobs.forecast.run_forecast`, the scheduled ``forecast`` job,
through its real code path (SQLite store, local MLflow registry, the settings'
executor: a local process pool of ``--workers``), after one training with
:func:`pipelines.jobs.train.run_train` on the same history. For each size ``N`` the
fleet is ``N / 5`` pools with the sample's five signals each (allocated, queued and
demand GPUs, nodes, GPU utilisation; demand derived by the store as the job's ingest
derives it), 14 days at 5 min, seeded: a daily cycle of random level, amplitude and
phase, noise and bursts. The cycle is run ``--cycles`` times (3), as the scheduler
runs it: the first at the training's newest observation, in a process that has not
run one yet (it loads the champion, starts the job's worker pool and builds the peak
model's online states from scratch); each later one a step later, after one new
sample of every signal (the value of a day before) is stored, with the pool and the
states the run before left. The fleet's newest observation is at 23:55 UTC, so the
first cycle rebuilds the online states over the most origins they ever span (two days
less a step), the second is the first after midnight (the states' anchor moves: they
are rebuilt over one day) and the third continues them (one origin each), the
steady state of a 5-minute cadence. Each run's ``phase_seconds`` (``load``, ``read``,
``refit_predict``, ``peak``, ``peak_online``, ``store``) is reported with its wall
and CPU seconds (this process and all its descendants: the pool's workers too) and
the load average.

The issue's target (#41): one cycle at 1,000 series in under 60 s, a fifth of its
cadence. ``--model-set`` picks the candidates trained (``full``, the default set, or
``fast``); the cycle refits whatever the champion chose per series.

The cycle updates each series' model fitted at the training (``updated`` and
``refitted`` count the series each way; see :func:`pipelines.jobs.series_forecasts.forecast_fleet`);
what updating instead of refitting does to accuracy is
:mod:`benchmarks.forecast_update`'s to measure.

Run: ``python benchmarks/forecast_cycle.py [--sizes 15 100 1000] [--model-set full]
[--cycles 3] [--workdir DIR]``. Prints a table and writes ``benchmarks/results/forecast_cycle.json``
(sizes measured before and not now are kept, each with when it was measured). Training
1,000 series takes 10 minutes or more on 2 cores: with ``--workdir`` each size's
deployment (store, registry) is kept in ``DIR/<size>`` and a later run reuses its
trained champion instead of training again. The machine is shared: compare CPU
seconds and ratios across runs, not single wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil  # type: ignore[import-untyped]  # installed with distributed
import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.training_scale import load1  # noqa: E402
from pipelines.config.pools import PoolConfig  # noqa: E402
from pipelines.config.settings import Settings, load_settings  # noqa: E402
from pipelines.executors import cancel_local_work  # noqa: E402
from pipelines.jobs.forecast import run_forecast  # noqa: E402
from pipelines.jobs.train import run_train  # noqa: E402
from pipelines.store.store import open_store  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "forecast_cycle.json"
STEP = pd.Timedelta(minutes=5)
DAYS = 14
POINTS = DAYS * 288
SIGNALS_PER_POOL = 5
"""allocated, queued, demand (derived), nodes, GPU utilisation."""
GPUS_PER_NODE = 8
TARGET_S = 60.0
PHASES = ("load", "read", "refit_predict", "peak", "peak_online", "store")


def fleet(pools: int, seed: int = 7) -> pd.DataFrame:
    """The raw signals of ``pools`` pools (long frame), 14 days at 5 min, seeded."""
    rng = np.random.default_rng(seed)
    ds = pd.date_range("2025-06-01", periods=POINTS, freq=STEP, tz="UTC")
    t = np.arange(POINTS)
    frames = []
    for i in range(pools):
        level = rng.uniform(16, 160)
        cycle = level * rng.uniform(0.2, 0.6) * np.sin(2 * np.pi * (t / 288 + rng.uniform()))
        noise = rng.normal(0, 0.05 * level + 0.5, POINTS)
        bursts = np.zeros(POINTS)
        for start in rng.choice(POINTS, size=rng.integers(5, 20), replace=False):
            bursts[start : start + rng.integers(6, 25)] += rng.uniform(0.2, 0.8) * level
        demand = np.clip(level + cycle + noise + bursts, 0, None)
        nodes = np.ceil(np.maximum(level + cycle, 0) / GPUS_PER_NODE) + 1
        allocated = np.minimum(demand, nodes * GPUS_PER_NODE)
        signals = {
            "allocated_gpus": allocated,
            "queue_gpus": demand - allocated,
            "nodes": nodes,
            "gpu_util": np.clip(allocated / (nodes * GPUS_PER_NODE), 0, 1),
        }
        for signal, y in signals.items():
            frames.append(pd.DataFrame({"unique_id": f"pool-{i:04d}/{signal}", "ds": ds, "y": y}))
    return pd.concat(frames, ignore_index=True)


def deployment(root: Path, pools: int, workers: int, model_set: str) -> Settings:
    """A pools file and settings in ``root``: SQLite store, local MLflow store."""
    pool_configs = [
        PoolConfig(
            name=f"pool-{i:04d}",
            node_group_id=f"ng-{i:04d}",
            gpus_per_node=GPUS_PER_NODE,
            min_nodes=0,
            max_nodes=200,
            lead_time=timedelta(minutes=10),
        ).model_dump(mode="json")
        for i in range(pools)
    ]
    (root / "pools.yaml").write_text(yaml.safe_dump({"pools": pool_configs}), encoding="utf-8")
    return load_settings(
        root=str(root),
        pools_file=str(root / "pools.yaml"),
        sample_dir=str(root / "no-sample"),
        model_set=model_set,
        scheduler={"workers": workers},
    )


@contextmanager
def deployment_dir(workdir: Path | None, size: int) -> Iterator[Path]:
    """``workdir/<size>`` (kept, created if missing), else a temporary directory."""
    if workdir is not None:
        path = workdir / str(size)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="foresight-cycle-") as tmp:
        yield Path(tmp)


def cpu_seconds() -> float:
    """CPU seconds of this process and all its descendants, live or reaped, so far.

    The forecast job's kept pool outlives a cycle, and its workers are the fork
    server's children: neither is in this process's reaped-children total.
    """
    me = psutil.Process()
    total = 0.0
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:  # exited between listing and reading
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def next_samples(history: pd.DataFrame, at: pd.Timestamp) -> pd.DataFrame:
    """One new sample of every signal at ``at``: its value a day before (seeded data)."""
    day_before = history[history["ds"] == at - pd.Timedelta(days=1)]
    return day_before.assign(ds=at)


def measure(
    size: int,
    workers: int,
    model_set: str,
    console: Console,
    workdir: Path | None = None,
    cycles: int = 3,
) -> dict[str, Any]:
    """Train once on ``size`` series (or reuse ``workdir``'s training), then time the cycles."""
    pools = max(1, size // SIGNALS_PER_POOL)
    with deployment_dir(workdir, size) as root:
        settings = deployment(root, pools, workers, model_set)
        history = fleet(pools)
        end = pd.Timestamp(history["ds"].max()).to_pydatetime()
        with open_store(settings.store_url) as store:
            train_s: float | None = None
            if not (_trained(settings) and store.samples.last_timestamps()):
                store.samples.upsert_with_demand(history)
                console.print(f"{size} series: training ({model_set} set)...")
                started = time.perf_counter()
                trained = run_train(settings, store=store, now=end + STEP)
                train_s = time.perf_counter() - started
                if trained.outcome not in ("ok", "partial"):
                    raise SystemExit(f"training failed at {size} series: {trained.summary}")
            else:
                console.print(f"{size} series: reusing the champion trained in {root}")
            runs = []
            for attempt in range(1, cycles + 1):
                now = pd.Timestamp(end) + (attempt - 1) * STEP
                if attempt > 1:
                    store.samples.upsert_with_demand(next_samples(history, now))
                before_cpu, before_load = cpu_seconds(), load1()
                started = time.perf_counter()
                made = run_forecast(settings, store=store, now=now.to_pydatetime())
                wall = time.perf_counter() - started
                if made.outcome not in ("ok", "partial"):
                    raise SystemExit(f"the cycle failed at {size} series: {made.summary}")
                runs.append(
                    {
                        "cycle": attempt,
                        "now": now.isoformat(),
                        "wall_s": round(wall, 2),
                        "cpu_s": round(cpu_seconds() - before_cpu, 2),
                        "series": made.details["series"],
                        "rows": made.details["rows"],
                        "peak_rows": made.details["peak_rows"],
                        "updated": made.details.get("updated"),
                        "refitted": made.details.get("refitted"),
                        "phase_seconds": made.details["phase_seconds"],
                        "load_before": round(before_load, 2),
                        "load_after": round(load1(), 2),
                    }
                )
                console.print(f"{size} series: cycle {attempt} {wall:.1f} s")
    # The next size's first cycle starts its own pool, as a new scheduler process would.
    cancel_local_work()
    return {
        "series": size,
        "pools": pools,
        "model_set": model_set,
        "workers": workers,
        "train_s": None if train_s is None else round(train_s, 1),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cycles": runs,
    }


def _trained(settings: Settings) -> bool:
    """Whether the deployment's registry already holds a champion (a kept workdir)."""
    return any(settings.models_dir.glob("**/MLmodel")) if settings.models_dir.is_dir() else False


def table(rows: Sequence[dict[str, Any]]) -> Table:
    """One line per size and cycle: wall, CPU and each phase's seconds."""
    out = Table(title=f"forecast-job cycle (target: under {TARGET_S:.0f} s at 1,000 series)")
    for name in ("series", "cycle", "wall s", "CPU s", *PHASES, "1-min load"):
        out.add_column(name, justify="right")
    for row in rows:
        for cycle in row["cycles"]:
            phases = cycle["phase_seconds"]
            out.add_row(
                str(row["series"]),
                str(cycle["cycle"]),
                f"{cycle['wall_s']:.1f}",
                f"{cycle['cpu_s']:.1f}",
                *(f"{phases[p]:.2f}" if p in phases else "-" for p in PHASES),
                f"{cycle['load_before']:.1f}",
            )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Measure each size, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[15, 100, 1000])
    parser.add_argument("--model-set", choices=("full", "fast"), default="full")
    parser.add_argument("--workers", type=int, default=2, help="local process pool size")
    parser.add_argument("--cycles", type=int, default=3, help="cycles run, a step apart")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep each size's deployment in DIR/<size> and reuse its trained champion",
    )
    args = parser.parse_args(argv)
    if any(size < SIGNALS_PER_POOL for size in args.sizes):
        parser.error(f"--sizes must be at least {SIGNALS_PER_POOL} (one pool's signals)")
    console = Console()
    rows = [
        measure(size, args.workers, args.model_set, console, args.workdir, args.cycles)
        for size in args.sizes
    ]
    console.print(table(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    measured = {row["series"] for row in rows}
    kept = []
    if args.out.is_file():
        earlier = json.loads(args.out.read_text(encoding="utf-8")).get("sizes", [])
        kept = [row for row in earlier if row.get("series") not in measured]
    document = {
        "target_s_at_1000": TARGET_S,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "sizes": sorted([*kept, *rows], key=lambda row: int(row["series"])),
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
