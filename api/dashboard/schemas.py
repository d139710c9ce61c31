"""Response bodies of the dashboard's own JSON routes (history, pool view, status)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

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


class StepPoint(BaseModel):
    """A value in force from ``ds`` on (a step series: recommended nodes)."""

    model_config = ConfigDict(extra="forbid")

    ds: datetime
    nodes: int


class ScaleEvent(BaseModel):
    """A change of the recommended or of the actual node count."""

    model_config = ConfigDict(extra="forbid")

    ds: datetime
    kind: Literal["recommended", "nodes"] = Field(
        description="recommended: the recommendation changed; nodes: the ready nodes did"
    )
    before: float
    after: float


class BandPoint(BaseModel):
    """One step of the served forecast: the lowest quantile, the median and the served one."""

    model_config = ConfigDict(extra="forbid")

    ds: datetime
    lo: float
    mid: float | None
    hi: float


class BandOut(BaseModel):
    """The forecast the recommendation uses, its served quantile calibrated as served."""

    model_config = ConfigDict(extra="forbid")

    lo_level: float
    level: float = Field(description="the pool's quantile (the band's upper edge)")
    offset: float | None = Field(description="GPUs of live calibration added; null: none")
    generated_at: datetime
    observed_until: datetime | None
    points: list[BandPoint]


class Age(BaseModel):
    """A time and its age on the decision clock (null when unknown)."""

    model_config = ConfigDict(extra="forbid")

    at: datetime | None
    age_seconds: float | None


class LiveErrorOut(BaseModel):
    """The evaluate job's live forecast error of the pool's demand."""

    model_config = ConfigDict(extra="forbid")

    mase: float | None = Field(description="live MASE; null until the evaluate job measured it")
    bound: float = Field(description="above it the recommendation goes reactive")
    measured: Age


class TermRow(BaseModel):
    """One row of the explanation's table of terms."""

    model_config = ConfigDict(extra="forbid")

    term: str
    nodes: int | None = Field(description="the node count after this stage; null: not used")
    detail: str
    age_seconds: float | None = Field(description="age of the input behind it, if any")
    decisive: bool = Field(description="this term set the number")


class PoolViewOut(BaseModel):
    """Everything the dashboard draws for one pool beside the recommendation set."""

    model_config = ConfigDict(extra="forbid")

    pool: str
    since: datetime
    until: datetime = Field(description="the decision clock's now")
    gpus_per_node: int
    series: dict[str, list[HistoryPoint]] = Field(description="demand_gpus and nodes samples")
    recommended: list[StepPoint] = Field(
        description="the recorded recommendations in force over [since, until], oldest first"
    )
    events: list[ScaleEvent]
    band: BandOut | None
    band_missing: str = Field(default="", description="why there is no band")
    newest_sample: Age
    live_error: LiveErrorOut
    headline: str | None = Field(description="what to do and why, in a few words")
    terms: list[TermRow]


class JobOut(BaseModel):
    """One scheduled job: its last outcome and next run (wall clock)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    trigger: str
    outcome: str | None
    summary: str
    last_run: datetime | None
    next_run: datetime | None


class SchedulerOut(BaseModel):
    """Who leads the scheduler and how each job did (wall-clock times)."""

    model_config = ConfigDict(extra="forbid")

    leader: str | None
    leader_since: datetime | None
    jobs: list[JobOut]
    wall_now: datetime


class ModelOut(BaseModel):
    """The served model version and the forecast run it serves."""

    model_config = ConfigDict(extra="forbid")

    version: str | None
    source: str | None
    promoted_at: datetime | None = Field(description="when the train job promoted it (wall)")
    forecast_generated: Age
    forecast_observed_until: Age
    mlflow_url: str | None = Field(description="the version's page in the MLflow UI, if known")


class StatusOut(BaseModel):
    """Deployment-wide freshness: the model, its forecast run and the scheduler."""

    model_config = ConfigDict(extra="forbid")

    now: datetime
    model: ModelOut
    scheduler: SchedulerOut
