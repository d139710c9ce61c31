"""``foresight serve``: the API, the scheduler beside it, and (optionally) the MLflow UI.

Details: docs/layout.md, "Notes from the code", `cli/serve.py`."""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from cli.support import ConfigOption, cli_errors, cli_settings, console, publish_mode
from forecaster.exceptions import ConfigError, ForesightError, TrackingError
from pipelines.ports import ensure_free

if TYPE_CHECKING:
    from fastapi import FastAPI

    from api.clock import ClockMode
    from api.settings import AppSettings
    from pipelines.scheduler.dispatch import JobRunner

LEAD_WAIT_SECONDS = 30.0
"""How long ``--train-now`` waits for this process to lead the scheduler."""


def serve_command(
    config: ConfigOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            help="'system' (wall time) or 'replay' (as of the newest sample: for the "
            "committed sample, whose data is in the past). The scheduler's forecasts are "
            "dated by the same clock; under 'replay' a pushed sample more than three data "
            "steps past the newest is refused.",
        ),
    ] = "system",
    scheduler: Annotated[
        bool,
        typer.Option(
            "--scheduler/--no-scheduler",
            help="Run the scheduled jobs in this process too (one leader among replicas).",
        ),
    ] = True,
    train_now: Annotated[
        bool,
        typer.Option(
            "--train-now",
            help="Start the scheduled training (the settings' model set) in the background "
            "as soon as serving starts, instead of at its cron time (make run: a fast first "
            "version serves while the full one trains, promoted only through the gate).",
        ),
    ] = False,
    mlflow_ui_port: Annotated[
        int | None,
        typer.Option(
            "--mlflow-ui-port",
            min=1,
            max=65535,
            help="Also serve the MLflow UI of a local tracking store on this port.",
        ),
    ] = None,
    mlflow_ui_host: Annotated[
        str,
        typer.Option(
            "--mlflow-ui-host",
            help="Address the MLflow UI listens on (it has no authentication: loopback "
            "unless you mean to expose it).",
        ),
    ] = "127.0.0.1",
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="Serve on a non-loopback --host although no API token is configured "
            "(anyone who reaches it may read and push).",
        ),
    ] = False,
) -> None:
    """Serve the API (recommendations, forecasts, integrations, dashboard) and the jobs."""
    with cli_errors():
        if clock not in ("system", "replay"):
            raise ConfigError(f"--clock must be 'system' or 'replay', not {clock!r}")
        if train_now and not scheduler:
            raise ConfigError("--train-now needs the scheduler: drop --no-scheduler")
        settings = cli_settings(config)
        check_exposure(settings, host, allow_unauthenticated=allow_unauthenticated)
        ensure_free(host, port, "the API", "--port (make run PORT=...)")
        if mlflow_ui_port is not None:
            ensure_free(
                mlflow_ui_host,
                mlflow_ui_port,
                "the MLflow UI",
                "--mlflow-ui-port (make run MLFLOW_UI_PORT=...)",
            )
        # The app's libraries load only once the options are known to be good: a busy
        # port or a weak token is said at once.
        from api.main import create_app
        from pipelines.mlflow_ui import mlflow_ui

        mode: ClockMode = "replay" if clock == "replay" else "system"
        ui_address = local_ui_address(settings, mlflow_ui_host, mlflow_ui_port)
        application = create_app(
            settings,
            clock=mode,
            mlflow_ui=ui_address,
            refresh_seconds=settings.service.refresh_seconds,
        )
        with ExitStack() as stack:
            ui = (
                _runs_view(
                    settings,
                    stack.enter_context(mlflow_ui(settings, mlflow_ui_host, mlflow_ui_port)),
                )
                if mlflow_ui_port is not None
                else None
            )
            if scheduler:
                stack.enter_context(_serving_jobs(settings, application, mode, train_now))
            _print_addresses(
                host,
                port,
                ui,
                scheduler,
                settings.publish.grpc_expander_address,
                training=scheduler and train_now,
            )
            _serve_until_stopped(application, settings, host, port)


@contextmanager
def _serving_jobs(
    settings: AppSettings, application: FastAPI, mode: ClockMode, train_now: bool
) -> Iterator[None]:
    """Run the scheduled jobs beside ``application`` until the block ends."""
    from api.publish_runner import serving_job_runner, store_clock

    # The publish job publishes what this app serves (call-chain included), and
    # forecast and evaluate run on the app's clock (read from the store until the app
    # has started), so their times are the decisions' times.
    runner = serving_job_runner(
        lambda: getattr(application.state, "service", None),
        before=store_clock(settings, mode),
        replay=mode == "replay",
        mode=publish_mode(settings),
    )
    # The API serves only stored forecasts: make them before the first request.
    _forecast_before_serving(settings, runner)
    with _scheduler(settings, runner, train_now=train_now):
        yield


def _serve_until_stopped(application: FastAPI, settings: AppSettings, host: str, port: int) -> None:
    """Serve ``application`` with uvicorn until Ctrl-C or SIGTERM (a clean stop)."""
    import uvicorn

    from api.server import server_config, use_switch_interval

    # Hundreds of thousands of long-lived objects (modules, classes) come with the
    # imports; freezing them keeps full collections from stalling requests.
    gc.collect()
    gc.freeze()
    use_switch_interval(settings.service)
    server = uvicorn.Server(server_config(application, settings.service, host=host, port=port))
    # uvicorn re-raises the signal it shut down on once it has stopped. Ctrl-C (SIGINT)
    # comes back as KeyboardInterrupt; SIGTERM's default action would end the process
    # at once, before the MLflow UI and the scheduler are stopped (the UI was left
    # running), so it is turned into an exception too. Either is a clean stop (as
    # uvicorn.run treats it), exit code 0.
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        with contextlib.suppress(KeyboardInterrupt, _TerminatedError):
            server.run()
    finally:
        signal.signal(signal.SIGTERM, previous)


