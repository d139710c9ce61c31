"""The explanation: which term set the number, and every input's value and age.

The term is the last step of the chain that changed the number.
Details: docs/policy.md, "Notes from the code", `policy/explain.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from policy.need import PeakDemand, nodes_for_gpus
from policy.stabilise import StabilisationLimit
from policy.state import DesiredSpan
from policy.types import Calibration, HealthReason, LatencyAdjustment, Mode, Sample, Term, iso_utc


@dataclass(frozen=True)
class Stages:
    """The node count after each step of the chain.

    Attributes:
        forecast_nodes: nodes for the forecast peak (None in reactive mode).
        latency_nodes: ``forecast_nodes`` plus the applied latency nodes (None in
            reactive mode).
        floor_nodes: nodes the current demand occupies.
        need: the need after the floor (in reactive mode: the floor).
        bounded: ``need`` clamped to the pool's bounds.
        window_max: the largest desired value in force during the stabilisation window.
        final: after the final clamp (stabilisation can hold a count above a lowered
            ``max_nodes``; the bounds win).
    """

    mode: Mode
    forecast_nodes: int | None
    latency_nodes: int | None
    floor_nodes: int
    need: int
    bounded: int
    window_max: int
    stabilised: int
    final: int


def term_that_set(stages: Stages) -> Term:
    """Return the last step of the chain that changed the node count."""
    if stages.final != stages.stabilised:
        return "bounds"
    if stages.stabilised != stages.bounded:
        return "stabilisation"
    if stages.bounded != stages.need:
        return "bounds"
    if stages.mode == "reactive" or stages.forecast_nodes is None or stages.latency_nodes is None:
        return "reactive"
    if stages.floor_nodes > stages.latency_nodes:
        return "floor"
    if stages.latency_nodes > stages.forecast_nodes:
        return "latency"
    return "forecast"


@dataclass(frozen=True)
class InputReading:
    """One input of the decision: its value, when it was taken and how old it was."""

    value: float | None
    at: datetime | None
    age_seconds: float | None

    @classmethod
    def of(cls, value: float | None, at: datetime | None, now: datetime) -> InputReading:
        """Return the reading with its age at ``now`` (None when ``at`` is unknown)."""
        age = None if at is None else (now - at).total_seconds()
        return cls(value, at, age)

    @classmethod
    def of_sample(cls, sample: Sample | None, now: datetime) -> InputReading:
        """Return the reading of a live sample, all None when it is missing."""
        if sample is None:
            return cls(None, None, None)
        return cls.of(sample.value, sample.at, now)


@dataclass(frozen=True)
class HeldLatency:
    """Nodes added for call-chain latency that stabilisation still holds.

    Attributes:
        nodes: the nodes of the held value that were there only for latency.
        services: the services whose latency asked for them.
        until: the decision that first no longer wanted them (the latency had ended
            or asked for less by then).
        released_at: when the held value leaves the scale-down window, if no later
            decision wants as many nodes.
        reason: why latency asked for them, as the analysis said then ('' if unknown).
    """

    nodes: int
    services: tuple[str, ...]
    until: datetime
    released_at: datetime
    reason: str = ""

    @classmethod
    def of(cls, held: DesiredSpan | None, window: timedelta) -> HeldLatency | None:
        """Return what latency added to the value holding a scale-down, None if nothing."""
        if held is None or held.latency is None:
            return None
        cause = held.latency
        return cls(cause.nodes, cause.services, held.end, held.end + window, cause.reason)

    def describe(self, latency_now: LatencyAdjustment) -> str:
        """Say, for the summary, which nodes latency added and how long they are held.

        Args:
            latency_now: this decision's adjustment: the latency has ended when it asks
                for no nodes.
        """
        cause = "call-chain latency"
        if self.services:
            cause += " of " + ", ".join(self.services)
        if latency_now.extra_nodes:
            ended = f"until {iso_utc(self.until)} (it now asks for {latency_now.extra_nodes})"
        else:
            ended = f"which ended by {iso_utc(self.until)}"
        return (
            f"{self.nodes} of them were added for {cause}, {ended}; stabilisation holds "
            f"them until {iso_utc(self.released_at)}"
        )


@dataclass(frozen=True)
class Explanation:
    """Why the recommendation says what it says.

    Attributes:
        term: the step that set the number (see :func:`term_that_set`).
        mode: predictive, or reactive when the forecast failed a health check.
        summary: the reasoning in one line of prose.
        health_reasons: the failed health checks (empty in predictive mode).
        health_detail: one sentence per failed check.
        stages: the node count after each step.
        inputs: every input by name with its value and age.
        forecast_peak_at: when the forecast peak is due, None without a usable forecast.
        latency: the call-chain adjustment as received.
        latency_applied: the latency nodes actually added.
        stabilisation_limit: what held a scale-down back, None when nothing did.
        held_latency: when the window holds a value that call-chain latency raised,
            those nodes and their cause; else None.
        settings: the pool settings the decision used, as plain numbers.
    """

    term: Term
    mode: Mode
    summary: str
    health_reasons: tuple[HealthReason, ...]
    health_detail: str
    stages: Stages
    inputs: Mapping[str, InputReading]
    forecast_peak_at: datetime | None
    latency: LatencyAdjustment
    latency_applied: int
    stabilisation_limit: StabilisationLimit | None
    held_latency: HeldLatency | None
    settings: Mapping[str, float]


def summarise(
    stages: Stages,
    term: Term,
    *,
    health_detail: str,
    peak_gpus: float | None,
    level: float | None,
    demand_gpus: float,
    current_nodes: int,
    latency: LatencyAdjustment,
    latency_applied: int,
    limit: StabilisationLimit | None,
    held_latency: HeldLatency | None = None,
    settings: Mapping[str, float],
    calibration: Calibration | None = None,
    peak: PeakDemand | None = None,
) -> str:
    """Return the reasoning as one line of prose, ending with the term that set the number.

    ``peak`` says where the provisioned value came from (the stored peak forecast, or
    the per-horizon fallback and why); without it the fallback's words are used.
    """
    gpn = int(settings["gpus_per_node"])
    from_peak = peak is not None and peak.source == "peak"
    utilisation = 1.0 if from_peak else settings["target_utilisation"]
    if stages.mode == "reactive":
        parts = [f"reactive mode: {health_detail}"]
    elif peak_gpus is not None and level is not None:
        parts = [
            _forecast_words(stages, peak_gpus, level, demand_gpus, settings, calibration, peak)
        ]
    else:
        parts = []
    parts.extend(_latency_words(stages, latency, latency_applied))
    parts.append(
        f"live demand of {demand_gpus:.4g} GPUs occupies {stages.floor_nodes} nodes (the floor)"
    )
    if stages.bounded != stages.need or stages.final != stages.stabilised:
        parts.append(f"the bounds [{settings['min_nodes']:g}, {settings['max_nodes']:g}] apply")
    held = _limit_words(stages, limit, current_nodes, settings, held_latency, latency)
    if held is not None:
        parts.append(held)
    parts.append(_set_by(stages, term, peak_gpus, demand_gpus, gpn, utilisation))
    return "; ".join(parts)


def _forecast_words(
    stages: Stages,
    peak_gpus: float,
    level: float,
    demand_gpus: float,
    settings: Mapping[str, float],
    calibration: Calibration | None,
    peak: PeakDemand | None,
) -> str:
    """Say where the provisioned value came from: the peak forecast or the fallback."""
    gpn = int(settings["gpus_per_node"])
    from_peak = peak is not None and peak.source == "peak"
    rule = ""
    if "waiting_cost_ratio" in settings:
        rule = (
            f" (the newsvendor quantile: a waiting GPU-hour costs "
            f"{settings['waiting_cost_ratio']:g}x an idle one)"
        )
    if from_peak and peak is not None and peak.raw is not None:
        rule += (
            f", the model's {peak.raw:.4g} GPUs moved {peak.value - peak.margin - peak.raw:+.3g} "
            "by online calibration and its mix with the trailing-day buffer,"
        )
    elif calibration is not None:
        rule += (
            f", {calibration.offset:+.3g} GPUs of live calibration (its raw bounds covered "
            f"{calibration.live_coverage:.0%} of the last {calibration.forecasts} "
            "realised forecasts),"
        )
    if from_peak and peak is not None and peak.returning is not None:
        rule += (
            f" held at {peak.returning:.4g} GPUs, the most demand reached in the hour "
            "before the idle spell it has just come back from (work that returns after "
            "an outage mostly comes back whole),"
        )
    rule += _margin_words(peak, settings)
    if from_peak and peak is not None and peak.lead is not None:
        return (
            f"q{level:g} of the demand peak over the next {_duration(peak.lead)}"
            f"{rule} is {peak_gpus:.4g} GPUs{_rebased(peak, demand_gpus)}; at {gpn} GPUs "
            f"per node that is {stages.forecast_nodes} nodes (no target-utilisation "
            "margin on a peak quantile: the quantile level is the margin)"
        )
    else:
        missing = "" if peak is None else f" (no peak forecast: {peak.missing}; the "
        if missing:
            missing += "largest per-step quantile over the window, which is not a "
            missing += "quantile of the peak)"
        return (
            f"the q{level:g} demand forecast{rule} peaks at {peak_gpus:.4g} GPUs within "
            f"the lead time plus one step{missing}; "
            f"at {gpn} GPUs per node and {settings['target_utilisation']:.0%} target "
            f"utilisation that is {stages.forecast_nodes} nodes"
        )


def _margin_words(peak: PeakDemand | None, settings: Mapping[str, float]) -> str:
    """Say what the pool's safety margin added, or why it could not."""
    if peak is None:
        return ""
    if peak.margin > 0:
        return (
            f" plus a safety margin of {settings.get('safety_margin', 0.0):g} x the demand's "
            f"recent volatility ({peak.margin:.3g} GPUs),"
        )
    if peak.margin_missing:
        return f" (no safety margin: {peak.margin_missing})"
    return ""


