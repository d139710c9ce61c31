"""The verdict on one service: its record, and the words said about it (docs/api.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from api.callchain.baseline import BaselineState
from api.callchain.types import finite_or_none
from policy.types import LatencyAdjustment

OVERFLOW_SERVICE: Final = "other"
"""Where spans of services past the window's cap on distinct names are counted."""

ServiceStatus = Literal["ok", "near", "slow", "insufficient_data", "unjudged"]
"""How a service's call duration stands against its threshold (``unjudged``: no SLO nor
ready baseline)."""

ThresholdSource = Literal["slo", "baseline", "none"]
"""Where a service's threshold came from."""

Verdict = Literal[
    "bottleneck",
    "not_gpu_bound",
    "outside_gpu_pools",
    "waiting_on_callee",
    "scaled_with_upstream",
    "ok",
    "near",
    "insufficient_data",
    "unjudged",
]
"""The conclusion on one service: blamed on a GPU-bound pool (``bottleneck``), blamed
on a pool whose GPUs idle (``not_gpu_bound``), blamed on no GPU pool
(``outside_gpu_pools``), slow only waiting on its callees, scaled with a culprit
upstream, or its status when none of these."""


@dataclass(frozen=True)
class ServiceReport:
    """The verdict on one service, for the explanation and a dashboard.

    Attributes:
        pool: the pool it runs on, None when no pool lists it.
        status: how its p95 call duration stands against its threshold.
        p95_ms: p95 call duration (NaN without calls).
        self_p95_ms: p95 self time (NaN without calls).
        threshold_ms: the p95 it is judged against, None when not judged.
        threshold_source: where ``threshold_ms`` came from.
        own_p95_ms: p95 of its exclusive time (duration minus time in callees); None
            without calls.
        residual_p95_ms: p95 with its slow callees' excess removed; None unless slow.
        own_baseline_p95_ms: its usual exclusive p95; None until ready.
        recent_own_p95_ms: its exclusive p95 over the recent part of the window; None
            when not kept or with too few calls there.
        own_limit_ms: the most exclusive p95 that is healthy: the smaller of its
            threshold and k x its usual exclusive p95; None when neither is known.
        own_slow: its own work is past ``own_limit_ms`` (it is blamed for that alone).
        scaled_with: the culprits upstream of it that it is scaled with.
        extra_nodes: the nodes it asks of its pool before the cap and GPU check.
        verdict: the conclusion (see :data:`Verdict`).
        slows_pools: for a culprit on no GPU pool, the pools whose services share its
            call chain.
    """

    service: str
    pool: str | None
    status: ServiceStatus
    call_count: int
    p95_ms: float
    self_p95_ms: float
    threshold_ms: float | None
    threshold_source: ThresholdSource
    own_p95_ms: float | None = None
    residual_p95_ms: float | None = None
    own_baseline_p95_ms: float | None = None
    recent_own_p95_ms: float | None = None
    own_limit_ms: float | None = None
    own_slow: bool = False
    culprit: bool = False
    scaled_with: tuple[str, ...] = ()
    extra_nodes: int = 0
    note: str = ""
    verdict: Verdict = "unjudged"
    slows_pools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form (NaN becomes null)."""
        return {
            "service": self.service,
            "pool": self.pool,
            "status": self.status,
            "call_count": self.call_count,
            "p95_ms": finite_or_none(self.p95_ms),
            "self_p95_ms": finite_or_none(self.self_p95_ms),
            "threshold_ms": self.threshold_ms,
            "threshold_source": self.threshold_source,
            "own_p95_ms": self.own_p95_ms,
            "residual_p95_ms": self.residual_p95_ms,
            "own_baseline_p95_ms": self.own_baseline_p95_ms,
            "recent_own_p95_ms": self.recent_own_p95_ms,
            "own_limit_ms": self.own_limit_ms,
            "own_slow": self.own_slow,
            "culprit": self.culprit,
            "verdict": self.verdict,
            "scaled_with": list(self.scaled_with),
            "slows_pools": list(self.slows_pools),
            "extra_nodes": self.extra_nodes,
            "note": self.note,
        }


def verdict_of(report: ServiceReport, gpus_idle: bool) -> Verdict:
    """Return the conclusion on a judged service (``gpus_idle``: its pool's GPUs idle)."""
    if report.culprit:
        if report.pool is None:
            return "outside_gpu_pools"
        return "not_gpu_bound" if gpus_idle else "bottleneck"
    if report.scaled_with:
        return "scaled_with_upstream"
    if report.status == "slow":
        return "waiting_on_callee"
    return report.status


def note_of(report: ServiceReport, gpus_idle: bool) -> str:
    """Return the verdict on one service as one sentence.

    Args:
        report: the judged service (``culprit``, ``scaled_with``, ``extra_nodes`` set).
        gpus_idle: its pool's GPUs idle, so the nodes it asks for are not added; the
            sentence then says so rather than stating them.
    """
    if report.status == "insufficient_data":
        return f"{report.service}: {report.call_count} calls in the window, too few to judge"
    if report.status == "unjudged" and not report.culprit:
        return f"{report.service}: no SLO and no baseline yet, not judged"
    parts = [_label(report)]
    own = report.own_p95_ms or 0.0
    usual = report.own_baseline_p95_ms
    as_usual = "" if usual is None else f", usual {usual:.0f} ms"
    if report.culprit:
        parts.append(
            f"slow in its own work (own p95 {own:.0f} ms exclusive of callees{as_usual}"
            + _limit(report)
            + ")"
        )
    elif report.status == "slow":
        parts.append(
            f"slow only waiting on its callees (own p95 {own:.0f} ms exclusive of "
            f"callees{as_usual}), not blamed"
        )
    if report.scaled_with:
        parts.append(
            f"{report.status}, downstream of {', '.join(report.scaled_with)}: scaled with it"
        )
    if report.pool is None and report.culprit:
        suffix = (
            "; it runs on no GPU pool (bottleneck outside every GPU pool): buying GPU nodes "
            "will not help, fix or scale the service itself"
        )
    elif report.pool is None and report.status in ("slow", "near"):
        suffix = "; it runs on no GPU pool, so no nodes are added for it"
    elif report.extra_nodes and gpus_idle:
        suffix = "; its pool's GPUs idle, so no nodes are added for it"
    else:
        suffix = f": +{report.extra_nodes} nodes" if report.extra_nodes else ""
    return ", ".join(parts) + suffix


def _label(report: ServiceReport) -> str:
    if report.threshold_ms is None:
        return f"{report.service} p95 {report.p95_ms:.0f} ms"
    kind = "SLO" if report.threshold_source == "slo" else "baseline threshold"
    return f"{report.service} p95 {report.p95_ms:.0f} ms vs {kind} {report.threshold_ms:.0f} ms"


def _limit(report: ServiceReport) -> str:
    """Say which bound the own work broke, or the residual that blamed it."""
    if report.own_slow and report.own_limit_ms is not None:
        recent, own = report.recent_own_p95_ms, report.own_p95_ms or 0.0
        lately = "" if recent is None or recent <= own else f", {recent:.0f} ms lately"
        return f"{lately}, over its healthy {report.own_limit_ms:.0f} ms"
    if report.residual_p95_ms is not None:
        return f", {report.residual_p95_ms:.0f} ms without slow callees' excess"
    return ""


@dataclass(frozen=True)
class LatencyAnalysis:
    """The result of one analysis.

    Attributes:
        adjustments: pool name -> what latency asks of it, for every pool passed in.
        services: service name -> its report, for every service seen or configured.
        baselines: the baselines updated with this window; pass them to the next call.
    """

    adjustments: Mapping[str, LatencyAdjustment]
    services: Mapping[str, ServiceReport]
    baselines: BaselineState

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready form of the adjustments and the service reports."""
        return {
            "pools": {
                name: {
                    "extra_nodes": adj.extra_nodes,
                    "reason": adj.reason,
                    "not_gpu_bound": adj.not_gpu_bound,
                    "outside_gpu_pools": list(adj.outside),
                }
                for name, adj in self.adjustments.items()
            },
            "services": {name: report.to_dict() for name, report in self.services.items()},
        }
