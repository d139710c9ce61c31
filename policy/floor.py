"""The reactive floor: never fewer nodes than what is demanded right now.

No utilisation target here: that margin is for predicted demand; on work already present
it would make the floor predictive.
Details: docs/policy.md, "Notes from the code", `policy/floor.py`."""

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