def _limit_words(
    stages: Stages,
    limit: StabilisationLimit | None,
    current_nodes: int,
    settings: Mapping[str, float],
    held_latency: HeldLatency | None,
    latency: LatencyAdjustment,
) -> str | None:
    """Say what stabilisation held back, if anything."""
    if limit == "window":
        held = (
            f"scale-down held at {stages.window_max} nodes, the highest desired value of the "
            f"last {settings['scale_down_window_seconds'] / 60:g} min"
        )
        if held_latency is not None:
            held += "; " + held_latency.describe(latency)
        return held
    elif limit == "step":
        return (
            f"scale-down limited to {current_nodes - stages.stabilised} node(s) below the "
            f"{current_nodes} ready (at most {settings['max_step_nodes']:g} or "
            f"{settings['max_step_percent']:g} % of them per decision)"
        )
    elif limit == "warming_up":
        return (
            "scale-down waits until the decision history spans the "
            f"{settings['scale_down_window_seconds'] / 60:g} min window"
        )
    return None


def _latency_words(stages: Stages, latency: LatencyAdjustment, applied: int) -> list[str]:
    """Say what call-chain latency did, once: each verdict in its own words."""
    words: list[str] = []
    if latency.outside:
        names = ", ".join(latency.outside)
        verb, own = ("is", "its") if len(latency.outside) == 1 else ("are", "their")
        words.append(
            f"{names} (on no GPU pool) {verb} slow in {own} own work; buying GPUs will not help"
        )
    if latency.not_gpu_bound:
        words.append(
            "the pool is not GPU-bound (its GPUs idle while its own services are slow), so "
            f"no nodes are added for latency ({latency.reason or 'no reason given'})"
        )
    elif applied and stages.mode == "predictive":
        words.append(f"call-chain latency adds {applied} nodes ({latency.reason})")
    elif latency.extra_nodes and stages.mode == "reactive":
        words.append(f"the {latency.extra_nodes} latency nodes are not added in reactive mode")
    return words


