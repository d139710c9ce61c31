"""Stabilisation: scale up at once, scale down slowly and only when it has held.

Like the HPA's scale-down window, over desired values held as step functions; the step
is measured from the ready nodes, so replicas and repeated reads agree.
Details: docs/policy.md, "Notes from the code", `policy/stabilise.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from policy.config import ScaleDownConfig
from policy.state import DesiredSpan, LatencyCause, StabilisationState
from policy.types import require_aware

StabilisationLimit = Literal["window", "step", "warming_up"]
"""What held a scale-down back: a higher value in the window, the step, or a young history."""


@dataclass(frozen=True)
class Stabilised:
    """The result of stabilisation.

    Attributes:
        nodes: the stabilised desired nodes.
        window_max: the largest desired value in force during the window (this one included).
        limited_by: what held the number above ``raw``, None when nothing did.
        state: the state to keep for the next decision.
        held: when the window held a scale-down (``limited_by == "window"``), the
            earlier desired value that held it, with its latency cause; else None.
    """

    nodes: int
    window_max: int
    limited_by: StabilisationLimit | None
    state: StabilisationState
    held: DesiredSpan | None = None


def record(
    state: StabilisationState,
    raw: int,
    now: datetime,
    window: timedelta,
    latency: LatencyCause | None = None,
    basis: datetime | None = None,
) -> StabilisationState:
    """Return the state with the decision ``raw`` at ``now`` added and expired spans dropped.

    Args:
        now: the decision time (timezone-aware).
        latency: the nodes of ``raw`` there only for call-chain latency, None if none.
        basis: when the forecast this decision used was made (None: no forecast).
    """
    require_aware(now, "now")
    if _supersedes(state, now, basis) and state.previous is not None:
        state = state.previous  # replaces the decisions made at this instant from older data
    if _same_forecast(state, now, basis) and state.previous is not None:
        before = state.previous  # this instant's decisions from one forecast go as one
    else:
        before = replace(state, previous=None)
    spans = list(state.spans)
    if spans:
        # The previous value held until it was replaced now (never shrink under skew).
        latest = spans[-1]
        spans[-1] = replace(latest, end=max(latest.end, now))
    if not spans or spans[-1].nodes != raw or spans[-1].latency != latency:
        spans.append(DesiredSpan(raw, now, now, latency))
    kept: list[DesiredSpan] = []
    for span in reversed(spans):
        # Newest first: keep a span only if it beats everything after it.
        if not kept or span.nodes > kept[-1].nodes:
            kept.append(span)
    cutoff = now - window
    newest = kept[0]
    alive = [s for s in reversed(kept) if s is newest or s.end > cutoff]
    return StabilisationState(
        spans=tuple(alive),
        tracked_since=state.tracked_since if state.tracked_since is not None else now,
        last_decision_at=now,
        last_scale_up_at=state.last_scale_up_at,
        last_basis=basis,
        previous=before,
    )


def _supersedes(state: StabilisationState, now: datetime, basis: datetime | None) -> bool:
    """Whether a decision at ``now`` from ``basis`` replaces the last one (docs/policy.md)."""
    last = state.last_basis
    return state.last_decision_at == now and basis is not None and last is not None and basis > last


def _same_forecast(state: StabilisationState, now: datetime, basis: datetime | None) -> bool:
    """Whether a decision at ``now`` from ``basis`` joins the last one's instant and forecast."""
    return state.last_decision_at == now and basis is not None and state.last_basis == basis


def stabilise(
    raw: int,
    current_nodes: int,
    state: StabilisationState,
    scale_down: ScaleDownConfig,
    now: datetime,
    *,
    latency: LatencyCause | None = None,
    basis: datetime | None = None,
) -> Stabilised:
    """Apply the scale-down window and step to a desired node count.

    Args:
        raw: desired nodes before stabilisation (after bounds).
        state: what earlier decisions left (empty for the first one).
        now: the decision time (timezone-aware).
        latency: the nodes of ``raw`` there only for call-chain latency, remembered
            with the value so a later hold can name the cause.
        basis: when the forecast this decision used was made (None: no forecast).

    Returns:
        The stabilised count, what limited it, the span that held it, and the new
        state. A scale-up (``raw`` above the ready nodes) is never delayed.
    """
    updated = record(state, raw, now, scale_down.window, latency, basis)
    # Spans strictly decrease, so the oldest kept one is the window's maximum.
    top = updated.spans[0]
    window_max = top.nodes
    limited_by: StabilisationLimit | None = None
    if window_max >= current_nodes:
        nodes = window_max
        if window_max > raw:
            limited_by = "window"
    elif updated.tracked_since is not None and now - updated.tracked_since < scale_down.window:
        nodes, limited_by = current_nodes, "warming_up"
    else:
        lowest = current_nodes - scale_down.step_nodes(current_nodes)
        nodes = max(window_max, lowest)
        if lowest > window_max:
            limited_by = "step"
        elif window_max > raw:
            limited_by = "window"
    if nodes > current_nodes:
        updated = replace(updated, last_scale_up_at=now)
    held = top if limited_by == "window" else None
    return Stabilised(nodes, window_max, limited_by, updated, held)
