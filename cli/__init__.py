"""The ``foresight`` command line: train, backtest and forecast here; the rest wired in.

Details: docs/layout.md, "Notes from the code", `cli/__init__.py`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar

import typer

from cli.lazy_commands import LazyCommand, LazyCommandGroup
from cli.support import (
    ConfigOption,
    DataOption,
    SeriesOption,
    cli_errors,
    cli_settings,
    console,
)

if TYPE_CHECKING:
    from api.settings import AppSettings
    from forecaster.training import TrainingPlan
    from pipelines.dataset import Dataset

# The heavy libraries (pandas, scikit-learn, MLflow, FastAPI) are imported inside each
# command, and the commands of other modules load only when run: `foresight --help`
# stays well under a second (benchmarks/cli_startup.py).


class _Commands(LazyCommandGroup):
    lazy_commands: ClassVar[Mapping[str, LazyCommand]] = {
        "serve": LazyCommand(
            "cli.serve",
            "serve_command",
            "Serve the API (recommendations, forecasts, integrations, dashboard) and the jobs.",
        ),
        "scheduler": LazyCommand(
            "cli.scheduler",
            "scheduler_command",
            "Run the scheduled jobs in the foreground (one leader among replicas); Ctrl-C stops.",
        ),
        "jobs": LazyCommand(
            "cli.scheduler",
            "jobs_command",
            "Show the scheduler's leader and each job: trigger, last run, where, outcome, next.",
        ),
        "ingest": LazyCommand(
            "cli.jobs",
            "ingest_command",
            "Fetch what is new of every pool signal since the last stored sample, once.",
        ),
        "backfill": LazyCommand(
            "cli.jobs",
            "backfill_command",
            "Fetch and store every pool signal over a past window (re-fetching is harmless).",
        ),
        "recommendation": LazyCommand(
            "cli.recommendation",
            "recommendation_command",
            "Show the recommended nodes per pool: from the running service, else the store.",
        ),
        "publish": LazyCommand(
            "cli.publish",
            "publish_command",
            "Publish the priority-expander ConfigMap, buffers and webhooks (dry run by default).",
        ),
        "simulate": LazyCommand(
            "cli.simulate",
            "simulate_command",
            "Replay a pool's demand against reactive, static, Foresight and oracle policies.",
        ),
        "twin": LazyCommand(
            "cli.twin",
            "twin_command",
            "Run the real service against a simulated cluster and compare with the replay.",
        ),
        "scorecard": LazyCommand(
            "cli.scorecard",
            "scorecard_command",
            "Score what Foresight recommended against what happened: waiting avoided, nodes added.",
        ),
        "webhooks": LazyCommand(
            "cli.webhooks",
            "app",
            "The webhook outbox: list dead letters and retry them.",
        ),
    }


app = typer.Typer(
    cls=_Commands,
    help="Foresight: predictive autoscaling for GPU clusters.",
    no_args_is_help=True,
    add_completion=False,
)
WorkersOption = Annotated[
    int, typer.Option("--workers", min=1, help="Processes the backtest fans out to.")
]
DaskOption = Annotated[
    str | None,
    typer.Option(
        "--dask-address",
        help="Dask scheduler (tcp://host:8786) to fan out to instead of local processes; "
        "default: scheduler.dask_address.",
    ),
]
FastOption = Annotated[
    bool,
    typer.Option(
        "--fast",
        help="Quick candidate set (no MSTL, no gradient boosting); default: the model_set setting.",
    ),
]


def main() -> None:
    """Entry point of the ``foresight`` console script."""
    app()


@app.command("train")
def train_command(
    config: ConfigOption = None,
    data: DataOption = None,
    series: SeriesOption = None,
    workers: WorkersOption = 2,
    dask_address: DaskOption = None,
    fast: FastOption = False,
    mlflow_ui_port: Annotated[
        int,
        typer.Option(
            "--mlflow-ui-port",
            min=1,
            max=65535,
            help="The MLflow UI's port in the printed hint (make run passes MLFLOW_UI_PORT).",
        ),
    ] = 5000,
    unless_champion: Annotated[
        bool,
        typer.Option(
            "--unless-champion",
            help="Do nothing (and say so) when a version already holds @champion: make "
            "run's quick first training, which a later full training replaces via the gate.",
        ),
    ] = False,
) -> None:
    """Backtest every model family, pick a champion per series, register and gate it."""
    from rich.text import Text

    from forecaster.contract.parse import format_step
    from forecaster.gate import check_lines, relative_line, verdict
    from forecaster.training import train
    from pipelines.config.tracking import tracking_config
    from pipelines.dataset import load_dataset
    from pipelines.executors import make_executor
    from pipelines.jobs.history import candidate_models
    from pipelines.reporting import progress_bar, training_table

    with cli_errors():
        settings = cli_settings(config)
        if unless_champion and (serving := _champion_of(settings)) is not None:
            console.print(
                f"Version {serving} of {settings.registered_model_name} holds @champion: "
                "nothing to train (--unless-champion). The scheduled training refreshes it.",
                soft_wrap=True,
            )
            return
        dataset = load_dataset(settings, data, series=series)
        plan = _plan(settings, dataset)
        candidates = candidate_models(settings, dataset.step, plan.horizon, fast=fast)
        console.print(
            f"Training on [bold]{dataset.frame['unique_id'].nunique()}[/] series from "
            f"{dataset.source} (step {format_step(dataset.step)}, "
            f"{plan.n_windows} backtest windows, "
            f"models: {', '.join(c.model_name for c in candidates)})"
        )
        with (
            progress_bar(console) as report,
            make_executor(workers, dask_address or settings.scheduler.dask_address) as executor,
        ):
            outcome = train(
                dataset.frame,
                candidates,
                plan,
                tracking=tracking_config(settings),
                model_name=settings.registered_model_name,
                models_dir=settings.models_dir,
                progress=report,
                executor=executor,
            )
        console.print(training_table(outcome, plan))
        console.print(
            f"Model {settings.registered_model_name} version {outcome.version} "
            f"{verdict(outcome.decision)}.",
            soft_wrap=True,
        )
        for line in check_lines(outcome.decision):
            console.print(Text(f"  gate {line}"), soft_wrap=True)
        relative = relative_line(outcome.decision.relative)
        if relative is not None:
            console.print(Text(f"  {relative}"), soft_wrap=True)
        console.print(f"With it: {outcome.peak.describe()}")
        _print_mlflow_hint(settings, outcome.run_id, mlflow_ui_port)


@app.command("backtest")
def backtest_command(
    config: ConfigOption = None,
    data: DataOption = None,
    series: SeriesOption = None,
    models: Annotated[
        list[str] | None,
        typer.Option("--model", help="Model family to score (repeatable); default all."),
    ] = None,
    workers: WorkersOption = 2,
    dask_address: DaskOption = None,
    fast: FastOption = False,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the scores (.csv or .json).")
    ] = None,
    champion: Annotated[
        bool,
        typer.Option(
            "--champion",
            help="Also score the champion as `foresight train` builds it, walk-forward: at "
            "each cutoff the whole train-time procedure (candidates, selection, fit) on the "
            "data up to it only. Slow: one training per series and cutoff.",
        ),
    ] = False,
) -> None:
    """Score model families by rolling-origin backtest, without registering anything."""
    import pandas as pd

    from forecaster.backtest import backtest
    from forecaster.metrics import score_backtest
    from forecaster.models.catalog import make_model
    from pipelines.dataset import load_dataset
    from pipelines.executors import make_executor
    from pipelines.jobs.history import candidate_models
    from pipelines.reporting import progress_bar, scores_table, write_frame

    with cli_errors():
        settings = cli_settings(config)
        dataset = load_dataset(settings, data, series=series)
        plan = _plan(settings, dataset)
        candidates = (
            [make_model(name, horizon=plan.horizon) for name in models]
            if models
            else candidate_models(settings, dataset.step, plan.horizon, fast=fast)
        )
        windows = plan.n_windows + plan.heldout_windows
        with (
            progress_bar(console) as report,
            make_executor(workers, dask_address or settings.scheduler.dask_address) as executor,
        ):
            result = backtest(
                candidates,
                dataset.frame,
                horizon=plan.horizon,
                n_windows=windows,
                levels=plan.levels,
                max_train=plan.max_train,
                progress=lambda done, total: report("backtest", done, total),
                executor=executor,
            )
            if champion:
                from pipelines.champion_backtest import champion_scores

                champion_rows = champion_scores(
                    settings, dataset, plan, result, executor=executor, report=report
                )
        scores = score_backtest(result.frame, result.scales, plan.levels, plan.horizons)
        if champion:
            scores = pd.concat([scores, champion_rows], ignore_index=True)
        console.print(scores_table(scores, plan.levels))
        if not result.failures.empty:
            console.print(f"[yellow]{len(result.failures)} windows failed[/] (see --output)")
        if output is not None:
            write_frame(scores, output)
            console.print(f"Scores written to {output}")


@app.command("forecast")
def forecast_command(
    config: ConfigOption = None,
    data: DataOption = None,
    series: SeriesOption = None,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Steps ahead; default the horizon.")
    ] = None,
    workers: WorkersOption = 2,
    dask_address: DaskOption = None,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the forecast frame (.csv or .json).")
    ] = None,
) -> None:
    """Forecast every series with the @champion refitted on its latest data, as the
    forecast job does (the same code, here printed instead of stored)."""
    import pandas as pd

    from forecaster.exceptions import DataValidationError
    from forecaster.registry import load_champion
    from forecaster.training import recent_history
    from forecaster.types import UID
    from forecaster.unavailable import Unavailable
    from pipelines.config.tracking import tracking_config
    from pipelines.dataset import load_dataset
    from pipelines.executors import make_executor
    from pipelines.jobs.series_forecasts import forecast_series
    from pipelines.reporting import forecast_table, progress_bar, write_frame

    with cli_errors():
        settings = cli_settings(config)
        dataset = load_dataset(settings, data, series=series)
        loaded = load_champion(
            settings.registered_model_name,
            models_dir=settings.models_dir,
            tracking=tracking_config(settings),
        )
        if loaded.source != "registry":
            console.print(f"[yellow]Using the last-known-good champion:[/] {loaded.reason}")
        plan = _plan(settings, dataset)
        recent = recent_history(dataset.frame, plan.max_train)
        groups = [(str(uid), part) for uid, part in recent.groupby(UID, sort=True)]
        with (
            progress_bar(console) as report,
            make_executor(workers, dask_address or settings.scheduler.dask_address) as executor,
        ):
            made = forecast_series(
                loaded, groups, steps or plan.horizon, plan.levels, executor, report
            )
        failed = {uid: why for uid, why in made.items() if isinstance(why, Unavailable)}
        for uid, why in failed.items():
            console.print(f"[yellow]{uid} not forecast:[/] {why}")
        kept = [frame for frame in made.values() if not isinstance(frame, Unavailable)]
        if not kept:
            raise DataValidationError(
                f"none of the {len(groups)} series could be forecast (above); check the data "
                "against the series contract (docs/forecasting.md) or retrain"
            )
        frame = pd.concat(kept, ignore_index=True)
        console.print(forecast_table(frame, plan.horizons, plan.levels))
        console.print(f"Champion version {loaded.version} ({loaded.source}).")
        if output is not None:
            write_frame(frame, output)
            console.print(f"Forecasts written to {output}")


def _plan(settings: AppSettings, dataset: Dataset) -> TrainingPlan:
    from pipelines.jobs.history import training_plan

    return training_plan(settings, dataset.step)


def _champion_of(settings: AppSettings) -> str | None:
    """The version holding @champion in the settings' registry, if any."""
    from forecaster.registry import champion_version
    from pipelines.config.tracking import tracking_config

    return champion_version(settings.registered_model_name, tracking=tracking_config(settings))


def _print_mlflow_hint(settings: AppSettings, run_id: str, port: int) -> None:
    from forecaster.tracking import (
        ensure_experiment,
        is_tracking_server,
        redact_uri,
        runs_view_url,
    )
    from pipelines.config.tracking import tracking_config

    uri = settings.mlflow_tracking_uri
    experiment_id = ensure_experiment(tracking_config(settings))
    if is_tracking_server(uri):
        # A tracking server serves its own UI; `mlflow ui` takes no server URL.
        review = f"Review it at {runs_view_url(redact_uri(uri), experiment_id)}"
    else:
        review = (
            "Review it in the MLflow UI (`make run` serves it), or start it alone:\n"
            f"  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false .venv/bin/mlflow ui "
            f"--backend-store-uri {uri} --port {port}\n"
            f"  then open {runs_view_url(f'http://127.0.0.1:{port}', experiment_id)}"
        )
    console.print(f"Run {run_id} is tracked at {redact_uri(uri)}.\n{review}", soft_wrap=True)
