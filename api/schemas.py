"""Request and response bodies of the HTTP API, separate from the domain types (docs/api.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
)

from forecaster.types import DEFAULT_LEVELS, quantile_column
from policy.explain import Explanation
from policy.recommendation import Recommendation
from policy.stabilise import StabilisationLimit
from policy.types import Action, HealthReason, Mode, Term

MAX_SAMPLES_PER_PUSH: Final = 10_000
SERIES_ID_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z][a-z0-9_]*$"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


Utc = Annotated[AwareDatetime, AfterValidator(lambda value: value.astimezone(UTC))]
"""An aware time, kept (and so written) in UTC."""


class InputReadingOut(_Out):
    """One input of a decision: value, when it was read, and its age at the decision."""

    value: float | None
    at: Utc | None
    age_seconds: float | None


class StagesOut(_Out):
    """The node count after each step of the policy's chain."""

    forecast_nodes: int | None
    latency_nodes: int | None
    floor_nodes: int
    need: int
    bounded: int
    window_max: int
    stabilised: int
    final: int


class LatencyOut(_Out):
    """The call-chain latency adjustment as received and as applied."""

    extra_nodes: int
    applied_nodes: int
    not_gpu_bound: bool
    reason: str
    services: list[str] = Field(description="the pool's services that asked for the nodes")


class HeldLatencyOut(_Out):
    """Nodes added for call-chain latency that the scale-down window still holds."""

    nodes: int = Field(description="nodes of the held value there only for latency")
    services: list[str] = Field(description="the services whose latency asked for them")
    until: Utc = Field(description="the decision that first no longer wanted them")
    released_at: Utc = Field(description="when the held value leaves the scale-down window")
    reason: str = Field(
        default="", description="why latency asked for them, as the analysis said then"
    )


class ExplanationOut(_Out):
    """Which term set the number, why, and every input's value and age."""

    term: Term
    mode: Mode
    summary: str
    health_reasons: list[HealthReason]
    health_detail: str
    stages: StagesOut
    inputs: dict[str, InputReadingOut]
    forecast_peak_at: Utc | None
    latency: LatencyOut
    stabilisation_limit: StabilisationLimit | None
    held_latency: HeldLatencyOut | None
    settings: dict[str, float]

    @classmethod
    def of(cls, explanation: Explanation) -> ExplanationOut:
        """Return the wire form of a decision's explanation.

        The parts whose fields carry the domain's names (stages, inputs, held latency)
        are read from the domain objects' attributes.
        """
        latency, held = explanation.latency, explanation.held_latency
        return cls(
            term=explanation.term,
            mode=explanation.mode,
            summary=explanation.summary,
            health_reasons=list(explanation.health_reasons),
            health_detail=explanation.health_detail,
            stages=StagesOut.model_validate(explanation.stages, from_attributes=True),
            inputs={
                name: InputReadingOut.model_validate(reading, from_attributes=True)
                for name, reading in explanation.inputs.items()
            },
            forecast_peak_at=explanation.forecast_peak_at,
            latency=LatencyOut(
                extra_nodes=latency.extra_nodes,
                applied_nodes=explanation.latency_applied,
                not_gpu_bound=latency.not_gpu_bound,
                reason=latency.reason,
                services=list(latency.services),
            ),
            stabilisation_limit=explanation.stabilisation_limit,
            held_latency=(
                None if held is None else HeldLatencyOut.model_validate(held, from_attributes=True)
            ),
            settings=dict(explanation.settings),
        )


class PoolRecommendation(_Out):
    """The recommendation for one pool."""

    pool: str
    current_nodes: int = Field(description="nodes ready now")
    desired_nodes: int = Field(description="nodes the pool should have")
    delta: int = Field(description="desired_nodes - current_nodes")
    action: Action
    mode: Mode = Field(description="predictive, or reactive when the forecast is not trusted")
    headroom_nodes: int = Field(description="desired nodes beyond what current demand occupies")
    headroom_pods: int = Field(description="placeholder pods for that headroom")
    gpus_per_placeholder_pod: int
    quantile: float = Field(description="the demand quantile provisioned for")
    forecast_quantiles: dict[str, float] = Field(
        description="quantiles of the demand peak (GPUs) over the lead time, e.g. q0.9: the "
        "stored peak forecast, else the largest per-step quantile over the decision window; "
        "without any forecast (mode reactive) the live demand the decision used, under q0.5, "
        "q0.9, q0.95 and the pool's own quantile, so a KEDA valueLocation such as "
        "pools.0.forecast_quantiles.q0\\.9 reads a number in every mode"
    )
    model_version: str | None
    data_freshness_seconds: float = Field(description="age of the oldest live reading used")
    generated_at: Utc
    valid_until: Utc
    explanation: ExplanationOut

    @classmethod
    def of(cls, rec: Recommendation) -> PoolRecommendation:
        """Return the wire form of a policy recommendation (its state stays in the store).

        Quantile keys are forecast-frame column names (``q0.9``), so a GJSON path such
        as ``pools.0.forecast_quantiles.q0\\.9`` reads one.
        """
        return cls(
            pool=rec.pool,
            current_nodes=rec.current_nodes,
            desired_nodes=rec.desired_nodes,
            delta=rec.delta,
            action=rec.action,
            mode=rec.mode,
            headroom_nodes=rec.headroom_nodes,
            headroom_pods=rec.headroom_pods,
            gpus_per_placeholder_pod=rec.gpus_per_placeholder_pod,
            quantile=rec.quantile,
            forecast_quantiles=_quantiles(rec),
            model_version=rec.model_version,
            data_freshness_seconds=rec.data_freshness_seconds,
            generated_at=rec.generated_at,
            valid_until=rec.valid_until,
            explanation=ExplanationOut.of(rec.explanation),
        )


