"""``foresight publish``: write the recommendation set to the cluster and the webhooks.

Details: docs/consumers.md, "Notes from the code", `cli/publish.py`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from api.clock import ClockMode
from api.publishing import PublishOutcome, publish_once, publishing_service
from cli.support import ConfigOption, cli_errors, cli_settings, console
from forecaster.exceptions import ConfigError
from pipelines.config.pools_file import load_pools
from pipelines.dataset import seed_from_sample
from pipelines.store.store import open_store

ApplyOption = Annotated[
    bool, typer.Option("--apply", help="Write to the cluster and send webhooks (default: dry run).")
]
ClockOption = Annotated[
    str,
    typer.Option(
        "--clock",
        help="'system' (wall time) or 'replay' (as of the newest sample: for the committed "
        "sample, whose data is in the past).",
    ),
]


SeedOption = Annotated[
    bool,
    typer.Option(
        "--seed-sample", help="First fill pools without samples from the committed sample data."
    ),
]


def publish_command(
    config: ConfigOption = None,
    apply: ApplyOption = False,
    clock: ClockOption = "system",
    seed_sample: SeedOption = False,
) -> None:
    """Publish the priority-expander ConfigMap, buffers and webhooks (dry run by default)."""
    with cli_errors():
        if clock not in ("system", "replay"):
            raise ConfigError(f"--clock must be 'system' or 'replay', not {clock!r}")
        settings = cli_settings(config)
        if apply and settings.service.forecast_only:
            raise ConfigError(
                "--apply refused: service.forecast_only is true (the default), so Foresight "
                "must not write to a cluster; set FORESIGHT_SERVICE__FORECAST_ONLY=false (or "
                "service: {forecast_only: false} in the --config file) to allow it"
            )
        mode: ClockMode = "replay" if clock == "replay" else "system"
        with open_store(settings.store_url) as store:
            if seed_sample:
                rows = seed_from_sample(settings, store, load_pools(settings.pools_file))
                console.print(f"Seeded {rows} samples from the sample data set.")
            service = publishing_service(settings, store, clock=mode)
            outcome = publish_once(
                settings, store, mode="apply" if apply else "dry_run", service=service
            )
        print_outcome(outcome)
    code = exit_code(outcome)
    if code:
        raise typer.Exit(code=code)


def exit_code(outcome: PublishOutcome) -> int:
    """1 when the API server refused an object; 0 otherwise (a skip is deliberate)."""
    return 1 if "failed" in outcome.objects.values() else 0


def print_outcome(outcome: PublishOutcome) -> None:
    """Print the set, the object changes, the webhook plans and the deliveries."""
    verb = "Wrote" if outcome.applied else "Dry run"
    console.print(
        f"{verb} at {outcome.generated_at.isoformat()}; cluster: {outcome.cluster}"
        + (f"; {outcome.reason}" if outcome.reason else ""),
        soft_wrap=True,
    )
    console.print(_recommendations_table(outcome))
    for pool, why in outcome.missing.items():
        console.print(f"[yellow]pool {pool}: no recommendation[/] ({why}); its objects are kept")
    reactive = sorted(pool for pool, mode in outcome.modes.items() if mode == "reactive")
    if reactive:
        console.print(
            f"[yellow]reactive (no trusted forecast):[/] {', '.join(reactive)}; the ConfigMap "
            "ranks them by their shortfall from live demand, then cost per GPU",
            soft_wrap=True,
        )
    console.print(_changes_table(outcome))
    configmap = outcome.configmap
    console.print(f"Priority ConfigMap: {configmap.note}", markup=False, soft_wrap=True)
    if not outcome.applied and not configmap.skipped:
        console.print("ConfigMap it would write:")
        # soft_wrap: a line wrapped at the terminal's width would corrupt the YAML
        # (the annotation's JSON is one long string).
        console.print(configmap.yaml_text, markup=False, highlight=False, soft_wrap=True)
    for plan in outcome.webhooks:
        if not plan.changed:
            console.print(f"webhook {plan.target_url}: unchanged, nothing queued", soft_wrap=True)
        elif plan.item_id is None:
            console.print(
                f"webhook {plan.target_url}: would queue key {plan.idempotency_key}", soft_wrap=True
            )
        else:
            console.print(f"webhook {plan.target_url}: queued #{plan.item_id}", soft_wrap=True)
    for result in outcome.deliveries:
        status = f" HTTP {result.status_code}" if result.status_code is not None else ""
        detail = f": {result.error}" if result.error else ""
        console.print(
            f"delivery #{result.item_id} to {result.target_url}: {result.outcome}{status}{detail}",
            soft_wrap=True,
        )


def _recommendations_table(outcome: PublishOutcome) -> Table:
    table = Table(title="Recommendations")
    columns = ("pool", "mode", "current", "desired", "action", "placeholders", "priority")
    for column in columns:
        left = column in {"pool", "mode", "action"}
        table.add_column(column, justify="left" if left else "right")
    priority = {entry.pool: entry.priority for entry in outcome.configmap.config.ranking}
    for rec in outcome.recommendations:
        table.add_row(
            rec.pool,
            rec.mode,
            str(rec.current_nodes),
            str(rec.desired_nodes),
            rec.action,
            str(rec.headroom_pods),
            str(priority.get(rec.pool, "")),
        )
    return table


def _changes_table(outcome: PublishOutcome) -> Table:
    title = f"Kubernetes objects (buffers as {outcome.shape})"
    table = Table(title=title + ("" if outcome.applied else ", dry run"))
    for column in ("result", "action", "object", "detail"):
        table.add_column(column, overflow="fold")
    for change in outcome.changes:
        result = outcome.objects.get(change.target, change.action)
        style = _RESULT_STYLE.get(result, "")
        detail = change.reason or "\n".join(change.detail)
        table.add_row(Text(result, style=style), change.action, Text(change.target), Text(detail))
    return table


_RESULT_STYLE = {"skipped": "yellow", "failed": "bold red", "unchanged": "dim"}
