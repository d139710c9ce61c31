"""How a twin run is shown: the comparison table and the hourly progress line."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from pipelines.twin.cluster import SimCluster
from pipelines.twin.loop import Progress

_LABELS = {
    "waiting_gpu_hours": "waiting GPU-hours",
    "node_hours": "node-hours",
    "gpu_hours_provisioned": "GPU-hours provisioned",
    "scale_ups": "scale-ups",
    "scale_downs": "scale-downs",
    "nodes_added": "nodes added",
    "nodes_removed": "nodes removed",
    "p95_wait_minutes": "p95 wait (min)",
}


def comparison_table(title: str, rows: Sequence[dict[str, Any]]) -> Table:
    """Twin against replay, one figure a row, with the relative difference."""
    table = Table(title=title)
    for column in ("figure", "twin", "replay", "twin vs replay"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in rows:
        rel = float(row["relative_difference"])
        shown = "n/a" if math.isinf(rel) else f"{rel:+.2%}"
        table.add_row(
            _LABELS.get(str(row["figure"]), str(row["figure"])),
            f"{float(row['twin']):,.2f}",
            f"{float(row['replay']):,.2f}",
            shown,
        )
    return table


def hourly_progress(label: str, console: Console | None = None) -> Progress:
    """A progress callback printing one line per simulated hour (and at the last step).

    On a terminal the line goes through ``console``; elsewhere (CI, a log file) it is a
    plain line on stdout.
    """
    began = time.monotonic()
    terminal = console is not None and console.is_terminal

    def report(done: int, total: int, ts: pd.Timestamp, cluster: SimCluster) -> None:
        if ts.minute != 0 and done != total:
            return
        line = (
            f"{label} {ts:%Y-%m-%d %H:%M} step {done}/{total}: {cluster.ready} nodes ready, "
            f"{cluster.pending} booting; {time.monotonic() - began:,.0f} s"
        )
        if terminal and console is not None:
            console.print(line)
        else:
            print(line, file=sys.stdout, flush=True)

    return report
