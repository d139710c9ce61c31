"""Bounds: every recommendation lies in the pool's ``[min_nodes, max_nodes]``.

The bounds are the operator's word and beat every other term, the reactive floor
included: a pool capped at ``max_nodes`` cannot grow past it whatever is demanded.
"""

from __future__ import annotations


def clamp(nodes: int, min_nodes: int, max_nodes: int) -> int:
    """Return ``nodes`` limited to ``[min_nodes, max_nodes]``.

    Raises:
        ValueError: ``max_nodes < min_nodes``.
    """
    if max_nodes < min_nodes:
        raise ValueError(f"max_nodes {max_nodes} is below min_nodes {min_nodes}")
    return min(max(nodes, min_nodes), max_nodes)
