"""``foresight scorecard``: the shadow scorecard of each pool, read from the store.

Details: docs/scorecard.md, "Notes from the code", `cli/scorecard.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from cli.support import ConfigOption, cli_errors, cli_settings, console
from forecaster.exceptions import ConfigError, DataValidationError
from pipelines.scorecard.types import Window

if TYPE_CHECKING:
    from api.scorecard import ScorecardOut
    from pipelines.config.pools import PoolsConfig
    from pipelines.store.store import Store


class ClockMode(StrEnum):
    """Where the windows end."""

    SYSTEM = "system"
    REPLAY = "replay"


def scorecard_command(
    config: ConfigOption = None,
    pools: Annotated[
        list[str] | None,
        typer.Option("--pool", help="Only this pool (repeatable); default every pool."),
    ] = None,
    window: Annotated[
        Window | None, typer.Option("--window", help="Only this window; default both.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the GET /scorecard body instead of a table.")
    ] = False,
    clock: Annotated[
        ClockMode,
        typer.Option(
            "--clock",
            help="'system': the windows end now; 'replay': at the newest stored sample "
            "(for the committed sample, whose data is in the past).",
        ),
    ] = ClockMode.SYSTEM,
) -> None:
    """Score what Foresight recommended against what happened: waiting avoided, nodes added."""
    from api.scorecard import DEFINITION, PoolScorecardOut, ScorecardOut, windows_of
    from pipelines.config.pools_file import load_pools
    from pipelines.scorecard.load import pool_scorecard
    from pipelines.store.store import open_store

    with cli_errors():
        settings = cli_settings(config)
        configured = load_pools(settings.pools_file)
        chosen = _select(configured, pools or [])
        with open_store(settings.store_url) as store:
            now = _now(store, configured) if clock is ClockMode.REPLAY else datetime.now(UTC)
            cards = [
                pool_scorecard(store, configured.get(name), now=now, windows=windows_of(window))
                for name in chosen
            ]
        body = ScorecardOut(
            generated_at=now,
            definition=DEFINITION,
            pools=[PoolScorecardOut.of(card, with_timeline=False) for card in cards],
        )
        if json_output:
            # Plain print: rich would wrap and colour the JSON.
            print(body.model_dump_json(indent=2))
            return
        console.print(scorecard_table(body))
        console.print(Text(body.definition, style="dim"), soft_wrap=True)


def _select(configured: PoolsConfig, names: list[str]) -> list[str]:
    unknown = [name for name in dict.fromkeys(names) if name not in configured.names]
    if unknown:
        raise ConfigError(
            f"no pool named {', '.join(map(repr, unknown))}; known pools: "
            f"{', '.join(configured.names)}"
        )
    return [name for name in configured.names if not names or name in names]


def _now(store: Store, configured: PoolsConfig) -> datetime:
    """The newest stored sample of any pool's series: "now" of a replay."""
    from forecaster.loaders import DEMAND

    stamps = store.samples.last_timestamps(
        [pool.series_id(DEMAND) for pool in configured.pools]
    ).values()
    if not stamps:
        raise DataValidationError(
            "--clock replay: the store holds no demand samples of any pool; ingest some "
            "(`foresight ingest`, or `foresight serve` seeds the committed sample)"
        )
    return max(stamps).to_pydatetime()


def scorecard_table(body: ScorecardOut) -> Table:
    """A rich table of the scorecards: one row per pool and window."""
    table = Table(title=f"Shadow scorecard, windows ending {body.generated_at:%Y-%m-%d %H:%M} UTC")
    columns = (
        "pool",
        "window",
        "waiting GPU-h actual",
        "waiting GPU-h plan",
        "avoided",
        "node-h actual",
        "node-h plan",
        "added",
        "added cost",
        "coverage",
        "samples",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("pool", "window") else "right")
    for card in body.pools:
        for name, score in card.windows.items():
            table.add_row(
                Text(card.pool),
                name.value,
                f"{score.waiting_gpu_hours.actual:.1f}",
                f"{score.waiting_gpu_hours.plan:.1f}",
                f"{score.waiting_gpu_hours_avoided:.1f}",
                f"{score.node_hours.actual:.1f}",
                f"{score.node_hours.plan:.1f}",
                f"{score.node_hours_added:.1f}",
                f"{score.added_cost:.2f}",
                f"{score.coverage:.0%}",
                str(score.samples),
            )
    return table
