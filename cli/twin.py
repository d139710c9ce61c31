"""``foresight twin``: the closed-loop twin, the real service against a simulated cluster.

Details: docs/twin.md, "Notes from the code", `cli/twin.py`."""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.support import cli_errors, console
from forecaster.exceptions import ConfigError

if TYPE_CHECKING:
    from pipelines.twin.case import TwinCase

SOURCES = ("sample", "earth-total")


def twin_command(
    source: Annotated[
        str,
        typer.Option(
            "--source",
            help="'sample' (a pool of the committed sample) or 'earth-total' (Helios Earth "
            "total from the shared traces folder).",
        ),
    ] = "sample",
    pool: Annotated[
        str, typer.Option("--pool", help="The sample's pool (with --source sample).")
    ] = "a100-train",
    shared_data: Annotated[
        Path | None,
        typer.Option("--shared-data", help="The shared traces folder; default ../shared/data."),
    ] = None,
    history_days: Annotated[
        int, typer.Option("--history-days", min=1, help="Days of history before the window.")
    ] = 7,
    steps: Annotated[int, typer.Option("--steps", min=2, help="Simulated steps to run.")] = 12,
    semantics: Annotated[
        str,
        typer.Option(
            "--semantics",
            help="'replay' (the node group set to desired_nodes, as the replay assumes) or "
            "'autoscaler' (cluster-autoscaler with placeholder pods).",
        ),
    ] = "replay",
    kill_after: Annotated[
        list[int] | None,
        typer.Option(
            "--kill-after",
            help="Kill the service with SIGKILL after this step and start it again on the "
            "same store (repeatable).",
        ),
    ] = None,
    kill_mid: Annotated[
        list[int] | None,
        typer.Option(
            "--kill-mid",
            help="Kill the service with SIGKILL within this step (after the push it decided "
            "on, before the step's forecast run) and start it again (repeatable).",
        ),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option("--workdir", help="Directory of the twin's deployment; default a temp dir."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON here.")
    ] = None,
) -> None:
    """Run the real service against a simulated cluster and compare with the replay."""
    with cli_errors():
        kills, mids = _check(source, semantics, steps, kill_after, kill_mid, workdir)
        from pipelines.twin.report import hourly_progress
        from pipelines.twin.run import run_case

        case = _case(source, pool, shared_data, timedelta(days=history_days), steps)
        directory = workdir or Path(tempfile.mkdtemp(prefix="foresight-twin-"))
        console.print(f"twin: {case.name}, {steps} steps, deployment in {directory}")
        report = run_case(
            case,
            directory,
            semantics="replay" if semantics == "replay" else "autoscaler",
            restart_after=kills,
            restart_mid=mids,
            progress=hourly_progress(f"twin {case.name}", console),
        )
        _show(report.as_json(), f"{case.name}: twin ({semantics}) vs replay, {steps} steps")
        if json_out is not None:
            json_out.write_text(json.dumps(report.as_json(), indent=2, default=str), "utf-8")
            console.print(f"wrote {json_out}")


def _show(data: dict[str, Any], title: str) -> None:
    """Print the table and the step agreement."""
    from pipelines.twin.report import comparison_table

    console.print(comparison_table(title, data["figures"]))
    agreement = data["desired_agreement"]
    console.print(
        f"desired nodes equal at {agreement:.1%} of steps; restarts: {data['restarts']}"
        if agreement is not None
        else f"restarts: {data['restarts']}"
    )


def _check(
    source: str,
    semantics: str,
    steps: int,
    kill_after: list[int] | None,
    kill_mid: list[int] | None,
    workdir: Path | None,
) -> tuple[list[int], list[int]]:
    """Refuse bad options, naming them; return the kill steps, sorted."""
    if source not in SOURCES:
        raise ConfigError(f"--source must be one of {', '.join(SOURCES)}, not {source!r}")
    if semantics not in ("replay", "autoscaler"):
        raise ConfigError(f"--semantics must be 'replay' or 'autoscaler', not {semantics!r}")
    kills = sorted(set(kill_after or ()))
    if any(k < 0 or k >= steps - 1 for k in kills):
        raise ConfigError(
            f"--kill-after {kills} must name steps from 0 to {steps - 2} (--steps {steps}), "
            "so the twin continues after the restart"
        )
    mids = sorted(set(kill_mid or ()))
    if any(k < 0 or k >= steps for k in mids):
        raise ConfigError(f"--kill-mid {mids} must name steps from 0 to {steps - 1}")
    if workdir is not None and workdir.exists() and any(workdir.iterdir()):
        raise ConfigError(
            f"--workdir {workdir} is not empty; pass a new or empty directory (the twin "
            "lays out its own store and model registry there)"
        )
    return kills, mids


def _case(source: str, pool: str, shared: Path | None, history: timedelta, steps: int) -> TwinCase:
    """The sample's pool or Earth total, with ``history`` before ``steps`` replayed."""
    from pipelines.twin.case import sample_case, trace_case

    if source == "sample":
        from api.settings import load_app_settings

        return sample_case(load_app_settings().sample_dir, pool, history, steps)
    return trace_case(shared, history, steps)
