"""``foresight serve``: the API, the scheduler beside it, and (optionally) the MLflow UI.

Every replica runs the same command: the scheduler inside it joins the leader
election (see :mod:`pipelines.scheduler`), so exactly one replica runs the jobs while
all of them answer requests. Its publish job publishes what this process's API serves
(:mod:`api.publish_runner`), not a service of its own. The API serves the forecasts
the forecast job stored, so with the scheduler on, ``serve`` runs the forecast job
once before it starts serving. ``make run`` adds the MLflow UI of the local store.
"""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from forecaster.exceptions import ConfigError, ForesightError, TrackingError
from pipelines.cli.support import ConfigOption, cli_errors, cli_settings, console
from pipelines.config.pools import load_pools
from pipelines.config.settings import Settings
from pipelines.mlflow_ui import mlflow_ui
from pipelines.ports import ensure_free
from pipelines.scheduler import start_scheduler
from pipelines.scheduler.dispatch import JobContext, JobRunner, execute
from pipelines.store import open_store

if TYPE_CHECKING:
    from pipelines.jobs.report import JobReport


def serve_command(
    config: ConfigOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8000,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            help="'system' (wall time) or 'replay' (as of the newest sample: for the "
            "committed sample, whose data is in the past).",
        ),
    ] = "system",
    scheduler: Annotated[
        bool,
        typer.Option(
            "--scheduler/--no-scheduler",
            help="Run the scheduled jobs in this process too (one leader among replicas).",
        ),
    ] = True,
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
    import uvicorn

    from api.main import create_app
    from api.publish_runner import serving_job_runner
    from api.server import server_config

    with cli_errors():
        if clock not in ("system", "replay"):
            raise ConfigError(f"--clock must be 'system' or 'replay', not {clock!r}")
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
        application = create_app(settings, clock="replay" if clock == "replay" else "system")
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
                # The publish job publishes what this app serves (call-chain included).
                runner = serving_job_runner(lambda: getattr(application.state, "service", None))
                if clock == "replay":
                    runner = replay_clock_runner(runner)
                # The API serves only stored forecasts: make them before the first request.
                _forecast_before_serving(settings, runner)
                stack.enter_context(_scheduler(settings, runner))
            _print_addresses(host, port, ui, scheduler, settings.publish.grpc_expander_address)
            # Hundreds of thousands of long-lived objects (modules, classes) come with
            # the imports; freezing them keeps full collections from stalling requests
            # for a few hundred milliseconds (benchmarks/api_load.py measured ~240 ms).
            gc.collect()
            gc.freeze()
            server_settings = settings.service
            server = uvicorn.Server(
                server_config(application, server_settings, host=host, port=port)
            )
            # uvicorn re-raises the signal it shut down on once it has stopped. Ctrl-C
            # (SIGINT) comes back as KeyboardInterrupt; SIGTERM's default action would
            # end the process at once, before the MLflow UI and the scheduler are
            # stopped (the UI was left running), so it is turned into an exception too.
            # Either is a clean stop (as uvicorn.run treats it), exit code 0.
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


def check_exposure(settings: Settings, host: str, *, allow_unauthenticated: bool) -> None:
    """Refuse to serve an unguarded API beyond this machine unless explicitly allowed.

    Raises:
        ConfigError: ``host`` is not loopback, no token is configured and
            ``allow_unauthenticated`` is False.
    """
    service = settings.service
    guarded = bool(service.read_tokens or service.write_tokens)
    if guarded or allow_unauthenticated or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to serve on {host} without API tokens: anyone who reaches it could read "
        "recommendations and push samples. Set service.write_tokens and service.read_tokens "
        "(FORESIGHT_SERVICE__WRITE_TOKENS / FORESIGHT_SERVICE__READ_TOKENS, JSON lists), "
        "listen on 127.0.0.1, or pass --allow-unauthenticated to accept the risk"
    )


def _runs_view(settings: Settings, ui: str) -> str:
    """The UI's page of the training runs; the UI's address when it cannot be had."""
    from forecaster.tracking import ensure_experiment, runs_view_url
    from pipelines.config.tracking import tracking_config

    if ui.startswith(settings.mlflow_tracking_uri):
        return ui  # a remote tracking server: not worth waiting on it here
    try:
        return runs_view_url(ui, ensure_experiment(tracking_config(settings)))
    except TrackingError:
        return ui


ClockedJob = Callable[[Settings, datetime | None], "JobReport"]
"""Runs a job at a given ``now`` (None: the wall clock)."""


def _forecast_at(settings: Settings, now: datetime | None) -> JobReport:
    from pipelines.jobs.forecast import run_forecast

    return run_forecast(settings, now=now)


def replay_clock_runner(runner: JobRunner, forecast: ClockedJob = _forecast_at) -> JobRunner:
    """Run the forecast job at the replay clock's "now": the newest stored sample.

    Under ``--clock replay`` the service's "now" is the newest sample; a forecast
    stamped with the wall clock would be newer than every decision (and, being the
    newest run, served for ever after). Other jobs run through ``runner`` unchanged.

    Args:
        runner: runs every other job.
        forecast: runs the forecast job at a time (:func:`run_forecast` by default).
    """

    def run(name: str, settings: Settings) -> JobReport:
        if name != "forecast":
            return runner(name, settings)
        with open_store(settings.store_url) as store:
            newest = max(store.samples.last_timestamps().values(), default=None)
        return forecast(settings, None if newest is None else newest.to_pydatetime())

    return run


class _NoFollowUps:
    """The startup forecast starts nothing after it (the scheduler takes over)."""

    def run_soon(self, name: str) -> None:
        """Do nothing: the scheduler runs ``name`` on its schedule."""


def _forecast_before_serving(settings: Settings, runner: JobRunner) -> None:
    """Seed an empty store from the sample data, then run the forecast job once.

    The API reads the forecasts the forecast job stored and fits nothing, and the
    scheduler's first forecast is an interval away: without this, the first
    recommendations after ``make run`` would be reactive. The run is recorded like a
    scheduled one (``foresight jobs``); a failure (no champion yet) is reported and
    serving goes on, reactively, saying why.
    """
    from pipelines.dataset import seed_from_sample

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
def _scheduler(settings: Settings, runner: JobRunner) -> Iterator[None]:
    store = open_store(settings.store_url)
    try:
        running = start_scheduler(settings, store, runner=runner)
        try:
            yield
        finally:
            running.stop()
    finally:
        store.close()


def _print_addresses(
    host: str, port: int, ui: str | None, scheduler: bool, expander: str | None = None
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
    lines.append("Ctrl-C stops.")
    console.print("\n".join(lines), soft_wrap=True)
