"""A fixed node count, and the smallest fixed count that meets a wait budget in hindsight.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/static.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pandas as pd

from pipelines.simulate.engine import simulate
from pipelines.simulate.result import SimResult
from pipelines.simulate.types import History, PoolLike, SimPool


class StaticPolicy:
    """Always the same number of nodes."""

    def __init__(self, nodes: int) -> None:
        """Store the node count (clamped to the pool's bounds by the engine).

        Raises:
            ValueError: ``nodes`` is negative.
        """
        if nodes < 0:
            raise ValueError(f"nodes must be >= 0, got {nodes}")
        self.nodes = nodes

    def reset(self) -> None:
        """Nothing to forget."""

    def decide(self, history: History) -> int:
        """Return the fixed count."""
        return self.nodes

    def initial_nodes(self, pool: SimPool) -> int:
        """Start at the fixed count."""
        return self.nodes


@dataclass(frozen=True)
class StaticChoice:
    """The outcome of :func:`smallest_static_meeting`.

    Attributes:
        nodes: the smallest count meeting the budget, or ``max_nodes`` when none does.
        met: whether the budget is met (False: even ``max_nodes`` waits too much).
    """

    nodes: int
    result: SimResult
    met: bool


def smallest_static_meeting(
    demand: pd.Series,
    pool: PoolLike,
    *,
    max_waiting_gpu_hours: float | None = None,
    max_p95_wait: timedelta | None = None,
    carry: bool = True,
) -> StaticChoice:
    """Return the fewest fixed nodes whose replay meets every budget given.

    Args:
        demand: the demand series replayed (see :func:`~pipelines.simulate.engine.simulate`).
        carry: the accounting (``simulate``'s ``carry``).
        pool: the pool; the search runs over ``[min_nodes, max_nodes]``.
        max_waiting_gpu_hours: the most waiting GPU-hours allowed (0: no wait at all).
        max_p95_wait: the longest p95 wait allowed.

    Raises:
        ValueError: no budget is given or one is negative.
    """
    if max_waiting_gpu_hours is None and max_p95_wait is None:
        raise ValueError("give max_waiting_gpu_hours, max_p95_wait or both")
    if (max_waiting_gpu_hours is not None and max_waiting_gpu_hours < 0) or (
        max_p95_wait is not None and max_p95_wait < timedelta(0)
    ):
        raise ValueError("wait budgets must be >= 0")

    def meets(result: SimResult) -> bool:
        # A hair of slack so a budget equal to a replay's own figure counts as met.
        if (
            max_waiting_gpu_hours is not None
            and result.waiting_gpu_hours > max_waiting_gpu_hours + 1e-9
        ):
            return False
        return max_p95_wait is None or result.p95_wait <= max_p95_wait

    def run(nodes: int) -> SimResult:
        return simulate(demand, pool, StaticPolicy(nodes), carry=carry)

    low, high = int(pool.min_nodes), int(pool.max_nodes)
    best = run(high)
    if not meets(best):
        return StaticChoice(high, best, met=False)
    while low < high:
        middle = (low + high) // 2
        result = run(middle)
        if meets(result):
            high, best = middle, result
        else:
            low = middle + 1
    return StaticChoice(high, best, met=True)
