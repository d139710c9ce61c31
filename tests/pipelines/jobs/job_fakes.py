"""Fakes of the job tests: a seeded in-memory source and quick settings."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.exceptions import SourceError
from forecaster.types import DS, UID, Y
from pipelines.config.settings import Settings, load_settings
from pipelines.sources.protocol import TimeLike, empty_frame, to_utc

POOL = "p1"
SIGNALS = ("queue_gpus", "allocated_gpus", "gpu_util", "nodes")
STEP = pd.Timedelta(minutes=10)
START = pd.Timestamp("2025-03-01", tz="UTC")
DAYS = 4
POOLS_YAML = f"pools:\n  - name: {POOL}\n    node_group_id: ng-{POOL}\n"


def synthetic(days: int = DAYS, seed: int = 7) -> pd.DataFrame:
    """Four signals of pool p1 at 10 min with a daily cycle and seeded noise."""
    rng = np.random.default_rng(seed)
    ds = pd.date_range(START, periods=days * 144, freq=STEP)
    t = np.arange(len(ds))
    day = 1.0 + np.sin(2 * np.pi * t / 144)
    values = {
        "queue_gpus": np.round(np.clip(4 * day + rng.normal(0, 1, len(t)), 0, None)),
        "allocated_gpus": np.round(20 + 10 * day + rng.normal(0, 1, len(t))),
        "gpu_util": np.clip(50 + 20 * day + rng.normal(0, 3, len(t)), 0, 100),
        "nodes": np.full(len(t), 5.0),
    }
    frames = [pd.DataFrame({UID: f"{POOL}/{s}", DS: ds, Y: v}) for s, v in values.items()]
    return pd.concat(frames, ignore_index=True)


class FakeSource:
    """A MetricSource over a frame; query = the series id of the frame.

    Attributes:
        calls: the ``(series ids, start, end)`` of every fetch.
        down: every fetch raises SourceError.
        fail_after: fetches that succeed before the source goes down (None: never).
        rejected: series whose query the source rejects.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.calls: list[tuple[tuple[str, ...], pd.Timestamp, pd.Timestamp]] = []
        self.down = False
        self.fail_after: int | None = None
        self.rejected: set[str] = set()

    def fetch(
        self, queries: Mapping[str, str], start: TimeLike, end: TimeLike, step: timedelta
    ) -> pd.DataFrame:
        first, last = to_utc(start), to_utc(end)
        self.calls.append((tuple(queries), first, last))
        if self.down or (self.fail_after is not None and len(self.calls) > self.fail_after):
            raise SourceError("fake source at http://fake:9090 failed 4 tries: connection refused")
        bad = self.rejected.intersection(queries.values())
        if bad:
            raise SourceError(f"fake source rejected the query {sorted(bad)}: parse error")
        rows = self.frame[
            self.frame[UID].isin(list(queries.values()))
            & (self.frame[DS] >= first)
            & (self.frame[DS] <= last)
        ]
        if rows.empty:
            return empty_frame()
        return rows.assign(**{UID: rows[UID].map({q: s for s, q in queries.items()})})


def make_settings(
    root: Path, settings_class: type[Settings] = Settings, **overrides: Any
) -> Settings:
    """Quick settings under ``root``: one pool, 10-min steps, 1 h horizon, no pool.

    ``settings_class`` is the class to build (the API's, for its groups).
    """
    pools = root / "pools.yaml"
    pools.write_text(POOLS_YAML, encoding="utf-8")
    values: dict[str, Any] = {
        "root": root,
        "pools_file": pools,
        "horizon": 6,
        "horizons": ("10min", "1h"),
        "selection_horizon": "1h",
        "backtest_windows": 2,
        "heldout_windows": 1,
        "max_train_days": 2,
        "scheduler": {"workers": 1},
        "prometheus": {"step": "10min", "backfill_days": 2},
    }
    values.update(overrides)
    return load_settings(settings_class=settings_class, **values)
