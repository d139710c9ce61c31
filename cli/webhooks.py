"""``foresight webhooks``: the webhook outbox's dead letters, and retrying them.

Details: docs/consumers.md, "Notes from the code", `cli/webhooks.py`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from cli.support import ConfigOption, cli_errors, cli_settings, console
from forecaster.exceptions import ConfigError
from pipelines.store.store import open_store

app = typer.Typer(
    help="The webhook outbox: list dead letters and retry them.", no_args_is_help=True
)


@app.command("dead")
def dead_command(
    config: ConfigOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 50,
) -> None:
    """List the dead letters, newest first, with the receiver's last answer."""
    with cli_errors():
        settings = cli_settings(config)
        with open_store(settings.store_url) as store:
            counts = store.outbox.counts()
            dead = store.outbox.dead_letters(limit=limit)
    table = Table(title=f"Dead letters ({counts['dead']})")
    for column in ("id", "receiver", "dead since (UTC)", "attempts", "last error"):
        table.add_column(column, overflow="fold")
    for item in dead:
        when = item.dead_at.strftime("%Y-%m-%d %H:%M:%S") if item.dead_at else "-"
        table.add_row(
            str(item.id),
            Text(item.target_url),
            when,
            str(item.attempts),
            Text(item.last_error or ""),
        )
    console.print(table)
    console.print(
        f"outbox: {counts['pending']} pending, {counts['delivered']} delivered, "
        f"{counts['dead']} dead",
        soft_wrap=True,
    )


@app.command("retry")
def retry_command(
    ids: Annotated[
        list[int] | None, typer.Argument(help="Dead letters to retry, by id (see `dead`).")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Retry every dead letter.")] = False,
    outdated: Annotated[
        bool,
        typer.Option(
            "--allow-outdated",
            help="Also resend a set when a newer one was delivered to that URL since "
            "(the receiver then ends on the older set).",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Make dead letters pending again; the next delivery pass sends them."""
    with cli_errors():
        if bool(ids) == every:
            raise ConfigError("give dead-letter ids, or --all (not both)")
        settings = cli_settings(config)
        with open_store(settings.store_url) as store:
            outcome = store.outbox.retry(None if every else ids, allow_outdated=outdated)
    for item_id in outcome.retried:
        console.print(f"[green]webhook #{item_id} pending again[/]", soft_wrap=True)
    for reason in outcome.refused.values():
        console.print(Text(f"not retried: {reason}", style="yellow"), soft_wrap=True)
    if not outcome.retried and not outcome.refused:
        console.print("no dead letters", soft_wrap=True)
    if outcome.refused:
        raise typer.Exit(code=1)