class _TerminatedError(Exception):
    """SIGTERM arrived: unwind, stopping what ``serve`` started."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise _TerminatedError


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address (or ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: AppSettings, host: str, *, allow_unauthenticated: bool) -> None:
    """Refuse to serve an unguarded API beyond this machine unless explicitly allowed.

    Raises:
        ConfigError: a token is empty; or ``host`` is not loopback and a token is a
            well-known placeholder or shorter than 16 characters, or no token is
            configured and ``allow_unauthenticated`` is False.
    """
    from api.auth import token_problems

    service = settings.service
    # Checked here, before any banner: a bad token must stop the start, not a request.
    problems = token_problems(service, exposed=not is_loopback(host))
    if problems:
        raise ConfigError(f"refusing to serve on {host}: " + "; ".join(problems))
    guarded = bool(service.read_tokens or service.write_tokens)
    if guarded or allow_unauthenticated or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to serve on {host} without API tokens: anyone who reaches it could read "
        "recommendations and push samples. Set service.write_tokens and service.read_tokens "
        "(FORESIGHT_SERVICE__WRITE_TOKENS / FORESIGHT_SERVICE__READ_TOKENS, JSON lists), "
        "listen on 127.0.0.1, or pass --allow-unauthenticated to accept the risk"
    )


def local_ui_address(settings: AppSettings, host: str, port: int | None) -> str | None:
    """The address of the MLflow UI that serve starts, for the dashboard's model link.

    None without ``--mlflow-ui-port``, and for a tracking server (``http(s)://``): it
    is its own UI, which the app links by itself.
    """
    if port is None or settings.mlflow_tracking_uri.startswith(("http://", "https://")):
        return None
    return f"http://{host}:{port}"


def _runs_view(settings: AppSettings, ui: str) -> str:
    """The UI's page of the training runs; the UI's address when it cannot be had."""
    from forecaster.tracking import ensure_experiment, runs_view_url
    from pipelines.config.tracking import tracking_config

    if ui.startswith(settings.mlflow_tracking_uri):
        return ui  # a remote tracking server: not worth waiting on it here
    try:
        return runs_view_url(ui, ensure_experiment(tracking_config(settings)))
    except TrackingError:
        return ui


class _NoFollowUps:
    """The startup forecast starts nothing after it (the scheduler takes over)."""

    def run_soon(self, name: str) -> None:
        """Do nothing: the scheduler runs ``name`` on its schedule."""


def _forecast_before_serving(settings: AppSettings, runner: JobRunner) -> None:
    """Seed an empty store from the sample data, then run the forecast job once."""
    from pipelines.config.pools_file import load_pools
    from pipelines.dataset import seed_from_sample
    from pipelines.scheduler.dispatch import JobContext, execute
    from pipelines.store.store import open_store

    store = open_store(settings.store_url)
    try:
        try:
            seed_from_sample(settings, store, load_pools(settings.pools_file))
        except ForesightError as exc:
            console.print(f"[yellow]Not seeding from the sample data:[/] {exc}")
        report = execute(JobContext(settings, store, runner, _NoFollowUps()), "forecast")
    finally:
        store.close()
    colour = "green" if report.outcome in ("ok", "partial") else "yellow"
    console.print(f"[{colour}]Forecast job at startup ({report.outcome}):[/] {report.summary}")


@contextmanager
def _scheduler(
    settings: AppSettings, runner: JobRunner, *, train_now: bool = False
) -> Iterator[None]:
    from pipelines.executors import cancel_local_work, stop_local_pools
    from pipelines.scheduler.service import start_scheduler
    from pipelines.store.store import open_store

    store = open_store(settings.store_url)
    try:
        running = start_scheduler(settings, store, runner=runner)
        if train_now:
            if running.wait_until_leader(timeout=LEAD_WAIT_SECONDS):
                running.run_soon("train")
            else:
                console.print(
                    "[yellow]--train-now: another replica leads the scheduler; the training "
                    "runs at its scheduled time there.[/]",
                    soft_wrap=True,
                )
        try:
            yield
        finally:
            # A training or forecast fanning out would otherwise hold the stop (Ctrl-C)
            # for minutes: its queued work is cancelled and it ends as interrupted.
            if cancel_local_work():
                console.print("Stopping: the running job's queued work was cancelled.")
            running.stop()
            stop_local_pools()
    finally:
        store.close()


def _print_addresses(
    host: str,
    port: int,
    ui: str | None,
    scheduler: bool,
    expander: str | None = None,
    *,
    training: bool = False,
) -> None:
    base = f"http://{host}:{port}"
    lines = [
        f"Foresight is serving on {base}",
        f"  dashboard:        {base}/",
        f"  recommendations:  {base}/recommendation",
        f"  API docs:         {base}/docs",
    ]
    if ui is not None:
        lines.append(f"  MLflow UI:        {ui}")
    if expander is not None:
        lines.append(f"  gRPC expander:    {expander} (TLS, cluster-autoscaler --expander=grpc)")
    lines.append(
        "  scheduler:        running (jobs: `foresight jobs`)"
        if scheduler
        else "  scheduler:        off (--no-scheduler)"
    )
    if training:
        lines.append(
            "  training:         the full model set trains now in the background; the "
            "version it registers serves once the gate promotes it (`foresight jobs`, the "
            "dashboard's model version)"
        )
    lines.append("Ctrl-C stops.")
    console.print("\n".join(lines), soft_wrap=True)
