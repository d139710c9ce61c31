"""The reactive floor: never fewer nodes than what is demanded right now.

If the forecast is wrong low, the live signal wins. The floor follows
cluster-autoscaler's semantics, capacity for the work that exists (running plus
pending): ``ceil(current demand / gpus_per_node)`` with *no* utilisation target. The
target is a planning margin for predicted demand; applying it to work that is already
here would make the floor itself predictive (and a pool at 100 % of its nodes would be
told to grow although nothing waits). The margin stays in the forecast term.
"""

from __future__ import annotations

from policy.need import ceil_nodes


def reactive_floor(demand_gpus: float, gpus_per_node: int) -> int:
    """Return the nodes the current demand occupies: ``ceil(demand_gpus / gpus_per_node)``.

    Args:
        demand_gpus: GPUs demanded now (allocated plus queued), >= 0.
        gpus_per_node: GPUs on one node, >= 1.
    """
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    return ceil_nodes(demand_gpus / gpus_per_node)


def apply_floor(need: int, floor: int) -> int:
    """Return the need raised to the floor when the forecast asks for less."""
    return max(need, floor)
