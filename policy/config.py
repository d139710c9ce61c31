"""What the policy reads of a pool: its sizing rule and how cautiously it shrinks.

Details: docs/policy.md, "Notes from the code", `policy/config.py`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

_DURATION: Final = re.compile(r"-?\s*(?:\d+(?:\.\d+)?\s*[a-z]+\s*)+")
_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_UNITS: Final[Mapping[str, timedelta]] = {
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), timedelta(milliseconds=1)),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), timedelta(seconds=1)),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), timedelta(minutes=1)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), timedelta(hours=1)),
    **dict.fromkeys(("d", "day", "days"), timedelta(days=1)),
}


def parse_duration(value: Any) -> Any:
    """Parse compact durations such as ``10m``, ``15min``, ``900s`` or ``1h30m``.

    Anything else (a ``timedelta``, a number of seconds, ISO 8601 ``PT10M``,
    ``HH:MM:SS``) is returned unchanged for pydantic's own ``timedelta`` parsing.

    Raises:
        ValueError: a compact duration uses an unknown unit.
    """
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if not _DURATION.fullmatch(text):
        return value
    total = timedelta(0)
    sign = -1 if text.startswith("-") else 1
    for amount, unit in _DURATION_PART.findall(text):
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {value!r}; use s, m, min, h or d")
        total += float(amount) * _UNITS[unit]
    return sign * total


class ScaleDownConfig(BaseModel):
    """How cautiously the pool shrinks: scale-up is immediate, scale-down is not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: timedelta = Field(
        default=timedelta(minutes=10),
        description="how long a lower recommendation must hold before nodes are removed, "
        "a duration such as '10m'",
    )
    max_step_nodes: int = Field(
        default=1, ge=1, description="the most nodes removed in one step, an integer >= 1"
    )
    max_step_percent: float = Field(
        default=10.0,
        ge=0,
        le=100,
        description="on a larger pool, the most removed in one step as a percentage of the "
        "ready nodes (rounded down; a number in [0, 100], 0 to use max_step_nodes alone)",
    )

    def step_nodes(self, ready_nodes: int) -> int:
        """Return the most nodes one decision may remove with ``ready_nodes`` ready:
        ``max(max_step_nodes, floor(ready_nodes * max_step_percent / 100))``."""
        share = math.floor(max(0, ready_nodes) * self.max_step_percent / 100 + 1e-9)
        return max(self.max_step_nodes, share)

    @field_validator("window", mode="before")
    @classmethod
    def _parse_window(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator("window")
    @classmethod
    def _nonnegative_window(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("window must not be negative")
        return value


class PoolShape(Protocol):
    """A pool's size and speed: what sizing it in nodes needs (the policy and the replay)."""

    @property
    def gpus_per_node(self) -> int:
        """GPUs on one node."""

    @property
    def min_nodes(self) -> int:
        """The fewest nodes."""

    @property
    def max_nodes(self) -> int:
        """The most nodes."""

    @property
    def lead_time(self) -> timedelta:
        """Time from requesting a node to it running work."""


class PoolRule(PoolShape, Protocol):
    """The settings of one pool that :func:`policy.decide` sizes it by.

    ``pipelines.config.pools.PoolConfig`` is the one the deployment reads from its
    pools file; a test or a simulation may pass any object with these attributes.
    """

    @property
    def name(self) -> str:
        """The pool's name, echoed in the recommendation."""

    @property
    def target_utilisation(self) -> float:
        """The share of a node's GPUs planned to be busy."""

    @property
    def quantile(self) -> float:
        """The demand forecast quantile provisioned for."""

    @property
    def waiting_cost_ratio(self) -> float | None:
        """What waiting costs relative to idling, when the quantile came from it."""

    @property
    def quantile_rule(self) -> str:
        """Where the quantile comes from: ``newsvendor`` or ``quantile``."""

    @property
    def safety_margin(self) -> float:
        """Volatility units provisioned beyond the peak quantile (0: none; see ``policy.need``)."""

    @property
    def scale_down(self) -> ScaleDownConfig:
        """How cautiously the pool shrinks."""