def _quantiles(rec: Recommendation) -> dict[str, float]:
    """Quantiles by column name; live demand without a forecast, so no key goes missing."""
    if rec.forecast_quantiles:
        return {quantile_column(level): value for level, value in rec.forecast_quantiles.items()}
    demand = rec.explanation.inputs.get("live_demand_gpus")
    if demand is None or demand.value is None:
        return {}
    levels = sorted({*DEFAULT_LEVELS, rec.quantile})
    return {quantile_column(level): float(demand.value) for level in levels}


class UnavailablePool(_Out):
    """A pool no recommendation could be made for, and why."""

    pool: str
    reason: str


class RecommendationSet(_Out):
    """Recommendations of several pools, in the pools file's order."""

    generated_at: datetime
    pools: list[PoolRecommendation]
    unavailable: list[UnavailablePool] = Field(
        default_factory=list, description="requested pools without live data yet"
    )


class ForecastRecord(BaseModel):
    """One step of a forecast frame; quantile columns ``q<level>`` are extra keys."""

    model_config = ConfigDict(extra="allow")

    unique_id: str
    ds: datetime
    step: int
    model: str
    mean: float
    family: str | None = None


class ForecastIndexOut(_Out):
    """Where each pool's demand forecast is: ``GET /forecast/{pool}``."""

    forecasts: dict[str, str] = Field(description="pool name to its forecast's path")


class PeakOut(_Out):
    """Quantiles of the pool's demand peak over its lead time, as the forecast job stored them."""

    origin: datetime = Field(description="the newest observation the forecast was made from")
    window_end: datetime = Field(description="the end of the window the peak is over")
    lead_seconds: float = Field(description="the window's length (the lead time in steps)")
    last: float = Field(description="demand at the origin, GPUs (quantile - last = headroom)")
    quantiles: dict[str, float] = Field(description="q<level> to the peak's quantile, GPUs")
    return_level: float | None = Field(
        default=None,
        description="the most demand reached in the hour before an idle spell the pool has "
        "just come back from, which the quantiles from q0.5 up are held at or above; null "
        "when they are not",
    )


class ForecastOut(_Out):
    """The demand forecast of one pool as the recommendation uses it (stored by the job)."""

    pool: str
    series_id: str
    model_version: str | None
    generated_at: datetime
    last_observed: datetime | None
    step_seconds: float
    quantile: float
    levels: list[float]
    records: list[ForecastRecord]
    peak: PeakOut | None = Field(
        default=None, description="the peak forecast the policy provisions at; null: none"
    )
    peak_missing: str = Field(default="", description="why there is no peak forecast")


class SignalOut(_Out):
    """Where one signal of a pool comes from."""

    promql: str | None
    column: str | None


class ServiceOut(_Out):
    """A call-chain service on the pool and its p95 SLO."""

    name: str
    slo_p95_ms: float | None


class ScaleDownOut(_Out):
    """How cautiously the pool shrinks."""

    window_seconds: float
    max_step_nodes: int
    max_step_percent: float


class PoolOut(_Out):
    """One configured pool."""

    name: str
    node_group_id: str
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    lead_time_seconds: float
    cost_per_node_hour: float
    target_utilisation: float
    quantile: float
    safety_margin: float = Field(
        description="volatility units provisioned beyond the peak quantile (0: none)"
    )
    signals: dict[str, SignalOut]
    services: list[ServiceOut]
    scale_down: ScaleDownOut
    node_group_warning: str | None = Field(
        default=None,
        description="why node_group_id is not in the form the cloud provider reports "
        "(the pool would match only the priority expander's catch-all), else null",
    )


class PoolsOut(_Out):
    """Every configured pool, in the pools file's order."""

    cloud_provider: str | None = Field(
        default=None, description="the pools file's cloud_provider, null when unset"
    )
    pools: list[PoolOut]


def _timestamp_text(value: Any) -> Any:
    """Accept only RFC 3339 text: a bare number would be read as seconds since 1970."""
    if not isinstance(value, str):
        raise ValueError("must be an RFC 3339 time string such as 2025-03-30T23:55:00Z")
    return value


class MetricSampleIn(BaseModel):
    """One pushed observation."""

    model_config = ConfigDict(extra="forbid")

    series_id: str = Field(
        pattern=SERIES_ID_PATTERN,
        max_length=200,
        description="'<pool>/<signal>', e.g. 'a100-train/queue_gpus'",
        examples=["a100-train/queue_gpus"],
    )
    # Strict: a number of seconds is not a time, and "12" or true is not a number.
    ts: Annotated[AwareDatetime, BeforeValidator(_timestamp_text)] = Field(
        description="observation time with a timezone, e.g. ...Z; from 2000 on and not "
        "later than now + service.max_sample_future_seconds",
    )
    value: Annotated[float, Strict()] = Field(
        allow_inf_nan=False,
        description="a finite JSON number (not a string or boolean); counts >= 0, "
        "gpu_util in 0-100",
    )


class IngestOut(_Out):
    """What a push stored."""

    accepted: int = Field(description="samples received")
    rows_written: int = Field(description="rows written, derived demand included")
    pools: list[str] = Field(description="pools whose recommendation was recomputed")


class HealthOut(_Out):
    """Liveness: the process answers."""

    status: Literal["ok"] = "ok"


class ReadyOut(_Out):
    """Readiness: what was checked and what failed."""

    ready: bool
    reasons: list[str]
    checks: dict[str, dict[str, Any]]
