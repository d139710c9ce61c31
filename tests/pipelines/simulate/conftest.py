"""Toy demand series, pools and a scripted policy shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from pipelines.config.pools import PoolConfig
from pipelines.config.settings import Settings, load_settings
from pipelines.simulate.types import History

START = pd.Timestamp("2024-05-01 00:00", tz="UTC")

SeriesFactory = Callable[..., pd.Series]
PoolFactory = Callable[..., PoolConfig]


def make_series(values: Sequence[float], minutes: int = 5) -> pd.Series:
    """Return demand in GPUs on a regular step of ``minutes`` from ``START``."""
    index = pd.date_range(START, periods=len(values), freq=pd.Timedelta(minutes=minutes))
    return pd.Series([float(v) for v in values], index=index, name="toy")


def make_pool(
    lead_minutes: float = 5, max_nodes: int = 100, min_nodes: int = 0, cost: float = 3.0
) -> PoolConfig:
    """Return a real pool config: 8 GPUs per node, the given lead time and bounds."""
    return PoolConfig(
        name="toy",
        node_group_id="toy-ng",
        gpus_per_node=8,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        lead_time=timedelta(minutes=lead_minutes),
        cost_per_node_hour=cost,
    )


class Scripted:
    """Asks for a fixed sequence of node counts, one per step, and records what it saw."""

    def __init__(self, desires: Sequence[int]) -> None:
        self.desires = list(desires)
        self.seen: list[History] = []

    def reset(self) -> None:
        self.seen = []

    def decide(self, history: History) -> int:
        self.seen.append(history)
        return self.desires[history.t]


@pytest.fixture
def sim_settings(tmp_path: Path) -> Settings:
    """Settings of a replay's Foresight: the fast model set, nothing read from disk."""
    return load_settings(root=tmp_path, model_set="fast")


@pytest.fixture
def series() -> SeriesFactory:
    return make_series


@pytest.fixture
def pool() -> PoolFactory:
    return make_pool


@pytest.fixture
def scripted() -> Callable[[Sequence[int]], Scripted]:
    return Scripted
