"""The API's settings: its own groups and the deployment's settings that carry them.

Details: docs/api.md, "Notes from the code", `api/settings.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr

from api.callchain.bottleneck_settings import (
    DEFAULT_BASELINE_FACTOR,
    DEFAULT_GPU_IDLE_BELOW,
    DEFAULT_MAX_SERVICES,
    DEFAULT_SETTLE,
)
from api.callchain.window import DEFAULT_MAX_AGE
from pipelines.config.sections import Section
from pipelines.config.settings import Settings, load_settings


class ServiceSettings(Section):
    """How the API guards itself and whether it may act on a cluster."""

    read_tokens: tuple[SecretStr, ...] = Field(
        default=(), description="bearer tokens allowed to read (any write token may read too)"
    )
    write_tokens: tuple[SecretStr, ...] = Field(
        default=(), description="bearer tokens allowed to write (push samples, spans, traces)"
    )
    max_body_bytes: int = Field(
        default=4 * 1024 * 1024, gt=0, description="the largest request body accepted, in bytes"
    )
    forecast_only: bool = Field(
        default=True,
        description="compute and serve recommendations without writing to a cluster",
    )
    live_calibration: bool = Field(
        default=True,
        description="add the evaluate job's live calibration offset (adaptive conformal "
        "inference over realised forecasts) to each pool's quantile forecast, so q0.9 "
        "covers 90 % under drift; false serves the model's own quantiles",
    )
    model_poll_seconds: float = Field(
        default=30.0,
        gt=0,
        description="seconds between a replica's checks of which version @champion names; "
        "a promotion reaches every replica within about this plus the model's load time",
    )
    refresh_seconds: float = Field(
        default=5.0,
        gt=0,
        description="seconds between the API's background refreshes, which pick up samples "
        "and forecast runs other processes stored and recompute recommendations about to "
        "expire",
    )
    max_sample_future_seconds: float = Field(
        default=300.0,
        ge=0,
        description="how far past the wall clock a pushed sample's time may be (clock skew), "
        "in seconds; later samples are refused",
    )
    metrics_public: bool = Field(
        default=False,
        description="serve /metrics without a token even when read tokens are configured "
        "(it shows each pool's desired and current nodes)",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="seconds a client may take to send a request's headers before the "
        "connection is closed",
    )
    keep_alive_s: float = Field(
        default=5.0, gt=0, description="seconds an idle keep-alive connection is kept open"
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        description="open connections at most; more are refused with 503 until some close",
    )
    gil_switch_ms: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description="how long, in milliseconds, a thread busy in Python (a push being "
        "stored, the refresh) may keep the interpreter from the thread answering requests "
        "(Python's switch interval; its own default is 5)",
    )
    live_stale_steps: int = Field(
        default=3,
        ge=1,
        description="live readings older than this many steps of the pool's series are stale "
        "(the decision turns reactive and /readyz reports data_stale), >= 1",
    )
    forecast_stale_steps: int = Field(
        default=3,
        ge=1,
        description="stored forecasts older than this many steps are stale (the forecast job "
        "runs about every step; 3 lets one run be late or missed), >= 1",
    )
    max_live_mase: float = Field(
        default=2.0,
        gt=0,
        description="the largest recent live forecast error (MASE) still trusted; above it "
        "the decision turns reactive, positive",
    )


ClusterAutoscalerVersion = Literal["1.33", "1.34", "1.35", "1.36"]
"""The cluster-autoscaler minor versions whose formats Foresight was checked against."""

ExpanderReactive = Literal["no_opinion", "rank"]
"""What the gRPC expander does without a trusted forecast (see ``PublishSettings``)."""


class PublishSettings(Section):
    """Where recommendations go: Kubernetes objects and webhooks."""

    namespace: str = Field(
        default="kube-system",
        description="the namespace of the cluster-autoscaler and its priority-expander ConfigMap",
    )
    buffers_namespace: str = Field(
        default="foresight", description="the namespace of the capacity buffers Foresight owns"
    )
    kubeconfig: Path | None = Field(
        default=None, description="a kubeconfig file (unset: in-cluster, then ~/.kube/config)"
    )
    kube_context: str | None = Field(default=None, description="a kubeconfig context name")
    webhook_urls: tuple[str, ...] = Field(
        default=(), description="URLs that receive the recommendation set when it changes"
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, description="seconds to wait for a webhook receiver, positive"
    )
    buffer_shape: Literal["overprovisioning", "capacity_buffer", "none"] = Field(
        default="overprovisioning",
        description="how `foresight publish` writes capacity buffers: 'overprovisioning' "
        "(placeholder Deployments, any cluster-autoscaler), 'capacity_buffer' "
        "(CapacityBuffer objects, cluster-autoscaler >= 1.35) or 'none' (only the ConfigMap)",
    )
    grpc_expander_address: str | None = Field(
        default=None,
        description="host:port on which `foresight serve` answers cluster-autoscaler's gRPC "
        "expander (--expander=grpc) over TLS, e.g. 0.0.0.0:8443 (unset: not served)",
    )
    grpc_expander_cert: Path | None = Field(
        default=None,
        description="the PEM certificate (chain) of the gRPC expander; its names must include "
        "the host of cluster-autoscaler's --grpc-expander-url",
    )
    grpc_expander_key: Path | None = Field(
        default=None, description="the PEM private key of grpc_expander_cert"
    )
    cluster_autoscaler_version: ClusterAutoscalerVersion = Field(
        default="1.36",
        description="the cluster-autoscaler minor version the priority ConfigMap is read by "
        "(tested: 1.33, 1.34.5, 1.36.1); it decides whether a hand-made entry with a quoted "
        "key such as '\"15\":' is accepted (1.35 and later) or refused (1.34 and earlier)",
    )
    grpc_expander_reactive: ExpanderReactive = Field(
        default="no_opinion",
        description="what the gRPC expander answers when an offered Foresight pool has no "
        "trusted forecast (reactive mode, or no recommendation): 'no_opinion' returns every "
        "offered option (the next expander decides), 'rank' ranks it like the ConfigMap does "
        "(shortfall from live demand, then cost per GPU)",
    )
    grpc_expander_budget_s: float = Field(
        default=1.0,
        gt=0,
        le=4.0,
        description="seconds a gRPC expander call may wait for fresh recommendations before "
        "answering from the last ranking (cluster-autoscaler's deadline is 5 s)",
    )


class CallChainSettings(Section):
    """How call-chain spans are windowed and judged (per service and pool in the pools file).

    Its defaults are those of the analysis (:mod:`api.callchain`) itself, one source each.
    """

    window_seconds: float = Field(
        default=DEFAULT_MAX_AGE.total_seconds(),
        gt=0,
        description="seconds a span counts after it arrives (the analysis window), positive",
    )
    settle_seconds: float = Field(
        default=DEFAULT_SETTLE.total_seconds(),
        ge=0,
        description="seconds after arrival a span is folded into the statistics, so its "
        "parent and children have arrived (an SDK's batch delay), >= 0",
    )
    baseline_factor: float = Field(
        default=DEFAULT_BASELINE_FACTOR,
        gt=1,
        description="a service without an SLO is slow above this times its own baseline p95; "
        "a service's baseline_factor in the pools file overrides it",
    )
    gpu_idle_below: float = Field(
        default=DEFAULT_GPU_IDLE_BELOW,
        ge=0,
        le=100,
        description="GPU utilisation (0-100) under which a pool gets no nodes for latency "
        "(not GPU-bound when its own service is blamed); a pool's gpu_idle_below overrides it",
    )
    max_services: int = Field(
        default=DEFAULT_MAX_SERVICES,
        ge=1,
        description="distinct span service names kept per window; spans of further names "
        "count as service 'other' (foresight_span_services_overflow_total counts them); "
        "the services the pools file names are always kept, >= 1",
    )


class AppSettings(Settings):
    """The deployment's settings: the pipelines' and the API's groups.

    Build it with :func:`load_app_settings`.
    """

    service: ServiceSettings = Field(
        default_factory=ServiceSettings, description="the API's tokens, limits and mode"
    )
    publish: PublishSettings = Field(
        default_factory=PublishSettings, description="Kubernetes objects and webhooks"
    )
    callchain: CallChainSettings = Field(
        default_factory=CallChainSettings, description="the call-chain latency analysis"
    )


def load_app_settings(config_file: Path | None = None, **overrides: Any) -> AppSettings:
    """Build the deployment's settings: :func:`~pipelines.config.settings.load_settings`
    of :class:`AppSettings`, with its arguments and errors."""
    return load_settings(config_file, settings_class=AppSettings, **overrides)
