"""A small synthetic fleet: pools with bursty demand and a queue that leads it."""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_fleet(
    pools: dict[str, float], days: float = 5.0, seed: int = 0, start: str = "2024-01-01"
) -> pd.DataFrame:
    """Long frame of ``<pool>/demand_gpus`` and ``<pool>/pending_gpus`` at 10 min.

    The queue fills a few steps before demand jumps, so it carries information.
    """
    rng = np.random.default_rng(seed)
    n = int(days * 144)
    ds = pd.date_range(start, periods=n, freq="10min", tz="UTC")
    rows = []
    for pool, size in pools.items():
        queue = np.zeros(n)
        arrivals = rng.random(n) < 0.05
        for t in np.flatnonzero(arrivals):
            queue[t : t + 3] += size * 0.1
        running = size * 0.5 + np.cumsum(rng.normal(0, size * 0.005, n))
        admitted = np.r_[np.zeros(3), queue[:-3]] * 0.5
        demand = np.clip(running + np.cumsum(admitted) * 0.05 + queue, 0, None)
        rows.append(pd.DataFrame({"unique_id": f"{pool}/demand_gpus", "ds": ds, "y": demand}))
        rows.append(pd.DataFrame({"unique_id": f"{pool}/pending_gpus", "ds": ds, "y": queue}))
    return pd.concat(rows, ignore_index=True)
