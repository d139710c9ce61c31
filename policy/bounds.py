"""Bounds: every recommendation lies in the pool's ``[min_nodes, max_nodes]`` (docs/policy.md)."""

from __future__ import annotations


def clamp(nodes: int, min_nodes: int, max_nodes: int) -> int:
    """Return ``nodes`` limited to ``[min_nodes, max_nodes]``.

    Raises:
        ValueError: ``max_nodes < min_nodes``.
    """
    if max_nodes < min_nodes:
        raise ValueError(f"max_nodes {max_nodes} is below min_nodes {min_nodes}")
    return min(max(nodes, min_nodes), max_nodes)
