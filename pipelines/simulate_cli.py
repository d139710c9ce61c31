"""``foresight simulate``: replay a pool's demand against scaling policies.

What would reactive autoscaling, a fixed size, Foresight and a perfect oracle have
done on this history, and at what cost? ``--sweep`` replays Foresight at several
quantiles and plots cost against waiting next to reactive and static: the way to pick
a pool's quantile (and, run once per ``--lead``, to see what a faster node image is
worth) before turning writes on.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.table import Table

from forecaster.config.pools import PoolConfig, load_pools, parse_duration
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.loaders.traces import DEMAND
from forecaster.plotting import save_png
from forecaster.tracking import tracking_config as make_tracking_config
from forecaster.types import DS, UID, Y
from pipelines.cli_support import ConfigOption, DataOption, cli_errors, cli_settings, console
from pipelines.dataset import load_dataset
from pipelines.reporting import progress_bar
from pipelines.simulate.compare import (
    POLICY_NAMES,
    Comparison,
    ForecasterFamily,
    Replay,
    compare,
    sweep_quantiles,
)
from pipelines.simulate.frontier import plot_frontier
from pipelines.simulate.plot import plot_runs
from pipelines.simulate.result import SimResult

DEFAULT_SWEEP = (0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99)


def simulate_command(
    pool: Annotated[
        str,
        typer.Option(
            "--pool",
            help="Pool name from the pools file (its demand is <pool>/demand_gpus); any "
            "other name replays <pool>/demand_gpus of the data with default pool settings.",
        ),
    ],
    config: ConfigOption = None,
    data: DataOption = None,
    series: Annotated[
        str | None,
        typer.Option("--series", help="Demand series id to replay; default <pool>/demand_gpus."),
    ] = None,
    lead: Annotated[
        str | None, typer.Option("--lead", help="Node lead time, e.g. 10min; default the pool's.")
    ] = None,
    policies: Annotated[
        str,
        typer.Option("--policies", help=f"Comma-separated, from: {', '.join(POLICY_NAMES)}."),
    ] = "reactive,static,foresight,oracle",
    quantile: Annotated[
        float | None,
        typer.Option(
            "--quantile", min=0.0, max=1.0, help="Foresight's quantile; default the pool's."
        ),
    ] = None,
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Sweep the quantile: cost-vs-wait frontier PNG.")
    ] = False,
    sweep_levels: Annotated[
        str | None,
        typer.Option("--sweep-levels", help="Quantiles swept, comma-separated; default 0.5..0.99."),
    ] = None,
    model: Annotated[
        str, typer.Option("--model", help="Foresight's forecaster family: ets or persistence.")
    ] = "ets",
    retrain: Annotated[
        str, typer.Option("--retrain", help="How often Foresight's forecaster is refitted.")
    ] = "1d",
    warmup: Annotated[
        str,
        typer.Option(
            "--warmup", help="History learnt from before the replay starts (not replayed)."
        ),
    ] = "7d",
    span: Annotated[
        str | None,
        typer.Option("--span", help="Replay at most this long after the warm-up, e.g. 3d."),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            help="Where the JSON and PNG files go; default <data_dir>/simulate (data/simulate).",
        ),
    ] = None,
    mlflow: Annotated[
        bool, typer.Option("--mlflow", help="Log metrics and plots to the tracking URI.")
    ] = False,
) -> None:
    """Replay a pool's demand against reactive, static, Foresight and oracle policies."""
    with cli_errors():
        settings = cli_settings(config)
        chosen = [p.strip() for p in policies.split(",") if p.strip()]
        unknown = sorted(set(chosen) - set(POLICY_NAMES))
        if unknown:
            raise ConfigError(f"unknown policies {unknown}; choose from {', '.join(POLICY_NAMES)}")
        family = _family(model)
        pool_config = _pool(settings.pools_file, pool, lead, quantile)
        dataset = load_dataset(settings, data)
        demand = _demand(dataset.frame, series or f"{pool}/{DEMAND}")
        if span is not None:
            end = demand.index[0] + _duration(warmup, "--warmup", allow_zero=True)
            demand = demand[demand.index < end + _duration(span, "--span")]
        replay = Replay.split(demand, pool_config, _duration(warmup, "--warmup", allow_zero=True))
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
                chosen,
                family=family,
                retrain_every=_duration(retrain, "--retrain"),
                progress=report,
            )
            swept: dict[float, SimResult] = {}
            if sweep:
                if "foresight" not in comparison.runs:
                    comparison.runs["foresight"] = sweep_quantiles(
                        comparison, [pool_config.quantile]
                    )[pool_config.quantile]
                swept = sweep_quantiles(comparison, _levels(sweep_levels), progress=report)
        console.print(results_table(comparison.runs, pool_config.name))
        # Not the working directory: a replay's files are generated, like the store.
        out = output_dir if output_dir is not None else settings.data_dir / "simulate"
        files = write_outputs(comparison, swept, out, family)
        for path in files:
            console.print(f"Written {path}")
        if mlflow:
            from pipelines.simulate.tracking import log_simulation

            tracking = make_tracking_config(settings)
            run_id = log_simulation(
                tracking,
                pool=pool_config.name,
                params={
                    "series": str(demand.name),
                    "lead_time_s": pool_config.lead_time.total_seconds(),
                    "quantile": pool_config.quantile,
                    "model": family,
                    "retrain": retrain,
                    "steps": len(replay.demand),
                },
                runs={**comparison.runs, **{f"foresight_q{q:g}": r for q, r in swept.items()}},
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


def write_outputs(
    comparison: Comparison, swept: dict[float, SimResult], out: Path, family: str
) -> list[Path]:
    """Write the JSON summary, the demand-vs-capacity PNG and (swept) the frontier PNG."""
    replay = comparison.replay
    name = replay.pool.name
    out.mkdir(parents=True, exist_ok=True)
    files = [
        save_png(
            plot_runs(replay.demand, comparison.runs, title=f"{name}: demand and capacity"),
            out / f"{name}.png",
        )
    ]
    if swept:
        singles = {
            label: (run.gpu_hours_provisioned, run.waiting_gpu_hours)
            for label, run in comparison.runs.items()
            if label != "foresight"
        }
        figure = plot_frontier(
            {
                f"foresight ({family})": [
                    (r.gpu_hours_provisioned, r.waiting_gpu_hours) for r in swept.values()
                ]
            },
            singles,
            xlabel="GPU-hours provisioned",
            ylabel="waiting GPU-hours",
            title=f"{name}: cost against waiting, Foresight's quantile swept",
            labels={f"foresight ({family})": [f"q{q:g}" for q in swept]},
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
        "replay_start": str(replay.demand.index[0]),
        "replay_steps": len(replay.demand),
        "warmup_steps": len(replay.prehistory),
        "forecaster": family,
        "fits": [str(ts) for ts in comparison.forecaster.fit_log],
        "runs": {label: run.summary() for label, run in comparison.runs.items()},
        "sweep": [{"quantile": q} | run.summary() for q, run in swept.items()],
    }
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1))
    files.append(path)
    return files


