"""The replay behind ``foresight simulate``: load, replay, compare, print and write.

Details: docs/simulate.md, "Notes from the code", `cli/simulate_run.py`."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from api.settings import AppSettings
from cli.simulate import DEFAULT_KS, SimulateArgs
from cli.support import console
from forecaster.exceptions import DataValidationError
from forecaster.loaders.traces import DEMAND
from forecaster.plotting import save_png
from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.pools_file import load_pools
from pipelines.config.tracking import tracking_config as make_tracking_config
from pipelines.dataset import load_dataset
from pipelines.reporting import progress_bar
from pipelines.simulate.compare import (
    Comparison,
    Replay,
    compare,
    sweep_quantiles,
    sweep_references,
)
from pipelines.simulate.equal_cost import BUDGETS, compare_policies
from pipelines.simulate.frontier import cost_ratio, gap_closed, plot_frontier
from pipelines.simulate.plot import plot_runs
from pipelines.simulate.result import SimResult, accounting, accounting_line


def run_simulation(settings: AppSettings, args: SimulateArgs) -> None:
    """Replay, print the tables and write the files of one ``foresight simulate``."""
    pool_config = _pool(settings.pools_file, args.pool, args.lead, args.quantile)
    dataset = load_dataset(settings, args.data)
    demand = _demand(dataset.frame, args.series or str(SeriesId(args.pool, DEMAND)))
    if args.span is not None:
        demand = demand[demand.index < demand.index[0] + args.warmup + args.span]
    replay = Replay.split(demand, pool_config, args.warmup)
    console.print(
        f"Replaying [bold]{demand.name}[/] from {dataset.source}: {len(replay.demand)} steps "
        f"of {replay.demand.index[1] - replay.demand.index[0]} from "
        f"{replay.demand.index[0]} ({len(replay.prehistory)} steps of warm-up); pool "
        f"{pool_config.name}: {pool_config.gpus_per_node} GPUs/node, lead "
        f"{pool_config.lead_time}, quantile {pool_config.quantile}"
    )
    with progress_bar(console) as report:
        comparison = compare(
            replay,
            args.policies,
            settings=settings,
            model=args.model,
            retrain_every=args.retrain,
            carry=args.carry,
            progress=report,
            fleet=dataset.frame,
            levels=args.levels,
        )
        swept: dict[float, SimResult] = {}
        refs: dict[str, dict[float, SimResult]] = {}
        if args.sweep:
            swept = sweep_quantiles(comparison, args.levels, progress=report)
            refs = sweep_references(comparison, DEFAULT_KS, progress=report)
    console.print(results_table(comparison.runs, pool_config.name))
    step = replay.demand.index[1] - replay.demand.index[0]
    console.print(accounting_line(step, carry=args.carry))
    equal = equal_cost(comparison, swept, refs) if args.sweep else None
    if equal is not None:
        console.print(equal_cost_table(equal, policy_points(comparison, swept, refs)))
    # Not the working directory: a replay's files are generated, like the store.
    out = args.output_dir if args.output_dir is not None else settings.data_dir / "simulate"
    files = write_outputs(comparison, swept, refs, equal, out, args.model)
    for path in files:
        console.print(f"Written {path}")
    if args.mlflow:
        from pipelines.simulate.tracking import log_simulation

        tracking = make_tracking_config(settings)
        run_id = log_simulation(
            tracking,
            pool=pool_config.name,
            params={
                "series": str(demand.name),
                "lead_time_s": pool_config.lead_time.total_seconds(),
                "quantile": pool_config.quantile,
                "model": args.model,
                "accounting": args.accounting_mode,
                "retrain": args.retrain_text,
                "steps": len(replay.demand),
            },
            runs={
                **comparison.runs,
                **{f"foresight_q{q:g}": r for q, r in swept.items()},
                **{f"{n}_k{k:g}": r for n, by_k in refs.items() for k, r in by_k.items()},
            },
            artifacts=[p for p in files if p.suffix in (".png", ".json")],
        )
        console.print(f"Logged MLflow run {run_id} at {tracking.safe_uri}")


def results_table(runs: dict[str, SimResult], pool: str) -> Table:
    """The headline figures of each replay (GPU-h: GPU-hours provisioned, booting included)."""
    table = Table(title=f"Replay of pool {pool}")
    table.add_column("policy", no_wrap=True)
    for column in ("GPU-h", "idle GPU-h", "waiting GPU-h", "p95 wait min", "scale events", "cost"):
        table.add_column(column, justify="right")
    for name, run in runs.items():
        table.add_row(
            name,
            f"{run.gpu_hours_provisioned:,.0f}",
            f"{run.idle_gpu_hours:,.0f}",
            f"{run.waiting_gpu_hours:,.1f}",
            f"{run.p95_wait_minutes:.0f}",
            f"{run.scale_ups + run.scale_downs:,}",
            f"{run.cost:,.0f}",
        )
    return table


def policy_points(
    comparison: Comparison,
    swept: dict[float, SimResult],
    refs: dict[str, dict[float, SimResult]],
) -> dict[str, list[tuple[float, float]]]:
    """Every replay as ``(cost ratio, gap closed)``, by policy (needs reactive and oracle)."""
    runs = comparison.runs
    reactive, oracle = runs["reactive"], runs["oracle"]

    def point(run: SimResult) -> tuple[float, float]:
        gap = gap_closed(
            reactive.waiting_gpu_hours, run.waiting_gpu_hours, oracle.waiting_gpu_hours
        )
        return (cost_ratio(run, oracle), gap)

    out = {name: [point(run)] for name, run in runs.items() if name != "foresight"}
    out["foresight"] = [point(run) for run in swept.values()]
    for name, by_k in refs.items():
        out[name] = [point(run) for run in by_k.values()]
    return out


def equal_cost(
    comparison: Comparison,
    swept: dict[float, SimResult],
    refs: dict[str, dict[float, SimResult]],
) -> dict[str, object]:
    """Foresight against every other policy at equal cost (see ``equal_cost``)."""
    return compare_policies("foresight", policy_points(comparison, swept, refs))


def equal_cost_table(
    equal: dict[str, Any], points: dict[str, list[tuple[float, float]]] | None = None
) -> Table:
    """Every policy's best gap closed at each cost budget, and Foresight's wins.

    A ``-`` cell is a budget none of the policy's replays fits in; the caption gives
    each such policy's cheapest replay, so an empty row says why it is empty.
    """
    table = Table(title="Best gap closed at cost <= budget x oracle GPU-hours (equal cost)")
    table.add_column("policy", no_wrap=True)
    for budget in BUDGETS:
        table.add_column(f"<= {budget:.2f}", justify="right")
    table.add_column("Foresight >= its points", justify="right")
    short: list[str] = []
    for name, by_budget in equal["best_gap_at_cost"].items():
        against = equal["against"].get(name)
        wins = "" if against is None else f"{against['beaten'][0]}/{against['beaten'][1]}"
        cells = ["-" if not math.isfinite(v) else f"{v:.3f}" for v in by_budget.values()]
        table.add_row(name, *cells, wins)
        if "-" in cells and points is not None and points.get(name):
            cheapest = min(cost for cost, _ in points[name])
            short.append(f"{name} {cheapest:.2f}x")
    if short:
        table.caption = (
            "-: none of the policy's replays cost that little; cheapest replay: "
            + ", ".join(short)
            + " the oracle's GPU-hours"
        )
    return table


def write_outputs(
    comparison: Comparison,
    swept: dict[float, SimResult],
    refs: dict[str, dict[float, SimResult]],
    equal: dict[str, Any] | None,
    out: Path,
    model: str,
) -> list[Path]:
    """Write the JSON summary, the demand-vs-capacity PNG and (swept) the frontier PNG."""
    replay = comparison.replay
    name = replay.pool.name
    step = replay.demand.index[1] - replay.demand.index[0]
    out.mkdir(parents=True, exist_ok=True)
    files = [
        save_png(
            plot_runs(replay.demand, comparison.runs, title=f"{name}: demand and capacity"),
            out / f"{name}.png",
        )
    ]
    if swept:
        points = policy_points(comparison, swept, refs)
        families = {"foresight": points.pop("foresight")}
        labels = {"foresight": [f"q{q:g}" for q in swept]}
        for ref, by_k in refs.items():
            families[ref] = points.pop(ref)
            labels[ref] = [f"k{k:g}" for k in by_k]
        figure = plot_frontier(
            families,
            {label: pts[0] for label, pts in points.items()},
            xlabel="cost ratio (GPU-h provisioned / oracle GPU-h)",
            ylabel="gap closed (reactive = 0, oracle = 1)",
            title=f"{name} ({model}): Foresight's quantile and the references' k swept\n"
            + accounting_line(step, carry=comparison.carry),
            labels=labels,
        )
        files.append(save_png(figure, out / f"{name}_frontier.png"))
    payload = {
        "pool": replay.pool.model_dump(
            mode="json",
            include={
                "name",
                "gpus_per_node",
                "min_nodes",
                "max_nodes",
                "lead_time",
                "cost_per_node_hour",
                "target_utilisation",
                "quantile",
                "scale_down",
            },
        ),
        "series": str(replay.demand.name),
        "accounting": accounting(step, carry=comparison.carry),
        "replay_start": str(replay.demand.index[0]),
        "replay_steps": len(replay.demand),
        "warmup_steps": len(replay.prehistory),
        "forecaster": model,
        "fits": [str(ts) for ts in comparison.fit_log],
        "runs": {label: run.summary() for label, run in comparison.runs.items()},
        "sweep": [{"quantile": q} | run.summary() for q, run in swept.items()],
        "reference_sweeps": {
            ref: [{"k": k} | run.summary() for k, run in by_k.items()] for ref, by_k in refs.items()
        },
        "equal_cost": equal,
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    files.append(path)
    return files


def _pool(
    pools_file: Path, name: str, lead: timedelta | None, quantile: float | None
) -> PoolConfig:
    pools = load_pools(pools_file) if pools_file.is_file() else None
    if pools is not None and name in pools.names:
        config = pools.get(name)
    else:
        dns = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63] or "pool"
        console.print(
            f"[yellow]Pool {name!r} is not in {pools_file}: default settings "
            f"(8 GPUs/node, lead 10 min, quantile 0.9).[/]"
        )
        config = PoolConfig(name=dns, node_group_id=name, max_nodes=10_000)
    update: dict[str, object] = {}
    if lead is not None:
        update["lead_time"] = lead
    if quantile is not None:
        update["quantile"] = quantile
    return config.model_copy(update=update) if update else config


def _demand(frame: pd.DataFrame, uid: str) -> pd.Series:
    rows = frame[frame[UID] == uid]
    if rows.empty:
        demands = sorted(
            u for u in frame[UID].astype(str).unique() if SeriesId.of(u).signal == DEMAND
        )
        raise DataValidationError(
            f"no series {uid!r} in the data; demand series there: {demands or 'none'}. Pass "
            "--pool <entity> or --series <id> (demand is derived from allocated_gpus plus "
            "queue_gpus or pending_gpus)"
        )
    index = pd.DatetimeIndex(rows[DS]).tz_convert("UTC")
    return pd.Series(rows[Y].to_numpy(dtype=float), index=index, name=uid)
