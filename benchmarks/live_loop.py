"""The live loop against the offline replay: the closed-loop twin on real and sample demand.

Each run lays out a throw-away deployment, trains a champion on the case's history
(the quick model set), starts the real ``foresight serve --clock replay`` (API and
scheduler) and drives it in lock-step (``pipelines.twin``): per simulated step the
simulated cluster's readings are pushed over HTTP, the forecast job runs for the
step, the twin waits until the service serves that run and the cluster acts on the
recommendation. The same case is then replayed offline (``pipelines.simulate``) with
the policy fed the forecast runs the twin stored, so the two differ only by the loop.

Cases: Helios Earth total (``../shared/data``; the first 7 days are history, the next
2 days replayed, 10-min steps; 8 GPUs per node, lead 10 min, target utilisation 1,
sized as ``decision_quality.py`` sizes it) and the committed sample's ``a100-train``
pool (its first 7 days are history, the next 12 hours replayed, 5-min steps; the
pool's own settings). Each case runs with the cluster set to ``desired_nodes`` as the
replay assumes (``replay``: the 3 % comparison) and as cluster-autoscaler with
placeholder pods (``autoscaler``: boot delay, 10-min unneeded time; the realistic
figure). A case without its data is skipped with a message.

A third case, run on its own (``--multi-pool STEPS``): the sample's ``a100-train`` work
on two node groups, on-demand and spot, under ``autoscaler``; pending pods grow the
group the priority expander picks from the ConfigMap the service serves
(``benchmarks/twin_multipool.py``), written to ``live_loop_multipool.json``.

Run: ``python benchmarks/live_loop.py [--quick] [--jobs 2]``. Prints a table per run
(twin vs replay: waiting GPU-hours, node-hours, scale events, relative difference),
a progress line per simulated hour, and writes ``benchmarks/results/live_loop.json``
and ``benchmarks/results/live_loop.png`` (nodes over time with demand; the sample's
as ``live_loop_sample.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.settings import load_app_settings  # noqa: E402
from benchmarks.decision_fleets import default_fleets  # noqa: E402
from benchmarks.decision_fleets import on_step as fleet_on_step  # noqa: E402
from benchmarks.decision_quality import LORA_PEAK_GPUS, VCS  # noqa: E402
from benchmarks.twin_multipool import run_group_case, sample_group_case  # noqa: E402
from forecaster.exceptions import SourceError  # noqa: E402
from forecaster.loaders import shared_data_dir  # noqa: E402
from pipelines.simulate.engine import simulate  # noqa: E402
from pipelines.simulate.foresight import ForesightPolicy  # noqa: E402
from pipelines.simulate.peak import PeakReplayForecaster  # noqa: E402
from pipelines.twin.case import TwinCase, sample_case, trace_case  # noqa: E402
from pipelines.twin.cluster import Semantics  # noqa: E402
from pipelines.twin.compare import FIGURES  # noqa: E402
from pipelines.twin.report import comparison_table, hourly_progress  # noqa: E402
from pipelines.twin.run import run_case  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "live_loop.json"
FIGURE = ROOT / "benchmarks" / "results" / "live_loop.png"
MULTI_RESULTS = ROOT / "benchmarks" / "results" / "live_loop_multipool.json"
HISTORY = timedelta(days=7)
EARTH_STEPS = 2 * 144  # 2 days of 10-min steps
SAMPLE_STEPS = 12 * 12  # 12 hours of 5-min steps
SAMPLE_POOL = "a100-train"
SEMANTICS: tuple[Semantics, ...] = ("replay", "autoscaler")


def cases(quick: bool, console: Console) -> dict[str, TwinCase]:
    """The cases whose data is here (a missing shared folder skips Earth, saying so)."""
    found: dict[str, TwinCase] = {}
    earth_steps, sample_steps = (36, 24) if quick else (EARTH_STEPS, SAMPLE_STEPS)
    # The sample's runs are the shorter: they start first, so they finish first.
    sample = load_app_settings().sample_dir
    found["sample"] = sample_case(sample, SAMPLE_POOL, HISTORY, sample_steps)
    shared = shared_data_dir()
    if shared is None:
        console.print("[yellow]skipping Earth total:[/] ../shared/data not found")
    else:
        try:
            found["earth_total"] = trace_case(shared, HISTORY, earth_steps)
        except SourceError as exc:
            console.print(f"[yellow]skipping Earth total:[/] {exc}")
    return found


def one_run(name: str, case: TwinCase, semantics: Semantics, workdir: Path) -> dict[str, Any]:
    """Run the twin and the replay of one case (in a worker process); plain data back."""
    began = time.monotonic()
    report = run_case(
        case,
        workdir / f"{name}-{semantics}",
        semantics=semantics,
        progress=hourly_progress(f"{name} [{semantics}]"),
    )
    data = report.as_json()
    data["wall_seconds"] = time.monotonic() - began
    data["frames"] = {
        "twin": report.twin.result.frame.reset_index(names="ts").to_dict(orient="list"),
        "replay": report.replay.frame.reset_index(names="ts").to_dict(orient="list"),
    }
    # Kept beside the deployment too, so a failure later in the benchmark loses no run.
    (workdir / f"{name}-{semantics}.json").write_text(
        json.dumps(data, indent=2, default=str), encoding="utf-8"
    )
    return data


def walk_forward_replay(shared: Path, case: TwinCase) -> dict[str, Any]:
    """The replay as ``decision_quality.py`` runs it: its own daily-refitted peak model.

    The global peak-quantile model fitted on the Earth total fleet (demand, pending
    GPUs, pending jobs) at each simulated midnight from the data before it, calibrated
    online, each step through ``policy.decide``: the same pool, quantile,
    window and initial nodes as the twin, but forecasts of its own (made from the
    trace up to the step itself, not from the twin's readings up to the step before).
    """
    fleet = default_fleets(shared, VCS, LORA_PEAK_GPUS)["earth_total"]
    step = case.step
    forecaster = PeakReplayForecaster(
        fleet_on_step(fleet.frame, pd.Timedelta(step)),
        fleet.target,
        (case.pool.quantile,),
        params=fleet.params,
    )
    policy = ForesightPolicy(case.pool, forecaster)
    result = simulate(case.demand, case.pool, policy, initial_nodes=case.initial_nodes)
    return {
        "summary": result.summary(),
        "fits": sorted({str(ts) for ts in forecaster.fit_log}),
        "frame": result.frame.reset_index(names="ts").to_dict(orient="list"),
    }


def _frame(columns: dict[str, list[Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(columns)
    return frame.set_index(pd.DatetimeIndex(frame.pop("ts")))


def plot_nodes(
    path: Path,
    title: str,
    demand: pd.Series,
    gpus_per_node: int,
    runs: dict[str, pd.DataFrame],
) -> Path:
    """Nodes held (ready + booting) over time per run, with demand in nodes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(11, 4.5))
    axis.plot(
        demand.index, demand / gpus_per_node, color="0.6", lw=1, label="demand / GPUs per node"
    )
    for (name, frame), style in zip(runs.items(), ("-", "--", ":", "-."), strict=False):
        held = frame["ready_nodes"] + frame["pending_nodes"]
        axis.step(frame.index, held, where="post", ls=style, lw=1.2, label=f"{name}: nodes held")
    axis.set_title(title)
    axis.set_ylabel("nodes")
    axis.legend(loc="upper left", fontsize=8)
    figure.autofmt_xdate()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_case(
    name: str,
    case: TwinCase,
    runs: list[dict[str, Any]],
    path: Path,
    extra: dict[str, pd.DataFrame],
) -> Path:
    """Nodes held over time: the replays, the twin under each semantics, with demand."""
    frames: dict[str, pd.DataFrame] = dict(extra)
    for run in runs:
        if run["semantics"] == "replay":
            # The replay beside the replay-semantics twin (each run has its own forecasts).
            frames["offline replay"] = _frame(run["frames"]["replay"])
    for run in runs:
        frames[f"twin ({run['semantics']})"] = _frame(run["frames"]["twin"])
    title = (
        f"{name}: the live loop (twin) against the offline replay, "
        f"q{case.pool.quantile:g}, lead {case.pool.lead_time}"
    )
    return plot_nodes(path, title, case.demand, case.pool.gpus_per_node, frames)