def _duration(delta: timedelta) -> str:
    minutes = delta.total_seconds() / 60
    return f"{minutes:g} min" if minutes < 120 else f"{minutes / 60:g} h"


def _rebased(peak: PeakDemand, demand_gpus: float) -> str:
    """Say when the stored headroom was carried over to newer live demand."""
    if peak.rebased_from is None:
        return ""
    return (
        f" (the forecast made at {iso_utc(peak.rebased_from)} gave "
        f"{peak.value - demand_gpus:+.4g} GPUs of headroom, carried over to the newer live "
        f"demand of {demand_gpus:.4g} GPUs)"
    )


def _set_by(
    stages: Stages,
    term: Term,
    peak_gpus: float | None,
    demand_gpus: float,
    gpus_per_node: int,
    utilisation: float,
) -> str:
    """The closing clause; a forecast term says what the forecast added over live demand."""
    closing = f"{stages.final} nodes, set by {term}"
    if term != "forecast" or peak_gpus is None or stages.forecast_nodes is None:
        return closing
    at_target = nodes_for_gpus(demand_gpus, gpus_per_node, utilisation)
    if at_target >= stages.forecast_nodes and utilisation >= 1.0:
        return (
            f"{stages.final} nodes: live demand already needs {at_target} nodes and the "
            f"forecast peak ({peak_gpus - demand_gpus:+.4g} GPUs over live demand) adds none"
        )
    if at_target >= stages.forecast_nodes:
        return (
            f"{stages.final} nodes, set by the target utilisation: live demand at "
            f"{utilisation:.0%} already needs {at_target} nodes and the "
            f"forecast peak ({peak_gpus - demand_gpus:+.4g} GPUs over live demand, its "
            "interval included) adds none"
        )
    return (
        f"the forecast peak is {peak_gpus - demand_gpus:+.4g} GPUs over live demand (its "
        f"interval included), {stages.forecast_nodes - at_target} node(s) beyond the "
        f"{at_target} live demand needs at the target utilisation; {closing}"
    )
