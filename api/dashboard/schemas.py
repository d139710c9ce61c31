"""Response bodies of the dashboard's own JSON route (the demand history)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class HistoryPoint(BaseModel):
    """One stored sample."""

    model_config = ConfigDict(extra="forbid")

    ds: datetime
    y: float


class HistoryOut(BaseModel):
    """Recent samples of a pool's demand and node count, oldest first."""

    model_config = ConfigDict(extra="forbid")

    pool: str
    since: datetime = Field(description="first timestamp included")
    until: datetime = Field(description="the service's now (replay clock: the newest sample)")
    gpus_per_node: int
    series: dict[str, list[HistoryPoint]] = Field(
        description="per signal (demand_gpus, nodes) its samples in [since, until]"
    )