def multi_pool(steps: int, console: Console) -> dict[str, Any]:
    """The sample's work on an on-demand and a spot group, the expander choosing (autoscaler)."""
    case = sample_group_case(load_app_settings().sample_dir, HISTORY, steps)
    workdir = Path(tempfile.mkdtemp(prefix="foresight-live-loop-groups-"))
    console.print(f"multi-pool twin: {case.name}, {steps} steps, deployment in {workdir}")
    began = time.monotonic()
    result, log = run_group_case(case, workdir / "groups")
    table = Table(title=f"{case.name}: the expander choosing between two groups, {steps} steps")
    for column in ("group", "price/node-h", "node-hours", "cost", "scale-ups", "expander nodes"):
        table.add_column(column, justify="right")
    for pool in case.pools:
        g = result.groups[pool.name]
        table.add_row(
            pool.name,
            f"{pool.cost_per_node_hour:.2f}",
            f"{g['node_hours']:,.1f}",
            f"{g['cost']:,.0f}",
            f"{g['scale_ups']:.0f}",
            f"{g['expander_nodes']:.0f}",
        )
    console.print(table)
    console.print(f"waiting GPU-hours {result.waiting_gpu_hours:,.2f}; cost {result.cost:,.0f}")
    return {
        "case": case.name,
        "semantics": "autoscaler",
        "steps": steps,
        "start": str(case.demand.index[0]),
        "end": str(case.demand.index[-1]),
        "pools": {
            p.name: {
                "node_group_id": p.node_group_id,
                "cost_per_node_hour": p.cost_per_node_hour,
                "max_nodes": p.max_nodes,
                "initial_nodes": case.initial_nodes[p.name],
            }
            for p in case.pools
        },
        "result": result.summary(),
        "preferred_steps": dict(Counter(str(s.preferred) for s in log)),
        "wall_seconds": time.monotonic() - began,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every case under both semantics; print, write JSON and the plots."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="36 Earth and 24 sample steps")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (processes)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON written")
    parser.add_argument(
        "--multi-pool",
        type=int,
        metavar="STEPS",
        help="run only the two-group case (the priority expander) for STEPS sample steps, "
        f"writing {MULTI_RESULTS.relative_to(ROOT)}",
    )
    args = parser.parse_args(argv)
    # The runs' MLflow downloads would each draw a progress bar into the log.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    console = Console()
    if args.multi_pool is not None:
        data = multi_pool(args.multi_pool, console)
        MULTI_RESULTS.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
        console.print(f"wrote {MULTI_RESULTS}")
        return 0
    found = cases(args.quick, console)
    workdir = Path(tempfile.mkdtemp(prefix="foresight-live-loop-"))
    console.print(f"deployments under {workdir}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in found}
    own: dict[str, Any] | None = None
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            pool.submit(one_run, name, case, semantics, workdir): name
            for name, case in found.items()
            for semantics in SEMANTICS
        }
        shared = shared_data_dir()
        walk = (
            pool.submit(walk_forward_replay, shared, found["earth_total"])
            if shared is not None and "earth_total" in found
            else None
        )
        for future, name in futures.items():
            runs[name].append(future.result())
        if walk is not None:
            own = walk.result()
    out: dict[str, Any] = {"history_days": HISTORY.days, "quick": args.quick, "cases": []}
    for name, case_runs in runs.items():
        extra = own if name == "earth_total" else None
        report_case(console, name, found[name], case_runs, extra)
        out["cases"].extend(case_runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")
    console.print(f"wrote {args.out}")
    return 0


def report_case(
    console: Console,
    name: str,
    case: TwinCase,
    case_runs: list[dict[str, Any]],
    own: dict[str, Any] | None,
) -> None:
    """Print a case's tables, draw its plot and make its runs JSON-ready."""
    for run in case_runs:
        title = f"{name}: twin ({run['semantics']}) vs replay, {run['steps']} steps"
        console.print(comparison_table(title, run["figures"]))
        console.print(
            f"desired nodes equal at {run['desired_agreement']:.1%} of steps; "
            f"modes {run['modes']}; {run['wall_seconds']:,.0f} s"
        )
        if own is not None:
            rows = [
                {
                    "figure": figure,
                    "twin": float(run["twin"][figure]),
                    "replay": float(own["summary"][figure]),
                    "relative_difference": _relative(
                        float(run["twin"][figure]), float(own["summary"][figure])
                    ),
                }
                for figure in FIGURES
            ]
            run["walk_forward_replay"] = {
                "summary": own["summary"],
                "fits": own["fits"],
                "figures": rows,
            }
            title = f"{name}: twin ({run['semantics']}) vs the replay with its own model"
            console.print(comparison_table(title, rows))
    path = FIGURE if name == "earth_total" else FIGURE.with_name(f"live_loop_{name}.png")
    extra = {} if own is None else {"offline replay, own model": _frame(own["frame"])}
    figure = plot_case(name, case, case_runs, path, extra)
    for run in case_runs:
        run.pop("frames")
        run["figure"] = str(figure.relative_to(ROOT) if figure.is_relative_to(ROOT) else figure)


def _relative(a: float, b: float) -> float:
    return 0.0 if a == b else (a - b) / b if b else float("inf")


if __name__ == "__main__":
    raise SystemExit(main())
