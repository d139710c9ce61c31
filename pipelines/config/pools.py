"""Node pools: the unit of every scale decision, as the pools file declares them (docs/jobs.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from string import Template
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from forecaster.types import SeriesId
from pipelines.config.node_groups import CloudProvider, node_group_problem
from pipelines.config.signals import DEFAULT_PROMQL, MAX_SIGNALS_PER_POOL
from policy.config import ScaleDownConfig, parse_duration

_DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_SIGNAL_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")
NEWSVENDOR_MAX = 0.999
"""The highest quantile the cost rule gives (a huge ratio would otherwise round to 1)."""


def newsvendor_quantile(waiting_cost_ratio: float) -> float:
    """Return ``c_wait / (c_wait + c_idle)`` for ``c_wait / c_idle = waiting_cost_ratio``.

    Provisioning ``b`` GPUs for a peak ``D`` costs ``c_idle`` per GPU of ``b - D`` left
    idle and ``c_wait`` per GPU of ``D - b`` left waiting; the expected cost is least at
    the ``c_wait / (c_wait + c_idle)`` quantile of ``D`` (the newsvendor rule), capped
    at :data:`NEWSVENDOR_MAX`.
    """
    if not waiting_cost_ratio > 0:
        raise ValueError(f"waiting_cost_ratio must be > 0, got {waiting_cost_ratio}")
    return min(NEWSVENDOR_MAX, waiting_cost_ratio / (1.0 + waiting_cost_ratio))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SignalSource(_Strict):
    """Where one signal of a pool comes from: a PromQL query or a file column."""

    promql: str | None = Field(
        default=None,
        description="a PromQL query returning one series; $pool and $node_group_id are substituted",
    )
    column: str | None = Field(
        default=None,
        description="the column of a wide metrics file; unset: the long-format series "
        "<pool>/<signal>",
    )


class ServiceConfig(_Strict):
    """A service of the call chain, with its latency SLO.

    Listed under a pool, the service runs on that pool's GPU nodes and a bottleneck in
    it may buy nodes there; listed under the file's top-level ``services``, it runs on
    no GPU pool (a CPU service): a bottleneck in it is reported and never buys GPUs.
    """

    name: str = Field(min_length=1, description="the service name as it appears in traces")
    slo_p95_ms: float | None = Field(
        default=None,
        gt=0,
        description="the p95 latency SLO in milliseconds, > 0 (unset: judged against its "
        "own baseline)",
    )
    baseline_factor: float | None = Field(
        default=None,
        gt=1,
        description="a number > 1: without an SLO, the service is slow above this times its "
        "own baseline p95 (unset: the deployment's callchain.baseline_factor)",
    )


def _default_signals() -> dict[str, SignalSource]:
    return {name: SignalSource(promql=query) for name, query in DEFAULT_PROMQL.items()}


class PoolConfig(_Strict):
    """One node pool (cluster-autoscaler node group) and how to decide its size."""

    name: str = Field(
        pattern=_DNS_LABEL,
        description="a DNS label: lowercase letters, digits and '-', at most 63 characters, "
        "e.g. a100-train",
    )
    node_group_id: str = Field(
        # Inner spaces are allowed (AWS Auto Scaling group names may hold them); edges
        # and line breaks are not, they would never match what the provider reports.
        pattern=r"^\S(.*\S)?$",
        max_length=2048,
        description="the node group id cluster-autoscaler sees (AWS ASG name, GCE MIG URL, "
        "clusterapi Kind/namespace/name), without leading or trailing spaces",
    )
    gpus_per_node: int = Field(default=8, ge=1, description="GPUs on one node, an integer >= 1")
    min_nodes: int = Field(default=0, ge=0, description="the fewest nodes, an integer >= 0")
    max_nodes: int = Field(
        default=100, ge=1, description="the most nodes, an integer >= 1 and >= min_nodes"
    )
    lead_time: timedelta = Field(
        default=timedelta(minutes=10),
        description="time from requesting a node to it running work, a positive duration "
        "such as '10m', '15min', '900s' or 'PT10M'",
    )
    cost_per_node_hour: float = Field(
        # An example, not a quote: the on-demand list price of an AWS p4d.24xlarge
        # (8x A100 40GB) in us-east-1 at its launch. Set each pool's own price.
        default=32.77,
        ge=0,
        description="the price of one node-hour in your currency, a number >= 0",
    )
    target_utilisation: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="the share of a node's GPUs planned to be busy, a number in (0, 1]",
    )
    quantile: float = Field(
        default=0.9,
        gt=0,
        lt=1,
        description="the demand forecast quantile the policy provisions for, in (0, 1); "
        "higher means fewer waits and more cost; set, it overrides waiting_cost_ratio",
    )
    waiting_cost_ratio: float | None = Field(
        default=None,
        gt=0,
        description="what one GPU-hour of waiting work costs relative to one idle GPU-hour, "
        "a number > 0; unless quantile is set, the policy provisions at the newsvendor "
        "quantile ratio / (1 + ratio)",
    )
    safety_margin: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="headroom beyond the peak quantile in units of the demand's recent "
        "volatility (its mean absolute step-to-step change over the trailing day, the peak "
        "model's scale), a finite number >= 0; 0 (the default) provisions the quantile alone",
    )
    signals: dict[str, SignalSource] = Field(
        default_factory=_default_signals,
        description="a mapping of signal name to {promql, column}; defaults are kept for "
        "signals not listed",
    )
    services: list[ServiceConfig] = Field(
        default_factory=list, description="a list of {name, slo_p95_ms} with unique names"
    )
    scale_down: ScaleDownConfig = Field(
        default_factory=ScaleDownConfig,
        description="a mapping {window, max_step_nodes, max_step_percent}",
    )
    gpu_idle_below: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="GPU utilisation (0-100) under which a slow service of the pool is not "
        "GPU-bound (unset: the deployment's callchain.gpu_idle_below)",
    )

    @model_validator(mode="before")
    @classmethod
    def _newsvendor_quantile(cls, data: Any) -> Any:
        # The cost rule fills the quantile only where none is given: quantile overrides.
        if not isinstance(data, Mapping) or "quantile" in data:
            return data
        raw = data.get("waiting_cost_ratio")
        try:
            ratio = float(raw) if raw is not None and not isinstance(raw, bool) else math.nan
        except (TypeError, ValueError):
            return data  # the field's own validation names the bad value
        if math.isfinite(ratio) and ratio > 0:
            return {**data, "quantile": newsvendor_quantile(ratio)}
        return data

    @field_validator("safety_margin", mode="before")
    @classmethod
    def _margin_is_a_number(cls, value: Any) -> Any:
        if isinstance(value, bool):  # YAML's yes/true would otherwise read as 1
            raise ValueError(f"safety_margin must be a number, not {value!r}")
        return value

    @property
    def quantile_rule(self) -> str:
        """Where the quantile comes from: ``newsvendor`` (the cost ratio) or ``quantile``."""
        ratio = self.waiting_cost_ratio
        if ratio is not None and self.quantile == newsvendor_quantile(ratio):
            return "newsvendor"
        return "quantile"

    @field_validator("lead_time", mode="before")
    @classmethod
    def _parse_lead_time(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator("lead_time")
    @classmethod
    def _positive_lead_time(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("lead_time must be positive")
        return value

    @field_validator("signals", mode="before")
    @classmethod
    def _merge_default_signals(cls, value: Any) -> Any:
        # Listing one signal to change its query must not drop the other defaults.
        if not isinstance(value, Mapping):
            return value
        bad = [name for name in value if not _SIGNAL_NAME.match(str(name))]
        if bad:
            raise PydanticCustomError(
                "signal_name",
                "signal names {bad} must be lowercase identifiers such as gpu_util",
                {"bad": bad},
            )
        merged = {**_default_signals(), **value}
        if len(merged) > MAX_SIGNALS_PER_POOL:
            raise PydanticCustomError(
                "too_many_signals",
                "{count} signals are more than the {limit} a pool may declare; "
                "drop the ones no decision or training needs",
                {"count": len(merged), "limit": MAX_SIGNALS_PER_POOL},
            )
        return merged

    @model_validator(mode="after")
    def _check_consistency(self) -> PoolConfig:
        if self.max_nodes < self.min_nodes:
            raise PydanticCustomError(
                "pool_bounds",
                "{max_nodes} is below min_nodes {min_nodes}; raise max_nodes or lower min_nodes",
                {"field": "max_nodes", "max_nodes": self.max_nodes, "min_nodes": self.min_nodes},
            )
        names = [service.name for service in self.services]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise PydanticCustomError(
                "duplicate_service",
                "services {duplicates} are listed more than once; list each service once",
                {"field": "services", "duplicates": duplicates},
            )
        return self

    def promql(self, signal: str) -> str | None:
        """Return the PromQL of a signal with this pool's placeholders filled in."""
        source = self.signals.get(signal)
        if source is None or source.promql is None:
            return None
        return Template(source.promql).safe_substitute(
            pool=self.name, node_group_id=self.node_group_id
        )

    def series_id(self, signal: str) -> str:
        """Return the ``unique_id`` of one of this pool's signals."""
        return str(SeriesId(self.name, signal))


