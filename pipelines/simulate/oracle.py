"""The oracle: knows the future demand exactly, the limit no real policy can pass.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/oracle.py`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.simulate.engine import demand_index
from pipelines.simulate.types import FloatArray, History, IntArray, SimPool
from policy.need import ceil_nodes


def zero_wait_nodes(demand: FloatArray, pool: SimPool) -> IntArray:
    """Return, per step, the fewest nodes a zero-wait policy must hold (docs/simulate.md)."""
    ratio = demand / pool.gpus_per_node
    # The same float tolerance as ceil_nodes: exactly two nodes of work is two nodes.
    need = np.ceil(ratio - 1e-9 * np.maximum(1.0, ratio)).clip(min=0).astype(np.int64)
    lead = pool.lead_steps
    # Nothing is known after the series ends, so nothing is needed there.
    padded = np.concatenate([need, np.zeros(lead, dtype=np.int64)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, lead + 1)
    return np.asarray(windows.max(axis=1), dtype=np.int64)


class OraclePolicy:
    """Holds the zero-wait lower bound at every step, knowing the future."""

    def __init__(self, demand: pd.Series) -> None:
        """Store the series the oracle will be replayed on (it must be the same one)."""
        self.index, self.step = demand_index(demand)
        self.demand: FloatArray = demand.to_numpy(dtype=np.float64)
        self._plan: IntArray | None = None

    def reset(self) -> None:
        """Forget the plan (it depends on the pool of the run)."""
        self._plan = None

    def decide(self, history: History) -> int:
        """Return the zero-wait bound of step ``t``, or more for a backlog.

        Raises:
            ValueError: the run replays a different series than the oracle was built on.
        """
        if self._plan is None:
            if history.timestamps[0] != self.index[0] or history.pool.step != self.step:
                raise ValueError(
                    "the oracle was built on a series starting "
                    f"{self.index[0]} with step {self.step}; it is replayed on one starting "
                    f"{history.timestamps[0]} with step {history.pool.step}"
                )
            self._plan = zero_wait_nodes(self.demand, history.pool)
        floor = ceil_nodes(history.wanted_now / history.pool.gpus_per_node)
        return max(int(self._plan[history.t]), floor)
