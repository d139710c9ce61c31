"""The recommendation for one pool: the number, the action, headroom and provenance.

Details: docs/policy.md, "Notes from the code", `policy/recommendation.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from policy.explain import Explanation
from policy.state import StabilisationState
from policy.types import Action, Mode


def action_for(current_nodes: int, desired_nodes: int) -> Action:
    """Return ``scale_up``, ``hold`` or ``scale_down`` for a change of node count."""
    if desired_nodes > current_nodes:
        return "scale_up"
    if desired_nodes < current_nodes:
        return "scale_down"
    return "hold"


def headroom(
    desired_nodes: int, floor_nodes: int, gpus_per_node: int, gpus_per_pod: int | None = None
) -> tuple[int, int]:
    """Return the headroom in nodes and in placeholder pods.

    Args:
        floor_nodes: the nodes the current demand occupies.
        gpus_per_pod: GPUs one placeholder pod requests; default a whole node.

    Returns:
        ``(headroom_nodes, headroom_pods)``; pods round down so placeholders never
        ask for more than the headroom.
    """
    per_pod = gpus_per_node if gpus_per_pod is None else gpus_per_pod
    if per_pod < 1 or per_pod > gpus_per_node:
        raise ValueError(f"gpus_per_pod must be in [1, {gpus_per_node}], got {per_pod}")
    nodes = max(0, desired_nodes - floor_nodes)
    return nodes, nodes * gpus_per_node // per_pod


@dataclass(frozen=True)
class Recommendation:
    """What one pool should look like, why, and for how long the answer holds.

    Attributes:
        current_nodes: nodes ready now.
        delta: ``desired_nodes - current_nodes``.
        action: scale_up, hold or scale_down.
        headroom_nodes: desired nodes beyond those the current demand occupies.
        headroom_pods: placeholder pods for that headroom.
        gpus_per_placeholder_pod: GPUs each placeholder pod requests.
        quantile: the forecast quantile level provisioned for.
        forecast_quantiles: the window peak (GPUs) of each forecast quantile level;
            empty when no forecast covered the window.
        explanation: the term that set the number and every input.
        model_version: the model behind the forecast, None without one.
        data_freshness_seconds: age of the oldest live reading decided on.
        generated_at: the decision time.
        valid_until: when the recommendation should be recomputed.
        state: the stabilisation state to keep for the next decision (for the store,
            not for consumers: the wire form, ``api.schemas.PoolRecommendation``,
            leaves it out).
    """

    pool: str
    current_nodes: int
    desired_nodes: int
    delta: int
    action: Action
    headroom_nodes: int
    headroom_pods: int
    gpus_per_placeholder_pod: int
    quantile: float
    forecast_quantiles: Mapping[float, float]
    mode: Mode
    explanation: Explanation
    model_version: str | None
    data_freshness_seconds: float
    generated_at: datetime
    valid_until: datetime
    state: StabilisationState