class PoolsConfig(_Strict):
    """Every pool of a deployment; names and node group ids are unique."""

    pools: list[PoolConfig] = Field(
        min_length=1, description="a list of pools, at least one, each with name and node_group_id"
    )
    cloud_provider: CloudProvider | None = Field(
        default=None,
        description="cluster-autoscaler's --cloud-provider ('aws', 'gce' or 'clusterapi'), "
        "to check each node_group_id has the form it reports; unset: only obvious "
        "mistakes are reported",
    )
    services: list[ServiceConfig] = Field(
        default_factory=list,
        description="a list of {name, slo_p95_ms} of call-chain services that run on no GPU "
        "pool (CPU services); their bottlenecks are reported and never buy GPU nodes",
    )

    @model_validator(mode="after")
    def _check_unique(self) -> PoolsConfig:
        problems = []
        for attribute in ("name", "node_group_id"):
            values = [getattr(pool, attribute) for pool in self.pools]
            duplicates = sorted({value for value in values if values.count(value) > 1})
            if duplicates:
                problems.append(f"{attribute} {duplicates} is used by more than one pool")
        if problems:
            problems.append("give each pool its own name and node_group_id")
        listed = [s.name for pool in self.pools for s in pool.services]
        listed += [s.name for s in self.services]
        twice = sorted({name for name in listed if listed.count(name) > 1})
        if twice:
            problems.append(
                f"services {twice} are listed more than once (under two pools, or under a "
                "pool and the top-level services); list each service once, where it runs"
            )
        if problems:
            raise PydanticCustomError(
                "duplicate_pool", "{problems}", {"problems": "; ".join(problems)}
            )
        return self

    def node_group_warnings(self) -> dict[str, str]:
        """Per pool, why its ``node_group_id`` is not in the provider's form (none: absent)."""
        found = {
            pool.name: node_group_problem(pool.node_group_id, self.cloud_provider)
            for pool in self.pools
        }
        return {name: problem for name, problem in found.items() if problem is not None}

    @property
    def names(self) -> list[str]:
        """The pool names, in file order."""
        return [pool.name for pool in self.pools]

    def get(self, name: str) -> PoolConfig:
        """Return the pool called ``name``.

        Raises:
            KeyError: no pool has that name; the message lists the known ones.
        """
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(f"no pool named {name!r}; known pools: {', '.join(self.names)}")