def _pool(pools_file: Path, name: str, lead: str | None, quantile: float | None) -> PoolConfig:
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
        update["lead_time"] = _duration(lead, "--lead")
    if quantile is not None:
        if not 0 < quantile < 1:
            raise ConfigError(f"--quantile must be in (0, 1), got {quantile}")
        update["quantile"] = quantile
    return config.model_copy(update=update) if update else config


def _demand(frame: pd.DataFrame, uid: str) -> pd.Series:
    rows = frame[frame[UID] == uid]
    if rows.empty:
        demands = sorted(u for u in frame[UID].astype(str).unique() if u.endswith(f"/{DEMAND}"))
        raise DataValidationError(
            f"no series {uid!r} in the data; demand series there: {demands or 'none'}. Pass "
            "--pool <entity> or --series <id> (demand is derived from allocated_gpus plus "
            "queue_gpus or pending_gpus)"
        )
    index = pd.DatetimeIndex(rows[DS]).tz_convert("UTC")
    return pd.Series(rows[Y].to_numpy(dtype=float), index=index, name=uid)


def _duration(text: str, option: str, *, allow_zero: bool = False) -> timedelta:
    try:
        value = pd.Timedelta(parse_duration(text)).to_pytimedelta()
    except ValueError as exc:
        raise ConfigError(f"{option} {text!r} is not a duration; use e.g. 10min, 1h, 1d") from exc
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise ConfigError(f"{option} must be positive, got {text!r}")
    return value


def _levels(text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_SWEEP)
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--sweep-levels {text!r}: give numbers such as 0.8,0.9,0.95") from exc


def _family(model: str) -> ForecasterFamily:
    if model == "ets":
        return "ets"
    if model == "persistence":
        return "persistence"
    raise ConfigError(f"--model {model!r} is unknown; use ets or persistence")
